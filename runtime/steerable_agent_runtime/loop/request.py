"""One provider attempt: stream it, turn chunks into events, bracket it in an ``llm.request`` span."""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..llm.types import LLMUsage
from ..models import LLMMessage, ToolCall
from .events import LoopEvent


class Attempt:
    """The stream of one attempt and what it produced (text, calls, usage, or the error).

    Guarantees: the provider's iterator is closed however the attempt ends; a cancel set while
    streaming stops at the next chunk with what arrived so far kept (``cancelled`` True); any
    exception the provider raises is caught into ``error`` (the loop asks its hooks what to do),
    a cancellation of the task itself propagates.
    """

    def __init__(self, round_index: int, attempt: int) -> None:
        self.round = round_index
        self.attempt = attempt
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.usage: LLMUsage | None = None
        self.finish_reason: str | None = None
        self.cancelled = False
        self.error: BaseException | None = None

    def message(self) -> LLMMessage | None:
        """The assistant message of this attempt (None when it produced nothing)."""
        if not self.text and not self.calls:
            return None if self.cancelled else LLMMessage(role="assistant", content="")
        return LLMMessage(role="assistant", content="".join(self.text) if self.text or not self.calls else None,
                          tool_calls=[c.to_wire() for c in self.calls] or None)

    async def stream(self, provider: Any, transcript: Sequence[LLMMessage], tools: list[dict[str, Any]],
                     options: dict[str, Any], run: Any, cancel: asyncio.Event | None,
                     sink: Callable[[str, str], None] | None = None) -> AsyncIterator[LoopEvent]:
        """Run the attempt, yielding llm_request, the deltas (given to ``sink(kind, delta)``
        instead, when there is one) and llm_response.

        With a sink, the provider also gets the option ``text_sink`` (providers ignore options
        they do not know): one that takes it hands over text-only chunks as plain strings
        instead of LLMStreamChunks; their text is kept and relayed the same, in order."""
        yield LoopEvent("llm_request", {"round": self.round, "attempt": self.attempt})
        attrs = {"llm.model": getattr(provider, "model", None), "llm.provider": getattr(provider, "name", None),
                 "llm.round": self.round} if run.trace_id is not None else None
        async with run.llm_request(attrs, attempt=self.attempt) as span:
            stream = None
            try:
                text = self.text
                if sink is not None:  # a provider that takes text_sink hands it text-only chunks
                    options = {**options, "text_sink": _provider_sink(text, sink, cancel)}
                stream = provider.stream(list(transcript), tools=tools or None, **options)
                async for chunk in stream:
                    content = chunk.content_delta
                    if (content and not chunk.reasoning_delta and chunk.tool_call is None and chunk.usage is None
                            and chunk.finish_reason is None):  # most chunks: text and nothing else
                        text.append(content)
                        if sink is None:
                            yield LoopEvent("content_delta", {"delta": content})
                        else:
                            sink("content_delta", content)
                    else:
                        if content or chunk.reasoning_delta:
                            for event in self._deltas(chunk):
                                if sink is None:
                                    yield event
                                else:
                                    sink(event.kind, event.data["delta"])
                        self._take(chunk)
                    if cancel is not None and cancel.is_set():
                        self.cancelled = True
                        break
            except _SinkCancel:  # a cancel seen at a chunk given to the provider's text_sink
                self.cancelled = True
            except Exception as exc:  # noqa: BLE001 - every provider failure goes to on_request_error
                self.error = exc
            finally:
                await _close(stream)
            if span.span_id is not None:
                span.set_attrs(self._span_attrs())
        yield LoopEvent("llm_response", self._response_data())

    def _deltas(self, chunk: Any) -> tuple[LoopEvent, ...]:
        """The reasoning_delta / content_delta events of a chunk (the text kept for the message)."""
        if not chunk.reasoning_delta:
            self.text.append(chunk.content_delta)
            return (LoopEvent("content_delta", {"delta": chunk.content_delta}),)
        reasoning = LoopEvent("reasoning_delta", {"delta": chunk.reasoning_delta})
        if not chunk.content_delta:
            return (reasoning,)
        self.text.append(chunk.content_delta)
        return reasoning, LoopEvent("content_delta", {"delta": chunk.content_delta})

    def _take(self, chunk: Any) -> None:
        if chunk.tool_call is not None:
            self.calls.append(chunk.tool_call)
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason

    def _kind(self) -> str:
        return getattr(self.error, "kind", None) or "internal"

    def _response_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"round": self.round, "attempt": self.attempt}
        if self.error is not None:
            data["errorKind"] = self._kind()
            return data
        usage = self.usage or LLMUsage()
        data.update(promptTokens=usage.prompt_tokens, cachedPromptTokens=usage.cached_prompt_tokens,
                    completionTokens=usage.completion_tokens)
        if self.cancelled:
            data["cancelled"] = True
        return data

    def _span_attrs(self) -> dict[str, Any]:
        if self.error is not None:
            return {"llm.error_kind": self._kind(), "error.type": type(self.error).__name__}
        usage = self.usage or LLMUsage()
        return {"llm.prompt_tokens": usage.prompt_tokens, "llm.completion_tokens": usage.completion_tokens,
                "llm.cached_prompt_tokens": usage.cached_prompt_tokens,
                "llm.cache_creation_tokens": usage.cache_creation_tokens,
                "llm.finish_reason": self.finish_reason, "llm.cancelled": self.cancelled}


class _SinkCancel(Exception):
    """Raised out of a provider's ``text_sink`` call when a cancel is set: the provider's
    stream ends there (what arrived so far is kept), as a ``break`` after a yielded chunk would."""


def _provider_sink(text: list[str], sink: Callable[[str, str], None],
                   cancel: asyncio.Event | None) -> Callable[[str], None]:
    """The ``text_sink`` option for the provider: keep the text, hand it to the loop's sink,
    and stop at this chunk when a cancel is set (the check a yielded chunk gets)."""
    append = text.append
    is_set = cancel.is_set if cancel is not None else bool

    def take(content: str) -> None:
        append(content)
        sink("content_delta", content)
        if is_set():
            raise _SinkCancel

    return take


async def _close(stream: Any) -> None:
    """Close a provider's stream (nothing to do for an async generator that already finished)."""
    if stream is None or (type(stream) is types.AsyncGeneratorType and stream.ag_frame is None):
        return
    closer = getattr(stream, "aclose", None)
    if closer is not None:
        await closer()
