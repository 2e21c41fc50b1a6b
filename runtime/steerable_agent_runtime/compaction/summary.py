"""The summary step: head + the current request + one summary message + tail.

- Head: the leading system messages and the first user message (when it follows them).
- The current request (request.py: the last user-authored message and the steers of its turn),
  when in the middle: kept whole (or cut to its budget) right after the head, before the summary.
- Tail: the last ``keep_last`` messages, moved back so that it never starts with a tool result
  whose call would be cut off (the assistant message holding the call comes with it).
- Middle: everything between; replaced by one ``user`` message starting with
  :data:`SUMMARY_PREFIX`, followed by the newest notes message of the middle (a
  :class:`~..context.notes.NotesFragment` rendering), kept whole: the notes states inject once
  per run, so a summarised notes message would be gone until the next run. A middle that holds
  nothing but an earlier summary (and those notes) is left alone, so compacting a compacted
  transcript again changes nothing.

The summarizer (any LLMProvider) is called once, with ``cache_retention="none"`` (the text it
reads is about to be discarded: never write it into the prompt cache), bounded by a timeout
(CompactionHooks' ``summary_timeout_s``). When there is no summarizer, or it raises, times out
or returns no text, the middle becomes the excerpt summary: one line per message, ``[role] ``
+ its first 200 characters.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..llm.cancel import CancelSignal, StreamCancelled
from ..models import LLMMessage
from .fold import content_text

log = logging.getLogger(__name__)

SUMMARY_PREFIX = "[conversation summary: "
EXCERPT_CHARS = 200
SUMMARY_INSTRUCTIONS = (
    "You compress the middle of an agent's conversation so the agent can continue without it. "
    "Write a concise summary that keeps: the user's goals and constraints, decisions taken, facts learnt "
    "from tool results (file names, values, errors), work done and work still open. Reply with the summary only."
)


@dataclass
class Split:
    """Indices of a transcript's parts: ``head = [:head_end]``, ``middle = [head_end:tail_start]``."""

    head_end: int
    tail_start: int


def head_length(messages: Sequence[LLMMessage]) -> int:
    """The leading system messages plus the first user message right after them."""
    index = 0
    while index < len(messages) and messages[index].role == "system":
        index += 1
    if index < len(messages) and messages[index].role == "user":
        index += 1
    return index


def split(messages: Sequence[LLMMessage], keep_last: int) -> Split:
    """Where head, middle and tail are (see the module docstring)."""
    head_end = head_length(messages)
    tail_start = max(head_end, len(messages) - max(keep_last, 0))
    while head_end < tail_start < len(messages) and messages[tail_start].role == "tool":
        tail_start -= 1
    return Split(head_end, tail_start)


def is_summary(message: LLMMessage) -> bool:
    """Whether ``message`` is a summary this step wrote."""
    return isinstance(message.content, str) and message.content.startswith(SUMMARY_PREFIX)


def needs_summary(middle: Sequence[LLMMessage]) -> bool:
    """A middle worth summarising: it holds something besides earlier summaries."""
    return any(not is_summary(m) for m in middle)


def kept_notes(middle: Sequence[LLMMessage]) -> LLMMessage | None:
    """The message of ``middle`` the summary keeps whole after it: the newest notes rendering
    (an older one is superseded by it and summarised), or None."""
    # Imported on use: defining a fragment class estimates its markers with this package
    # (context/fragment.py), so context.notes, half loaded then, imports this module.
    from ..context.notes import NotesFragment

    for message in reversed(middle):
        if message.role == NotesFragment.role and NotesFragment.recognises(message.content):
            return message
    return None


def call_text(call: dict[str, Any]) -> str:
    """A tool call as ``name({arguments})``; also in OpenAI's ``{id, function: {name, arguments:
    "<json>"}}`` form, which every provider reads (llm/transcript.py)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments") or {}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"{function.get('name')}({text})"


def message_line_text(message: LLMMessage) -> str:
    """A message as one line of text: its content, or its tool calls when it has no text."""
    text = content_text(message.content)
    if not text.strip() and message.tool_calls:
        text = "; ".join(call_text(c) for c in message.tool_calls)
    return " ".join(text.split())


def excerpt_summary(middle: Sequence[LLMMessage], *, max_chars: int | None = None) -> str:
    """The fallback summary: a header, then ``[role] `` + the first 200 characters per message.

    With ``max_chars``, the oldest lines are left out (and counted) so the text stays under it.
    """
    lines = [f"[{m.role}] {message_line_text(m)[:EXCERPT_CHARS]}" for m in middle]
    omitted = 0
    if max_chars is not None:
        total = sum(len(line) + 1 for line in lines)
        while omitted < len(lines) - 1 and total > max_chars:
            total -= len(lines[omitted]) + 1
            omitted += 1
        lines = lines[omitted:]
    head = f"{SUMMARY_PREFIX}{len(middle)} earlier messages, excerpts]"
    if omitted:
        head += f"\n[{omitted} older messages left out]"
    return "\n".join([head, *lines])


def _transcript_text(middle: Sequence[LLMMessage]) -> str:
    return "\n\n".join(f"[{m.role}] {content_text(m.content) or message_line_text(m)}" for m in middle)


@dataclass(frozen=True)
class Summary:
    """What :func:`summarize` made: the message ``text``; its ``source``, ``summarizer`` or
    ``excerpt``; and, for an excerpt used although a summarizer was given, ``fallback``: why
    (``the summarizer timed out after 120 s``, ``the summarizer failed``, ``the summarizer
    returned no text``, ``the summarizer was cancelled with the turn``)."""

    text: str
    source: str
    fallback: str | None = None

    def describe(self) -> str:
        """``excerpt`` / ``summarizer``, with the fallback's reason: what a rewrite's reason shows."""
        return f"{self.source}; {self.fallback}" if self.fallback else self.source


def seconds_text(seconds: float) -> str:
    """``0.3 s``, ``120 s``: a timeout as the log and the rewrite reason show it."""
    return f"{seconds:g} s"


async def summarize(middle: Sequence[LLMMessage], summarizer: object | None, *,
                    max_excerpt_chars: int | None = None, cancel: CancelSignal | None = None,
                    timeout_s: float | None = None) -> Summary:
    """Summarise ``middle`` (see :class:`Summary`).

    Never raises for a summarizer failure: it is logged (warning) and the excerpt is used.
    ``timeout_s`` bounds the summarizer's call: past it the call is cancelled where it waits
    (the task is not left running: its HTTP response and connection are closed as the
    cancellation unwinds the provider's stream), a warning is logged and the excerpt is used,
    as for a summarizer that raises; a server that accepts and never answers, or streams
    keep-alives for ever, costs the compaction ``timeout_s``, not the run. ``cancel`` (the
    turn's CancelSignal) goes to the summarizer's call: a cancel ends that call at once
    (StreamCancelled) and the excerpt is used, so the turn winds down promptly.
    """
    fallback = None
    if summarizer is not None:
        request = [LLMMessage(role="system", content=SUMMARY_INSTRUCTIONS),
                   LLMMessage(role="user", content=_transcript_text(middle))]
        options: dict[str, Any] = {"cache_retention": "none"}
        if cancel is not None:
            options["cancel"] = cancel  # (providers ignore options they do not know)
        import asyncio  # a running loop means asyncio is loaded: free here, not at module import

        bound = asyncio.timeout(timeout_s)
        try:
            async with bound:
                reply, _usage = await summarizer.complete(request, **options)  # type: ignore[attr-defined]
            text = content_text(reply.content).strip()
        except StreamCancelled:
            log.info("compaction summarizer cancelled with the turn; using the excerpt summary")
            text, fallback = "", "the summarizer was cancelled with the turn"
        except Exception as exc:  # noqa: BLE001 - any summarizer failure falls back, never fails the turn
            text = ""
            if isinstance(exc, TimeoutError) and bound.expired():  # ours, not the summarizer's own TimeoutError
                waited = seconds_text(timeout_s or 0)
                log.warning("compaction summarizer timed out after %s (summary_timeout_s); its call was cancelled;"
                            " using the excerpt summary", waited)
                fallback = f"the summarizer timed out after {waited}"
            else:
                log.warning("compaction summarizer failed (%s: %s); using the excerpt summary", type(exc).__name__, exc)
                fallback = "the summarizer failed"
        else:
            if not text:
                log.warning("compaction summarizer returned no text; using the excerpt summary")
                fallback = "the summarizer returned no text"
        if text:
            return Summary(f"{SUMMARY_PREFIX}{len(middle)} earlier messages]\n{text}", "summarizer")
    return Summary(excerpt_summary(middle, max_chars=max_excerpt_chars), "excerpt", fallback)
