"""One provider attempt: the pieces the turn generator streams it with.

The turn generator (:func:`.rounds.turn_events`) drives each attempt itself, so each event of a
request passes through one generator layer, not two: it yields ``llm_request``, opens the
attempt's ``llm.request`` span only when the turn is traced, calls ``provider.stream``, and for
each chunk keeps the text, yields its deltas (:func:`deltas`) and keeps its call, usage and
finish reason, stopping at the next chunk once a cancel is set; then it closes the provider's
iterator (:func:`close_stream`), also when the turn's own iterator is closed mid-stream, and
yields ``llm_response`` (:func:`response_data`, :func:`error_data`). The attempt's state lives in
the generator's locals (no object per attempt).

Guarantees of that protocol (tests/loop): every exception the provider raises, from ``stream()``
itself or from a chunk, becomes the attempt's error (the loop asks its hooks what to do); a
cancellation of the task itself propagates; the iterator is closed however the attempt ends.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..llm.cancel import StreamCancelled
from ..llm.types import LLMUsage
from .events import LoopEvent


def span_start(provider: Any, round_index: int) -> dict[str, Any]:
    """The ``llm.request`` span's opening attrs (only built when the turn is traced)."""
    return {"llm.model": getattr(provider, "model", None), "llm.provider": getattr(provider, "name", None),
            "llm.round": round_index}


def span_attrs(error: BaseException | None, usage: LLMUsage | None, finish_reason: str | None,
               cancelled: bool) -> dict[str, Any]:
    """The attrs an attempt's span closes with: its error, or its token counts and finish."""
    if error is not None:
        return {"llm.error_kind": error_kind(error), "error.type": type(error).__name__}
    usage = usage or LLMUsage()
    return {"llm.prompt_tokens": usage.prompt_tokens, "llm.completion_tokens": usage.completion_tokens,
            "llm.cached_prompt_tokens": usage.cached_prompt_tokens,
            "llm.cache_creation_tokens": usage.cache_creation_tokens,
            "llm.finish_reason": finish_reason, "llm.cancelled": cancelled}


def deltas(chunk: Any, text: list[str]) -> tuple[LoopEvent, ...]:
    """The reasoning_delta / content_delta events of a chunk that has text (its content appended
    to ``text``, the message's text)."""
    if not chunk.reasoning_delta:
        text.append(chunk.content_delta)
        return (LoopEvent("content_delta", {"delta": chunk.content_delta}),)
    reasoning = LoopEvent("reasoning_delta", {"delta": chunk.reasoning_delta})
    if not chunk.content_delta:
        return (reasoning,)
    text.append(chunk.content_delta)
    return reasoning, LoopEvent("content_delta", {"delta": chunk.content_delta})


def response_data(round_index: int, attempt: int, usage: LLMUsage | None, cancelled: bool) -> dict[str, Any]:
    """The data of a successful attempt's ``llm_response`` event."""
    if usage is None:
        data = {"round": round_index, "attempt": attempt, "promptTokens": 0, "cachedPromptTokens": 0,
                "completionTokens": 0}
    else:
        data = {"round": round_index, "attempt": attempt, "promptTokens": usage.prompt_tokens,
                "cachedPromptTokens": usage.cached_prompt_tokens, "completionTokens": usage.completion_tokens}
    if cancelled:
        data["cancelled"] = True
    return data


def error_data(round_index: int, attempt: int, error: BaseException) -> dict[str, Any]:
    """The data of a failed attempt's ``llm_response`` event."""
    return {"round": round_index, "attempt": attempt, "errorKind": error_kind(error)}


def error_kind(error: BaseException) -> str:
    """An attempt's error kind: the LLMError kind, else ``internal``."""
    return getattr(error, "kind", None) or "internal"


SinkCancel = StreamCancelled
"""Raised out of a provider's ``text_sink`` call when a cancel is set: the provider's stream
ends there (what arrived so far is kept), as a ``break`` after a yielded chunk would. It is
the exception a provider's stream raises when the turn's CancelSignal interrupts its wait on
the network (:mod:`..llm.cancel`): the turn catches one type for both."""


def provider_sink(text: list[str], sink: Callable[[str, str], None],
                  cancelled: Callable[[], bool]) -> Callable[[str], None]:
    """The ``text_sink`` option for the provider: keep the text, hand it to the loop's sink,
    and stop at this chunk when ``cancelled()`` (the check a yielded chunk gets).

    When ``sink`` has a ``many(kind, deltas)`` attribute (a sink that never cancels the loop
    itself, like the sidecar's line writer), the option gets one too: a provider's run of
    chunks is kept and handed over in one call, with the same cancel point."""
    append = text.append

    def take(content: str) -> None:
        append(content)
        sink("content_delta", content)
        if cancelled():
            raise SinkCancel

    many = getattr(sink, "many", None)
    if many is not None:  # the sink takes a run of deltas in one call (a provider's run of chunks)
        extend = text.extend

        def take_many(contents: list[str]) -> None:
            # what take() per content does: nothing can set the cancel while this runs (the
            # sink does not), so only one set before the run stops it, after its first chunk
            if cancelled():
                take(contents[0])
            extend(contents)
            many("content_delta", contents)
            if cancelled():  # a sink that cancelled after all: stop here
                raise SinkCancel

        take.many = take_many  # type: ignore[attr-defined]
    return take


def stream_done(stream: Any) -> bool:
    """Whether there is nothing to close: no stream, or an async generator that already finished."""
    return stream is None or (type(stream) is types.AsyncGeneratorType and stream.ag_frame is None)


async def close_stream(stream: Any) -> None:
    """Close a provider's stream (nothing to do for an async generator that already finished)."""
    if stream_done(stream):
        return
    closer = getattr(stream, "aclose", None)
    if closer is not None:
        await closer()
