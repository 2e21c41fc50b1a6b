"""Appending to the history record: every StorageAdapter's one way to turn entries into stored rows.

:func:`prepare_append` stamps, validates and serializes a batch (the careful path, and the fast
paths for the forms the loop and most callers append: a plain item, an item holding a sound
LLMMessage); :func:`loop_item` is the loop's one-entry form; :func:`item_snapshot` keeps an
item holding a sound LLMMessage as immutable parts and :func:`snapshot_text` writes its stored
text (for an append that returns no entries and writes the text when read). Every fast path
stores the same bytes, returns the same dict and raises the same errors as the careful path
(the property tests in tests/storage/test_append_fast.py, test_typed_items.py and
tests/loop/test_record_fast.py hold them to it). The record's
format and its reads are :mod:`.history`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from pydantic_core import PydanticSerializationError, SchemaSerializer, core_schema

from .errors import HistorySeqConflictError, RecordFormatError
from .history import RECORD_FORMAT_VERSION, is_plain_item, validate_current
from .models import CHAT_ROLES, LLMMessage, has_lone_surrogate, is_stored_timestamp, stamp_text, utc_now


class PreparedEntry(NamedTuple):
    """An entry ready to store: its seq, version, type, timestamp, canonical JSON, and the
    same entry as a camelCase dict."""

    seq: int
    v: int
    type: str
    at: str
    data: str
    wire: dict[str, Any]
    """The entry as stored, as a camelCase dict (what list_history would return)."""


def prepare_append(record_id: str, entries: Iterable[Mapping[str, Any]], next_seq: int) -> list[PreparedEntry]:
    """Stamp ``seq``, ``v`` and (when absent) ``at`` on each entry and validate it.

    Shared by every StorageAdapter so they store identical bytes. Raises
    HistorySeqConflictError when an entry carries a seq other than the next one,
    RecordFormatError when an entry is newer than this build, does not parse, or holds text
    that is not valid Unicode (a lone surrogate).

    A plain item (is_plain_item) is stored without a pydantic round trip: its canonical JSON
    is written field by field in the model's order, the text through json's string encoder,
    which equals the model's dump (a property test checks it); everything else is validated
    and dumped by its model.

    An item's ``message`` may also be an LLMMessage instance (what the loop appends). One that
    passes :func:`is_sound_message` is dumped by the model's own serializer without being
    validated again; any other instance is first turned into its wire dict and takes the dict
    path. Either way the stored bytes, the returned dict and the errors are those of the same
    entry with ``message.to_wire()`` (a property test checks it).
    """
    prepared: list[PreparedEntry] = []
    seq = next_seq
    now = utc_now()  # one call is one atomic append: its entries share one stamp
    for entry in entries:
        # The loop's form first: exactly {"type": "item", "message": <LLMMessage>} (no seq or v
        # to check, no at to take); the generic path below decides it the same way.
        if type(entry) is dict:
            message = entry.get("message")
            if len(entry) == 2 and type(message) is LLMMessage and entry.get("type") == "item":
                typed = _sound_item(message, seq, now)
                if typed is not None:
                    prepared.append(typed)
                    seq += 1
                    continue
            # A plain item given as a dict with exactly type, message and perhaps at (no seq or v
            # to check): decided here as the generic path below decides it (a property test holds
            # the two equal), without its checks for keys the entry does not have.
            elif (type(message) is dict and len(message) == 2 and len(entry) == 2 + ("at" in entry)
                  and entry.get("type") == "item"):
                at, role, content = entry.get("at") or now, message.get("role"), message.get("content")
                if type(role) is str and role in CHAT_ROLES and type(content) is str and (at is now or is_stored_timestamp(at)):
                    prepared.append(_plain_entry(record_id, seq, at, role, content))
                    seq += 1
                    continue
        if type(entry) is not dict and not isinstance(entry, Mapping):
            raise RecordFormatError(f"record {record_id!r}: entry to append is not a JSON object",
                                    record_id=record_id, hint="pass each entry as a dict")
        given_seq = entry.get("seq")
        if given_seq is not None and given_seq != seq:
            raise HistorySeqConflictError(
                f"record {record_id!r}: entry carries seq {given_seq} but the next seq is {seq}",
                record_id=record_id, seq=given_seq,
            )
        version = entry.get("v", RECORD_FORMAT_VERSION)
        if version != RECORD_FORMAT_VERSION and type(version) is int and version > RECORD_FORMAT_VERSION:
            raise RecordFormatError(
                f"record {record_id!r}: cannot append a v{version} entry (this build writes v{RECORD_FORMAT_VERSION})",
                record_id=record_id, version=version, hint="upgrade the app to write this entry",
            )
        message = entry.get("message")
        if isinstance(message, LLMMessage):
            typed = _typed_item(entry, message, seq, now)
            if typed is not None:
                prepared.append(typed)
                seq += 1
                continue
            entry = {**entry, "message": _message_wire(message, record_id, seq)}
        msg = entry.get("message")
        # is_plain_item of the stamped entry, decided on the entry itself (no copy): stamping
        # adds exactly the keys v, seq and at that it lacks, so the stamped entry has exactly
        # the five keys when the entry has type and message besides those.
        if (type(entry) is dict and type(msg) is dict and len(msg) == 2 and entry.get("type") == "item"
                and len(entry) == 2 + ("v" in entry) + ("seq" in entry) + ("at" in entry)):
            at, role, content = entry.get("at") or now, msg.get("role"), msg.get("content")
            plain = type(role) is str and role in CHAT_ROLES and type(content) is str and is_stored_timestamp(at)
        else:
            plain = False
        if plain:
            prepared.append(_plain_entry(record_id, seq, at, role, content))
            seq += 1
            continue
        stamped = dict(entry)  # v and seq are stamped over whatever the entry says (checked above)
        stamped.update(v=RECORD_FORMAT_VERSION, seq=seq)
        stamped["at"] = stamped.get("at") or now
        if is_plain_item(stamped):  # a Mapping that is not a dict
            msg = stamped["message"]
            prepared.append(_plain_entry(record_id, seq, stamped["at"], msg["role"], msg["content"]))
            seq += 1
            continue
        model = validate_current(stamped, record_id, RECORD_FORMAT_VERSION)
        try:
            data = model.model_dump_json(by_alias=True, exclude_none=True)
        except PydanticSerializationError:  # a str holding a lone surrogate
            raise _not_unicode(record_id, seq) from None
        wire = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        prepared.append(PreparedEntry(seq, RECORD_FORMAT_VERSION, wire["type"], wire["at"], data, wire))
        seq += 1
    return prepared


_TYPED_ITEM_KEYS = frozenset(("type", "message", "v", "seq", "at"))


def is_sound_message(message: Any) -> bool:
    """A fast, conservative test that an LLMMessage instance still holds what its validation
    would accept (fields can be reassigned after construction): exactly an LLMMessage with its
    five fields, role a known role (a str), str-or-None text fields, content a str, None or a
    list of dicts with str keys, and tool_calls None or a list of dicts with str keys. False
    decides nothing (validate in full).
    """
    return type(message) is LLMMessage and _sound_fields(message.__dict__)


def _sound_fields(fields: dict[str, Any]) -> bool:
    # Read from the instance's __dict__ (where pydantic keeps the fields): an attribute read on a
    # model goes through its __getattr__ hook, several times dearer than a dict lookup.
    role = fields.get("role")
    if len(fields) != 5 or type(role) is not str or role not in CHAT_ROLES:
        return False
    call_id, name, content, calls = fields.get("tool_call_id"), fields.get("name"), fields.get("content"), \
        fields.get("tool_calls")
    if (call_id is not None and type(call_id) is not str) or (name is not None and type(name) is not str):
        return False
    if content is not None and type(content) is not str and not dicts_with_str_keys(content):
        return False
    return calls is None or dicts_with_str_keys(calls)


def dicts_with_str_keys(value: Any) -> bool:
    """Whether ``value`` is a list of dicts whose keys are all exact strs (what a message's
    content parts and tool calls must be to skip validation)."""
    if type(value) is not list:
        return False
    for part in value:  # loops, not all(): this runs for every message the loop appends
        if type(part) is not dict:
            return False
        for key in part:
            if type(key) is not str:
                return False
    return True


_dump_message_json = LLMMessage.__pydantic_serializer__.to_json
_dump_message = LLMMessage.__pydantic_serializer__.to_python


def _typed_item(entry: Mapping[str, Any], message: LLMMessage, seq: int, now: str) -> PreparedEntry | None:
    """The item holding a sound LLMMessage instance, ready to store; None: take the dict path.

    Written like HistoryItem's dump (v, type, seq, at, message in the model's order), the
    message by LLMMessage's serializer; anything it cannot dump (a lone surrogate, a value
    that is not JSON) goes the dict path, which raises the usual error.
    """
    if entry.get("type") != "item" or not _TYPED_ITEM_KEYS.issuperset(entry):
        return None
    at = entry.get("at") or now
    if at is not now and not is_stored_timestamp(at):  # now is utc_now(): in stored form
        return None
    return _sound_item(message, seq, at)


def _sound_item(message: LLMMessage, seq: int, at: str) -> PreparedEntry | None:
    """The item entry for ``message`` (exactly an LLMMessage) at ``seq`` stamped ``at`` (in stored
    form); None when the message is not sound (is_sound_message) or its serializer refuses it
    (the dict path then raises the usual error)."""
    parts = _item_parts(message, seq, at)
    if parts is None:
        return None
    return _new_prepared(PreparedEntry, (seq, RECORD_FORMAT_VERSION, "item", at, parts[0], parts[1]))


_ITEM_HEAD = f'{{"v":{RECORD_FORMAT_VERSION},"type":"item","seq":'


def _item_parts(message: LLMMessage, seq: int, at: str) -> tuple[str, dict[str, Any]] | None:
    """_sound_item's (data, wire dict), or None. A message whose fields are all a str or None (a
    text message, a tool result) is written as LLMMessage's serializer writes it (role, content,
    toolCallId, name in the model's order, the None ones left out, each text through json's
    string encoder: a property test holds it to the serializer's bytes and dict) without the
    serializer; content parts and tool calls go through the serializer."""
    fields = message.__dict__
    role, content, calls = fields.get("role"), fields.get("content"), fields.get("tool_calls")
    call_id, name = fields.get("tool_call_id"), fields.get("name")
    # _sound_fields, inline (this runs for every message the loop appends)
    if len(fields) != 5 or type(role) is not str or role not in CHAT_ROLES:
        return None
    if (call_id is not None and type(call_id) is not str) or (name is not None and type(name) is not str):
        return None
    if calls is None and (content is None or type(content) is str):
        enc = _json_string
        if content is not None and call_id is not None and name is not None:  # a tool result
            data = (f'{_ITEM_HEAD}{seq},"at":"{at}","message":{{"role":"{role}","content":{enc(content)},'
                    f'"toolCallId":{enc(call_id)},"name":{enc(name)}}}}}')
            wire_message: dict[str, Any] = {"role": role, "content": content, "toolCallId": call_id, "name": name}
        elif content is not None and call_id is None and name is None:  # a text message
            data = f'{_ITEM_HEAD}{seq},"at":"{at}","message":{{"role":"{role}","content":{enc(content)}}}}}'
            wire_message = {"role": role, "content": content}
        else:
            text, wire_message = _str_message(role, content, call_id, name)
            data = f'{_ITEM_HEAD}{seq},"at":"{at}","message":{text}}}'
        if has_lone_surrogate(data):
            return None  # a lone surrogate: the dict path raises the usual error
        return data, {"v": RECORD_FORMAT_VERSION, "type": "item", "seq": seq, "at": at, "message": wire_message}
    if content is not None and type(content) is not str and not dicts_with_str_keys(content):
        return None
    if calls is not None and not dicts_with_str_keys(calls):
        return None
    if calls is not None and (content is None or type(content) is str):  # an assistant message calling tools
        return _calling_parts(seq, at, role, content, calls, call_id, name)
    try:
        text = _dump_message_json(message, by_alias=True, exclude_none=True).decode()
        wire_message = _dump_message(message, mode="json", by_alias=True, exclude_none=True)
    except Exception:  # noqa: BLE001 - the dict path reports it
        return None
    return (f'{_ITEM_HEAD}{seq},"at":"{at}","message":{text}}}',
            {"v": RECORD_FORMAT_VERSION, "type": "item", "seq": seq, "at": at, "message": wire_message})


_calls_serializer = SchemaSerializer(core_schema.list_schema(core_schema.dict_schema(core_schema.str_schema(),
                                                                                   core_schema.any_schema())))
"""The serializer of LLMMessage.tool_calls' type (list[dict[str, Any]]), for the calls alone."""
_dump_calls_json, _dump_calls = _calls_serializer.to_json, _calls_serializer.to_python


def _calling_parts(seq: int, at: str, role: str, content: str | None, calls: list[dict[str, Any]],
                   call_id: str | None, name: str | None) -> tuple[str, dict[str, Any]] | None:
    """_item_parts of a sound message with tool calls and str or no content: the calls by the
    serializer of their field's type (what LLMMessage's serializer runs for that field), the rest
    written as _str_message writes it, in the model's order (role, content, toolCalls, toolCallId,
    name). None when the serializer refuses the calls or the text is not valid Unicode."""
    try:
        calls_text = _dump_calls_json(calls).decode()
        calls_wire = _dump_calls(calls, mode="json")
    except Exception:  # noqa: BLE001 - the dict path reports it
        return None
    text, wire_message = _str_message(role, content, call_id, name, calls_text, calls_wire)
    data = f'{_ITEM_HEAD}{seq},"at":"{at}","message":{text}}}'
    if has_lone_surrogate(data):
        return None
    return data, {"v": RECORD_FORMAT_VERSION, "type": "item", "seq": seq, "at": at, "message": wire_message}


def _str_message(role: str, content: str | None, call_id: str | None, name: str | None,
                 calls_text: str | None = None, calls_wire: Any = None) -> tuple[str, dict[str, Any]]:
    """The message text and wire dict of _item_parts' str-only message, for any mix of None fields,
    in the model's order (role, content, toolCalls, toolCallId, name); ``calls_text`` /
    ``calls_wire``: the tool calls already serialized (_calling_parts), or None for none."""
    enc = _json_string
    text, wire_message = f'{{"role":"{role}"', {"role": role}
    if content is not None:
        text += ',"content":' + enc(content)
        wire_message["content"] = content
    if calls_text is not None:
        text += ',"toolCalls":' + calls_text
        wire_message["toolCalls"] = calls_wire
    if call_id is not None:
        text += ',"toolCallId":' + enc(call_id)
        wire_message["toolCallId"] = call_id
    if name is not None:
        text += ',"name":' + enc(name)
        wire_message["name"] = name
    return text + "}", wire_message


ItemSnapshot = tuple[int, str | int, str, str | None, str | None, str | None, str | None]
"""What :func:`item_snapshot` returns: seq, at (the stored text, or a ``time.time_ns()`` reading
written by models.stamp_text when read), role, content, tool_call_id, name, the tool calls' text."""

def item_snapshot(message: Any, seq: int, at: str | int) -> ItemSnapshot | None:
    """The item holding ``message`` at ``seq``, stamped ``at`` (in stored form, or a clock reading
    in ns: :func:`.models.stamp_text` writes it when read), as immutable parts:
    ``(seq, at, role, content, tool_call_id, name, tool_calls_text)``, each an int, a str or None,
    the tool calls already serialized by their field type's serializer (what LLMMessage's
    serializer runs for that field). :func:`snapshot_text` of it is the text prepare_append
    stores for the same entry stamped at the same time (a property test holds them equal), so a
    storage can keep the snapshot and write the text when it is read: nothing the caller does to
    the message afterwards reaches it (strs and ints are immutable, the calls are text).

    None (decides nothing: take the careful path) unless ``message`` is exactly a sound
    LLMMessage with str or no content and valid Unicode text."""
    if type(message) is not LLMMessage:
        return None
    fields = message.__dict__
    if len(fields) != 5:
        return None
    try:  # subscripts: no method call per field
        role, content, calls = fields["role"], fields["content"], fields["tool_calls"]
        call_id, name = fields["tool_call_id"], fields["name"]
    except KeyError:  # (five fields, not these: read as before, a missing one as None)
        role, content, calls = fields.get("role"), fields.get("content"), fields.get("tool_calls")
        call_id, name = fields.get("tool_call_id"), fields.get("name")
    # _sound_fields, inline (this runs for every message the loop appends); ASCII text is valid
    if type(role) is not str or role not in CHAT_ROLES:
        return None
    if type(content) is str:
        if not content.isascii() and has_lone_surrogate(content):
            return None
    elif content is not None:
        return None
    if call_id is not None and (type(call_id) is not str or (not call_id.isascii() and has_lone_surrogate(call_id))):
        return None
    if name is not None and (type(name) is not str or (not name.isascii() and has_lone_surrogate(name))):
        return None
    if calls is None:
        return (seq, at, role, content, call_id, name, None)
    if type(calls) is not list:  # dicts_with_str_keys(calls), inline
        return None
    for call in calls:
        if type(call) is not dict:
            return None
        for key in call:
            if type(key) is not str:
                return None
    try:
        calls_text = _dump_calls_json(calls).decode()
    except Exception:  # noqa: BLE001 - the careful path reports it
        return None
    if not calls_text.isascii() and has_lone_surrogate(calls_text):
        return None
    return (seq, at, role, content, call_id, name, calls_text)


def built_snapshot(seq: int, at: str | int, role: str, content: str | None, call_id: str | None, name: str | None,
                   calls: list[dict[str, Any]] | None) -> ItemSnapshot | None:
    """``item_snapshot(m, seq, at)`` for the message ``m`` that the loop's message builders
    (:mod:`.loop.messages`) have just made from exactly these values on their fast paths: a
    tool message (role "tool", ``call_id``, ``name`` and ``content`` exact strs, no calls) or a
    reply with flat calls (role "assistant", ``content`` an exact str or None, no call_id or
    name, ``calls`` the wire dicts ``_flat_wire`` wrote: str keys, flat values). The same
    snapshot (a property test holds them equal), without checking again the types those
    builders checked; the caller vouches for them. None when a text holds a lone surrogate or
    the calls do not serialize: item_snapshot declines those too (take the careful path)."""
    if content is not None and not content.isascii() and has_lone_surrogate(content):
        return None
    if call_id is not None and not call_id.isascii() and has_lone_surrogate(call_id):
        return None
    if name is not None and not name.isascii() and has_lone_surrogate(name):
        return None
    if calls is None:
        return (seq, at, role, content, call_id, name, None)
    try:
        calls_text = _dump_calls_json(calls).decode()
    except Exception:  # noqa: BLE001 - the careful path reports it
        return None
    if not calls_text.isascii() and has_lone_surrogate(calls_text):
        return None
    return (seq, at, role, content, call_id, name, calls_text)


def snapshot_text(snapshot: ItemSnapshot) -> str:
    """The stored text of an :func:`item_snapshot` (written as _item_parts writes a str-only message)."""
    seq, at, role, content, call_id, name, calls_text = snapshot
    text = _str_message(role, content, call_id, name, calls_text)[0]
    if type(at) is not str:
        at = stamp_text(at)
    return f'{_ITEM_HEAD}{seq},"at":"{at}","message":{text}}}'


def loop_item(entry: Any, seq: int) -> tuple[str, dict[str, Any]] | None:
    """``(p.data, p.wire)`` of ``p = prepare_append(record_id, [entry], seq)[0]`` for the loop's own
    entry form, exactly ``{"type": "item", "message": <sound LLMMessage>}``, stamped now: the same
    bytes and dict (a property test holds them equal), for a storage's one-entry append without
    the batch machinery. None decides nothing: prepare the entry with prepare_append (which also
    raises the errors)."""
    if type(entry) is dict and len(entry) == 2:
        message = entry.get("message")
        if type(message) is LLMMessage and entry.get("type") == "item":
            return _item_parts(message, seq, utc_now())
    return None


def _message_wire(message: LLMMessage, record_id: str, seq: int) -> dict[str, Any]:
    """``message.to_wire()``; a message whose values are not JSON is a RecordFormatError."""
    try:
        return message.to_wire()
    except PydanticSerializationError as exc:
        raise RecordFormatError(f"record {record_id!r} seq {seq}: message does not serialise as JSON ({exc});"
                                " nothing was appended", record_id=record_id, seq=seq,
                                hint="pass JSON values only (str, numbers, bools, None, lists, dicts)") from None


_json_string = encode_basestring
"""A str as a JSON string with its text kept as is, as pydantic's model_dump_json writes it."""

_new_prepared = tuple.__new__  # tuple.__new__(PreparedEntry, fields): what _make does, without its Python frame


def _plain_entry(record_id: str, seq: int, at: str, role: str, content: str) -> PreparedEntry:
    """The PreparedEntry of a plain item (is_plain_item holds for it once stamped)."""
    # role is one of CHAT_ROLES and at is in stored form: neither needs escaping
    data = (f'{{"v":{RECORD_FORMAT_VERSION},"type":"item","seq":{seq},"at":"{at}",'
            f'"message":{{"role":"{role}","content":{_json_string(content)}}}}}')
    if has_lone_surrogate(data):
        raise _not_unicode(record_id, seq)
    wire = {"v": RECORD_FORMAT_VERSION, "type": "item", "seq": seq, "at": at,
            "message": {"role": role, "content": content}}
    return _new_prepared(PreparedEntry, (seq, RECORD_FORMAT_VERSION, "item", at, data, wire))


def _not_unicode(record_id: str, seq: int) -> RecordFormatError:
    return RecordFormatError(f"record {record_id!r} seq {seq}: entry holds text that is not valid Unicode"
                             " (a lone surrogate); nothing was appended", record_id=record_id, seq=seq,
                             hint="encode the text properly before appending it")
