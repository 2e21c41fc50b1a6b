"""The history record as the loop runs: flushing the transcript into ``item`` entries.

:class:`RecordWriter` keeps one number, how many messages of the current transcript are
already in the record, so each flush appends exactly the messages after it (idempotent per
message: flushing twice appends nothing the second time). A rewrite appends one
``compaction_boundary`` whose replacement is the new transcript. Invariant after every
flush: ``resume_transcript(storage, record_id)`` equals the transcript.

:func:`repair_dangling` is the resume-side repair: a tool call without its result gets a
failed tool result saying the call was interrupted and its side effects must be verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import RecordFormatError
from ..history import resume_transcript
from ..models import LLMMessage
from ..tools import ToolResult
from .messages import CONSTRUCTIBLE
from .unicode import clean_message

if TYPE_CHECKING:
    from ..storage import StorageAdapter
    from .hooks import RewriteRequest

INTERRUPTED_ERROR = "interrupted; verify its side effects before relying on it (the run stopped while this call ran)"


class RecordWriter:
    """Appends a transcript to the history record ``record_id`` of ``storage``, once per message.

    ``storage=None`` makes every method a no-op (a loop without a record).
    """

    def __init__(self, storage: StorageAdapter | None, record_id: str) -> None:
        self.storage = storage
        self.record_id = record_id
        self.flushed = 0
        self.append_now = getattr(storage, "append_items_now", None)
        """The storage's ``append_items_now`` (InMemoryStorage: items appended synchronously,
        nothing returned), or None: the flushes that can take it skip a coroutine per flush
        (:meth:`flush_now`; the round skeleton calls it the same way itself)."""
        self.append_built = getattr(storage, "append_built_now", None) if CONSTRUCTIBLE else None
        """The storage's ``append_built_now`` (InMemoryStorage), or None: the round skeleton
        flushes a message it has just built itself (the reply from messages.flat_calling_message,
        a tool result from messages.tool_message with exact str values), when it is the only
        unflushed one, with the values it built it from (history_append.built_snapshot: the
        same entry as append_now's); nothing runs between the build and that flush."""

    async def start(self, transcript: Sequence[LLMMessage]) -> None:
        """Line the record up with the transcript a run starts from.

        A record whose transcript is a prefix of ``transcript`` (an empty one included) gets the
        rest as items; any other record gets one ``seed`` entry holding ``transcript`` (so the
        record resumes to exactly it). Raises RecordFormatError, appending nothing, when the
        existing record cannot be read.
        """
        if self.storage is None:
            return
        append_now = self.append_now
        if append_now is not None and append_now(self.record_id, transcript, expect_seq=1):
            self.flushed = len(transcript)  # a new record (what the general path below does for one)
            return
        existing = await resume_transcript(self.storage, self.record_id)
        if list(transcript[: len(existing)]) == existing:
            self.flushed = len(existing)
            if not self.flush_now(transcript):
                await self.flush(transcript, clean=False)
        else:
            await self.storage.append_history(
                self.record_id, [{"type": "seed", "messages": [m.to_wire() for m in transcript]}])
            self.flushed = len(transcript)

    def adopt(self, transcript: Sequence[LLMMessage]) -> None:
        """Declare ``transcript`` already in the record (a resume read it from there)."""
        self.flushed = len(transcript)

    async def flush(self, transcript: Sequence[LLMMessage], *, clean: bool = True) -> int:
        """Append the messages after the flushed ones as item entries (one atomic call).

        Returns how many were appended. Storage errors propagate; ``flushed`` only moves once
        the append returned, so a failed flush is retried whole by the next one. The items hold
        the LLMMessage instances: a storage dumps a sound one without validating it again and
        stores the same bytes as for its ``to_wire()`` (history_append.prepare_append).
        A message holding a lone surrogate (refused by every storage, nothing appended) is
        replaced, in ``transcript`` itself (a list) and then in the record, by its
        :func:`.unicode.clean_message` (each one U+FFFD), so the record still equals the
        transcript; ``clean=False`` (the host's own messages at the start of a run) raises
        the RecordFormatError instead.
        """
        try:
            return await self._append(transcript)
        except RecordFormatError:
            if not clean or not isinstance(transcript, list) or not self._clean_tail(transcript):
                raise
        return await self._append(transcript)

    def flush_now(self, transcript: Sequence[LLMMessage]) -> bool:
        """:meth:`flush` without awaiting, when the storage offers ``append_items_now`` and takes
        every unflushed message that way (the same entries :meth:`flush` appends, in one atomic
        call); True then, or when nothing is unflushed. False, nothing appended: await
        :meth:`flush` (which appends them, cleans them, or raises)."""
        append, flushed = self.append_now, self.flushed
        count = len(transcript)
        if count <= flushed:
            self.flushed = count
            return True
        if append is None or not append(self.record_id, transcript[flushed:]):
            return False
        self.flushed = count
        return True

    def _clean_tail(self, transcript: list[LLMMessage]) -> bool:
        """Clean the unflushed messages in place; whether any changed."""
        changed = False
        for index in range(self.flushed, len(transcript)):
            cleaned = clean_message(transcript[index])
            if cleaned is not transcript[index]:
                transcript[index] = cleaned
                changed = True
        return changed

    async def _append(self, transcript: Sequence[LLMMessage]) -> int:
        flushed, count = self.flushed, len(transcript)
        if self.storage is None or count <= flushed:
            self.flushed = count
            return 0
        if count == flushed + 1:  # the common flush: one message
            entries = [{"type": "item", "message": transcript[flushed]}]
        else:
            entries = [{"type": "item", "message": m} for m in transcript[flushed:]]
        await self.storage.append_history(self.record_id, entries)
        self.flushed = count
        return count - flushed

    async def rewrite(self, request: RewriteRequest) -> None:
        """Append one compaction_boundary for ``request``; its messages are then all flushed."""
        if self.storage is not None:
            await self.storage.append_history(self.record_id, [{
                "type": "compaction_boundary", "trigger": request.trigger, "preTokens": request.pre_tokens,
                "postTokens": request.post_tokens, "replacement": [m.to_wire() for m in request.messages]}])
        self.flushed = len(request.messages)


def dangling_calls(transcript: Sequence[LLMMessage]) -> list[tuple[int, dict[str, Any]]]:
    """(index of the assistant message, call dict) for every tool call without a tool result.

    A tool result answers the latest call before it with its id that is still unanswered, not
    every call with that id: ids may repeat across rounds (a server that sends none gets
    ``call_0``, ... per response), and an earlier round's result does not answer a later call."""
    calls: list[tuple[int, dict[str, Any]]] = []
    answered: set[int] = set()  # positions in ``calls``
    waiting: dict[Any, list[int]] = {}  # call id -> positions in ``calls`` not answered yet
    for index, message in enumerate(transcript):
        if message.role == "assistant":
            for call in message.tool_calls or ():
                waiting.setdefault(call.get("id"), []).append(len(calls))
                calls.append((index, call))
        elif message.role == "tool" and message.tool_call_id and waiting.get(message.tool_call_id):
            answered.add(waiting[message.tool_call_id].pop())
    return [entry for position, entry in enumerate(calls) if position not in answered]


def interrupted_result(call: dict[str, Any]) -> LLMMessage:
    """The tool message answering an interrupted call (also one in OpenAI's ``{id, function:
    {name, arguments}}`` form, which the providers read: its name is in ``function``)."""
    name = (call["function"] if isinstance(call.get("function"), dict) else call).get("name")
    result = ToolResult.failed(f"tool {name!r} {INTERRUPTED_ERROR}")
    return LLMMessage(role="tool", tool_call_id=call.get("id"), name=name, content=result.to_content())


def repair_dangling(transcript: Sequence[LLMMessage],
                    answered_next: Sequence[LLMMessage] = ()) -> tuple[list[LLMMessage], bool]:
    """The transcript with an interrupted result after every dangling call; and whether the
    repair is a pure append (every dangling call belongs to the last assistant message and only
    tool results follow it), so the record can take it as items rather than a seed.

    ``answered_next``: the messages that will follow the transcript (a resume's new ones). In
    the pure-append case, a call that a tool result at their start answers (the host knew what
    the interrupted call did) gets no interrupted result: one call, one result."""
    missing = dangling_calls(transcript)
    if not missing:
        return list(transcript), True
    last_assistant = max(i for i, m in enumerate(transcript) if m.role == "assistant")
    tail_is_results = all(m.role == "tool" for m in transcript[last_assistant + 1:])
    if tail_is_results and all(index == last_assistant for index, _ in missing):
        given = set()
        for message in answered_next:
            if message.role != "tool":
                break
            given.add(message.tool_call_id)
        return [*transcript, *(interrupted_result(call) for _, call in missing if call.get("id") not in given)], True
    repaired: list[LLMMessage] = []
    by_index: dict[int, list[dict[str, Any]]] = {}
    for index, call in missing:
        by_index.setdefault(index, []).append(call)
    for index, message in enumerate(transcript):
        repaired.append(message)
        repaired.extend(interrupted_result(call) for call in by_index.get(index, ()))
    return repaired, False
