"""One provider attempt: what it streamed (text, calls, usage, finish reason) or its error.

The turn generator (``core.CoreLoop._turn``) drives the attempt itself, so each event of a request
passes through one generator layer, not two: it yields ``llm_request``, opens the attempt's
``llm.request`` span (a no-op span when nothing is traced), calls ``provider.stream``, and for
each chunk keeps the text (``Attempt.text``), yields its deltas (``Attempt.deltas``) and keeps
its call, usage and finish reason (``Attempt.take``), stopping at the next chunk once a cancel is
set (``cancelled``); then it closes the provider's iterator (:func:`close_stream`), also when the
turn's own iterator is closed mid-stream, and yields ``response_event()``.

Guarantees of that protocol (tests/loop): every exception the provider raises, from ``stream()``
itself or from a chunk, lands in ``Attempt.error`` (the loop asks its hooks what to do); a
cancellation of the task itself propagates; the iterator is closed however the attempt ends.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from typing import Any

from ..llm.types import LLMUsage
from ..models import ToolCall
from .events import LoopEvent


class Attempt:
    """The state of one attempt: the text and calls streamed so far, usage, finish reason, error."""

    __slots__ = ("round", "attempt", "text", "calls", "usage", "finish_reason", "cancelled", "error")

    def __init__(self, round_index: int, attempt: int) -> None:
        self.round = round_index
        self.attempt = attempt
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.usage: LLMUsage | None = None
        self.finish_reason: str | None = None
        self.cancelled = False
        self.error: BaseException | None = None

    def span_start(self, provider: Any) -> dict[str, Any]:
        """The ``llm.request`` span's opening attrs (only built when the turn is traced)."""
        return {"llm.model": getattr(provider, "model", None), "llm.provider": getattr(provider, "name", None),
                "llm.round": self.round}

    def deltas(self, chunk: Any) -> tuple[LoopEvent, ...]:
        """The reasoning_delta / content_delta events of a chunk that has text (the text kept for
        the message)."""
        if not chunk.reasoning_delta:
            self.text.append(chunk.content_delta)
            return (LoopEvent("content_delta", {"delta": chunk.content_delta}),)
        reasoning = LoopEvent("reasoning_delta", {"delta": chunk.reasoning_delta})
        if not chunk.content_delta:
            return (reasoning,)
        self.text.append(chunk.content_delta)
        return reasoning, LoopEvent("content_delta", {"delta": chunk.content_delta})

    def take(self, chunk: Any) -> None:
        """Keep a chunk's tool call, usage and finish reason."""
        if chunk.tool_call is not None:
            self.calls.append(chunk.tool_call)
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason

    def finish_span(self, span: Any) -> None:
        """Put the outcome on the attempt's span (nothing for an untraced one)."""
        if span.span_id is not None:
            span.set_attrs(self._span_attrs())

    def response_event(self) -> LoopEvent:
        """The ``llm_response`` event (after the span closed)."""
        if self.error is not None:
            return LoopEvent("llm_response", {"round": self.round, "attempt": self.attempt, "errorKind": self._kind()})
        usage = self.usage
        if usage is None:
            data = {"round": self.round, "attempt": self.attempt, "promptTokens": 0, "cachedPromptTokens": 0,
                    "completionTokens": 0}
        else:
            data = {"round": self.round, "attempt": self.attempt, "promptTokens": usage.prompt_tokens,
                    "cachedPromptTokens": usage.cached_prompt_tokens, "completionTokens": usage.completion_tokens}
        if self.cancelled:
            data["cancelled"] = True
        return LoopEvent("llm_response", data)

    def _kind(self) -> str:
        return getattr(self.error, "kind", None) or "internal"

    def _span_attrs(self) -> dict[str, Any]:
        if self.error is not None:
            return {"llm.error_kind": self._kind(), "error.type": type(self.error).__name__}
        usage = self.usage or LLMUsage()
        return {"llm.prompt_tokens": usage.prompt_tokens, "llm.completion_tokens": usage.completion_tokens,
                "llm.cached_prompt_tokens": usage.cached_prompt_tokens,
                "llm.cache_creation_tokens": usage.cache_creation_tokens,
                "llm.finish_reason": self.finish_reason, "llm.cancelled": self.cancelled}


class SinkCancel(Exception):
    """Raised out of a provider's ``text_sink`` call when a cancel is set: the provider's
    stream ends there (what arrived so far is kept), as a ``break`` after a yielded chunk would."""


def provider_sink(text: list[str], sink: Callable[[str, str], None],
                   cancel: asyncio.Event | None) -> Callable[[str], None]:
    """The ``text_sink`` option for the provider: keep the text, hand it to the loop's sink,
    and stop at this chunk when a cancel is set (the check a yielded chunk gets).

    When ``sink`` has a ``many(kind, deltas)`` attribute (a sink that never cancels the loop
    itself, like the sidecar's line writer), the option gets one too: a provider's run of
    chunks is kept and handed over in one call, with the same cancel point."""
    append = text.append
    is_set = cancel.is_set if cancel is not None else bool

    def take(content: str) -> None:
        append(content)
        sink("content_delta", content)
        if is_set():
            raise SinkCancel

    many = getattr(sink, "many", None)
    if many is not None:  # the sink takes a run of deltas in one call (a provider's run of chunks)
        extend = text.extend

        def take_many(contents: list[str]) -> None:
            # what take() per content does: nothing can set the cancel while this runs (the
            # sink does not), so only one set before the run stops it, after its first chunk
            if is_set():
                take(contents[0])
            extend(contents)
            many("content_delta", contents)
            if is_set():  # a sink that cancelled after all: stop here
                raise SinkCancel

        take.many = take_many  # type: ignore[attr-defined]
    return take


async def close_stream(stream: Any) -> None:
    """Close a provider's stream (nothing to do for an async generator that already finished)."""
    if stream is None or (type(stream) is types.AsyncGeneratorType and stream.ag_frame is None):
        return
    closer = getattr(stream, "aclose", None)
    if closer is not None:
        await closer()
