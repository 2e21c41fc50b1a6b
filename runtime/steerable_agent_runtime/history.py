"""The history record: the per-chat, append-only, model-visible log.

Entries are JSON objects discriminated by ``type`` (``item``, ``compaction_boundary``,
``seed``). Every written entry carries ``"v": RECORD_FORMAT_VERSION``; v1 is the same
envelope without ``v``. Reads upgrade in memory through :func:`upgrade_entry_dict`, the one
seam for future migrations; nothing on disk is ever rewritten.

Reads fail closed: an entry with a newer ``v``, an unknown ``type`` or a shape that does
not parse raises :class:`RecordFormatError` naming record, seq, version and the remedy.
There is no skip-and-continue read path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol, Union

from pydantic import Field, ValidationError
from pydantic_core import to_json

from .errors import DataIntegrityError, RecordFormatError
from .models import CHAT_ROLES, LLMMessage, Timestamp, WireModel, has_lone_surrogate, is_one_of, is_stored_timestamp

RECORD_FORMAT_VERSION = 2
"""The newest record version this build reads and the version it writes."""

ENTRY_TYPES = ("item", "compaction_boundary", "seed")
CHECKPOINT_TYPES = ("compaction_boundary", "seed")
"""Entry types a resume can start from: the transcript is rebuilt from the newest one."""


class _EntryBase(WireModel):
    v: int
    type: str  # narrowed to a Literal by each entry model; declared here to keep wire order
    seq: int
    at: Timestamp


class HistoryItem(_EntryBase):
    """One LLMMessage appended to the transcript."""

    type: Literal["item"]
    message: LLMMessage


class CompactionBoundary(_EntryBase):
    """A declared rewrite: the model continues from ``replacement``."""

    type: Literal["compaction_boundary"]
    trigger: Literal["pressure", "overflow", "micro", "manual"]
    pre_tokens: int
    post_tokens: int
    replacement: list[LLMMessage]


class SeedOrigin(WireModel):
    """Where a seeded record was forked from."""

    record_id: str
    seq: int


class HistorySeed(_EntryBase):
    """The initial transcript of a record, optionally forked from another record."""

    type: Literal["seed"]
    messages: list[LLMMessage]
    origin: SeedOrigin | None = None


HistoryEntry = Annotated[Union[HistoryItem, CompactionBoundary, HistorySeed], Field(discriminator="type")]
"""The entry union, discriminated by ``type`` (for pydantic fields and TypeAdapters)."""
HistoryModel = HistoryItem | CompactionBoundary | HistorySeed
_MODEL_BY_TYPE: dict[str, type[HistoryModel]] = {"item": HistoryItem, "compaction_boundary": CompactionBoundary,
                                                  "seed": HistorySeed}

# The migration seam: UPGRADES[n] turns a v-n dict into a v-(n+1) dict. v1 -> v2 is the
# stamp and nothing else (the envelopes are field-identical).
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: lambda entry: {"v": 2, **{k: val for k, val in entry.items() if k != "v"}},
}


def _where(record_id: str | None, seq: Any) -> str:
    return f"record {record_id!r} seq {seq}" if record_id is not None else f"entry seq {seq}"


def entry_version(entry: Mapping[str, Any]) -> Any:
    """The version an entry dict declares: its ``v``, or 1 when absent."""
    return entry.get("v", 1)


def upgrade_entry_dict(entry: Any, *, record_id: str | None = None) -> dict[str, Any]:
    """Return a copy of ``entry`` upgraded in memory to RECORD_FORMAT_VERSION.

    Never mutates ``entry``. Raises RecordFormatError when the entry is not a JSON object,
    declares a version this build does not read (newer, or not a positive integer), or
    has a ``type`` this build does not know.
    """
    seq = entry.get("seq") if isinstance(entry, dict) else None
    if not isinstance(entry, dict):
        raise RecordFormatError(
            f"{_where(record_id, seq)}: entry is not a JSON object; the record was not modified",
            record_id=record_id, hint="run `steerable-maint check DB` to locate the damage",
        )
    version = entry_version(entry)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordFormatError(
            f"{_where(record_id, seq)}: entry declares version {version!r}, not a record version;"
            " the record was not modified",
            record_id=record_id, seq=seq if isinstance(seq, int) else None,
            hint="run `steerable-maint check DB` to locate the damage",
        )
    if version > RECORD_FORMAT_VERSION:
        raise RecordFormatError(
            f"{_where(record_id, seq)}: written by a newer build (v{version}; this build reads up to"
            f" v{RECORD_FORMAT_VERSION}): upgrade the app; the record was not modified",
            record_id=record_id, seq=seq if isinstance(seq, int) else None, version=version,
        )
    upgraded = dict(entry)
    while entry_version(upgraded) < RECORD_FORMAT_VERSION:
        upgraded = UPGRADES[entry_version(upgraded)](upgraded)
    if not is_one_of(upgraded.get("type"), _MODEL_BY_TYPE):
        raise _unknown_type(upgraded, record_id, version)
    return upgraded


def _unknown_type(entry: dict[str, Any], record_id: str | None, version: Any) -> RecordFormatError:
    seq = entry.get("seq")
    return RecordFormatError(
        f"{_where(record_id, seq)}: unknown entry type {entry.get('type')!r} (v{version}):"
        " written by a newer build; upgrade the app; the record was not modified",
        record_id=record_id, seq=seq if isinstance(seq, int) else None,
        version=version if isinstance(version, int) else None,
    )


def validate_current(entry: dict[str, Any], record_id: str | None, version: Any) -> HistoryModel:
    """Validate an entry already in the current version (``version``: what it was on disk, for
    the message); the entry's model. Raises RecordFormatError for an unknown type or a shape that
    does not parse (history_append.prepare_append validates what it cannot write itself with it)."""
    kind = entry.get("type")
    model = _MODEL_BY_TYPE.get(kind) if type(kind) is str else None
    if model is None:
        raise _unknown_type(entry, record_id, version)
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        seq = entry.get("seq")
        raise RecordFormatError(
            f"{_where(record_id, seq)}: entry does not parse (v{version}):"
            f" {field}: {first['msg']}; the record was not modified",
            record_id=record_id, seq=seq if isinstance(seq, int) else None,
            version=version if isinstance(version, int) else None,
            hint="run `steerable-maint check DB` to locate the damage, `steerable-maint salvage` to export the rest",
        ) from None


def parse_entry(entry: Any, *, record_id: str | None = None) -> HistoryModel:
    """Upgrade and validate one stored entry dict into its model.

    Raises RecordFormatError (fail closed) for anything this build cannot read.
    """
    upgraded = upgrade_entry_dict(entry, record_id=record_id)
    return validate_current(upgraded, record_id, entry_version(entry))


def read_entry_text(text: str | bytes, *, record_id: str | None = None, seq: int | None = None) -> dict[str, Any]:
    """Decode one stored entry, upgrade it in memory and validate it; return the dict.

    Raises RecordFormatError when the text is not JSON or the entry cannot be read.
    """
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise RecordFormatError(
            f"{_where(record_id, seq)}: stored entry is not valid JSON; the record was not modified",
            record_id=record_id, seq=seq,
            hint="run `steerable-maint check DB` to locate the damage, `steerable-maint salvage` to export the rest",
        ) from None
    upgraded = upgrade_entry_dict(raw, record_id=record_id)
    validate_current(upgraded, record_id, entry_version(raw))
    return upgraded


def is_plain_item(entry: Any) -> bool:
    """A fast, conservative test for the commonest stored entry: True only when ``entry``
    (a decoded JSON object) is a current-version ``item`` with exactly the keys v, type,
    seq, at and message, integer v and seq, a timestamp already in stored form, and a
    message with exactly a known role and text content.

    Guarantee: every entry it accepts validates unchanged (parse_entry returns it as is;
    a property test checks this). False decides nothing: validate such an entry in full.
    """
    # Exactly five keys, each of the five present (a missing one reads as None and fails
    # its type test): the keys are exactly these. The same for the message's two.
    if type(entry) is not dict or len(entry) != 5:
        return False
    v, msg, at = entry.get("v"), entry.get("message"), entry.get("at")
    return (type(v) is int and v == RECORD_FORMAT_VERSION and entry.get("type") == "item"
            and type(entry.get("seq")) is int and type(msg) is dict and len(msg) == 2
            and type(role := msg.get("role")) is str and role in CHAT_ROLES and type(msg.get("content")) is str and is_stored_timestamp(at))


def transcript_from(entries: list[dict[str, Any]], *, record_id: str | None = None) -> list[LLMMessage]:
    """Build the transcript from entries in ascending seq order.

    The newest checkpoint (boundary or seed) in ``entries`` resets the transcript to its
    replacement/messages; items after it are appended.
    """
    transcript: list[LLMMessage] = []
    for raw in entries:
        entry = parse_entry(raw, record_id=record_id)
        if isinstance(entry, CompactionBoundary):
            transcript = list(entry.replacement)
        elif isinstance(entry, HistorySeed):
            transcript = list(entry.messages)
        else:
            transcript.append(entry.message)
    return transcript


class HistoryReader(Protocol):
    """The two reads resume needs; every StorageAdapter has them (so history imports no storage)."""

    async def history_checkpoint(self, record_id: str) -> int | None:
        """The seq of the record's newest compaction_boundary or seed, or None."""
        ...

    async def list_history(self, record_id: str, *, after_seq: int | None = None, until_seq: int | None = None,
                           limit: int | None = None, reverse: bool = False) -> list[dict[str, Any]]:
        """Entries with after_seq < seq <= until_seq (see StorageAdapter.list_history)."""
        ...


async def resume_transcript(storage: HistoryReader, record_id: str, *, page_size: int = 256) -> list[LLMMessage]:
    """Return the LLMMessages the model continues from for ``record_id``.

    Reads tail-first in ``reverse=True`` pages bounded below by the newest checkpoint seq
    (``storage.history_checkpoint``), so it reads the checkpoint and the items after it and
    never an entry of the superseded prefix: O(tail). An empty or unknown record gives [].
    Raises RecordFormatError (fail closed) if any entry it reads cannot be read. It returns
    the record as stored, a tool result without its call included (an inspection, or the
    start of the remedy :func:`resumable_transcript` names); CoreLoop.resume refuses that.
    """
    return transcript_from(await _resume_tail(storage, record_id, page_size), record_id=record_id)


async def resumable_transcript(storage: HistoryReader, record_id: str, *, page_size: int = 256) -> list[LLMMessage]:
    """:func:`resume_transcript`, refusing a transcript no provider accepts (what resume sends).

    Raises RecordFormatError, reading only, when a tool message answers a call no earlier
    assistant message of the transcript made (an orphan tool result: a buggy host or another
    build appended it, or a checkpoint kept a result and dropped its call); the error names the
    record, the seq of the entry holding it and the remedy. Raises DataIntegrityError, naming
    the same, for an entry holding a lone UTF-16 surrogate (a ``\\ud800`` escape another SQLite
    client wrote, which steerable-maint check reports as row-json-invalid): no provider can
    encode it. Also what resume_transcript raises.
    """
    tail = await _resume_tail(storage, record_id, page_size)
    transcript = transcript_from(tail, record_id=record_id)
    for raw in tail if not _encodes(tail) else ():  # (the walk only finds which entry it is)
        if _holds_lone_surrogate(raw):
            raise DataIntegrityError(
                f"{_where(record_id, raw.get('seq'))}: a stored text holds a lone UTF-16 surrogate (another program"
                " wrote it), which no model API accepts; the record was not modified", record_id=record_id,
                seq=raw.get("seq"), hint="run `steerable-maint check DB` to list such rows; `steerable-maint salvage`"
                " exports the rest, or continue the chat with run(messages, chat_id=...), which appends one seed")
    orphan = orphan_tool_result(transcript)
    if orphan is not None:
        seq = _seq_holding(tail, orphan[0])
        raise RecordFormatError(
            f"{_where(record_id, seq)}: a tool result for call {orphan[1]!r} that no earlier assistant message"
            " made (every provider refuses such a transcript); the record was not modified",
            record_id=record_id, seq=seq, hint=ORPHAN_RESULT_HINT)
    return transcript


ORPHAN_RESULT_HINT = ("read the transcript with resume_transcript(), drop that tool message (or put back the"
                      " assistant message holding its call) and continue with run(messages, chat_id=...): it"
                      " appends one seed the record resumes from; the record was not modified")


def orphan_tool_result(messages: Sequence[LLMMessage]) -> tuple[int, str | None] | None:
    """(index, call id) of the first tool message no earlier assistant message called, or None."""
    called: set[Any] = set()
    for index, message in enumerate(messages):
        if message.tool_calls:
            called.update(call.get("id") for call in message.tool_calls)
        elif message.role == "tool" and message.tool_call_id not in called:
            return index, message.tool_call_id
    return None


def _encodes(entries: list[dict[str, Any]]) -> bool:
    """Whether ``entries`` serialize as UTF-8 JSON, i.e. hold no lone surrogate (entries are
    parsed JSON: nothing else can fail). pydantic-core does it in one call, about five times
    faster than walking the values in Python: a resume pays ~1 us an entry for this check."""
    try:
        to_json(entries)
    except Exception:  # noqa: BLE001 - a lone surrogate (PydanticSerializationError); anything else: walk too
        return False
    return True


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return has_lone_surrogate(value)
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_lone_surrogate(v) for v in value)
    return False


def _seq_holding(tail: list[dict[str, Any]], index: int) -> int:
    """The seq of the entry that put message ``index`` into ``transcript_from(tail)`` (entries
    already read by it: each is an item or a checkpoint holding its messages)."""
    owners: list[int] = []
    for raw in tail:
        if raw.get("type") == "item":
            owners.append(raw["seq"])
        else:
            held = raw.get("replacement" if raw.get("type") == "compaction_boundary" else "messages")
            owners = [raw["seq"]] * len(held)
    return owners[index]


async def _resume_tail(storage: HistoryReader, record_id: str, page_size: int) -> list[dict[str, Any]]:
    """The entries from the newest checkpoint to the tail, ascending (see resume_transcript)."""
    checkpoint = await storage.history_checkpoint(record_id)
    after = None if checkpoint is None else checkpoint - 1
    tail: list[dict[str, Any]] = []
    until: int | None = None
    while True:
        page = await storage.list_history(record_id, after_seq=after, until_seq=until, limit=page_size, reverse=True)
        tail.extend(page)
        if len(page) < page_size:
            break
        until = page[-1]["seq"] - 1
    tail.reverse()
    return tail
