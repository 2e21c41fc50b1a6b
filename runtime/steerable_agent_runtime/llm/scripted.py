"""ScriptedProvider: an in-process model that replays scripted responses (tests, demos, offline).

Each ``stream`` call takes the next :class:`ScriptedResponse` and yields it through the same
chunk types a real provider yields: reasoning deltas, content deltas (split every
``chunk_chars`` characters when set), each tool call once and whole, then one last chunk with
the finish reason and the usage. ``error`` raises an :class:`LLMError` before the first chunk,
or after ``error_after_chunks`` chunks (a stream that breaks mid-way). Every call is recorded
in ``requests`` (messages, tools, temperature, options), so a test can assert on exactly what the
loop sent (``record_messages=False`` keeps the messages out: a benchmark's provider costs nothing). When the script is used up, ``stream`` raises LLMError (kind ``invalid_request``)
naming how many responses it had: a loop that asks for more than the test planned fails loud.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..models import LLMMessage, ToolCall
from .cancel import CancelSignal, StreamCancelled
from .errors import LLMError
from .types import CompleteMixin, FinishReason, LLMStreamChunk, LLMUsage


@dataclass
class ScriptedResponse:
    """One scripted model response.

    ``tool_calls`` are ToolCalls or ``{id, name, arguments}`` dicts (an id is generated when
    absent). ``usage`` defaults to a rough estimate (4 characters a token) so hooks that read
    prompt tokens see plausible numbers. ``finish_reason`` defaults to ``tool_calls`` when
    there are calls, else ``stop``. ``delay_s`` sleeps before every chunk (a slow model; also
    lets a cancel land mid-stream). With a ``cancel=`` :class:`.cancel.CancelSignal`, the replay
    keeps the HTTP providers' promise: ``set()`` ends a sleep at once and the stream raises
    StreamCancelled instead of yielding its next chunk (a signal set before the stream starts:
    nothing is yielded).
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall | dict[str, Any]] = field(default_factory=list)
    usage: LLMUsage | None = None
    finish_reason: FinishReason | None = None
    error: LLMError | None = None
    error_after_chunks: int = 0
    chunk_chars: int | None = None
    delay_s: float = 0.0

    def calls(self, index: int) -> list[ToolCall]:
        """The tool calls as ToolCalls (ids ``call_<response>_<n>`` where none was given)."""
        out = []
        for n, call in enumerate(self.tool_calls):
            if isinstance(call, ToolCall):
                out.append(call)
            else:
                out.append(ToolCall(id=call.get("id") or f"call_{index}_{n}", name=call["name"],
                                    arguments=call.get("arguments") or {}))
        return out


@dataclass
class ScriptedRequest:
    """What one ``stream`` call was given."""

    messages: list[LLMMessage]
    tools: list[dict[str, Any]] | None
    temperature: float | None
    options: dict[str, Any]


def _split(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if not size or size <= 0:
        return [text]
    return [text[i:i + size] for i in range(0, len(text), size)]


def _estimate_usage(messages: Sequence[LLMMessage], response: ScriptedResponse) -> LLMUsage:
    prompt_chars = sum(len(m.model_dump_json()) for m in messages)
    prompt = max(1, prompt_chars // 4)
    completion = max(1, (len(response.text) + len(response.reasoning)) // 4 + 8 * len(response.tool_calls))
    return LLMUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


async def _sleep(seconds: float, cancel: CancelSignal | None) -> None:
    """Sleep ``seconds``, or less: until ``cancel`` is set (from any thread)."""
    if cancel is None:
        await asyncio.sleep(seconds)
        return
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        try:
            loop.call_soon_threadsafe(lambda: woken.done() or woken.set_result(None))
        except RuntimeError:  # the event loop is closed: nobody waits any more
            pass

    if not cancel.watch(wake):
        return  # set already
    try:
        await asyncio.wait([woken], timeout=seconds)
    finally:
        cancel.unwatch(wake)
        woken.cancel()


class ScriptedProvider(CompleteMixin):
    """Replays ``responses`` in order, one per ``stream`` call (a str is a text-only response)."""

    def __init__(self, responses: Iterable[ScriptedResponse | str], *, name: str = "scripted",
                 model: str = "scripted-model", record_messages: bool = True) -> None:
        self.name = name
        self.model = model
        self.record_messages = record_messages
        self.responses: list[ScriptedResponse] = [
            r if isinstance(r, ScriptedResponse) else ScriptedResponse(text=r) for r in responses]
        self.requests: list[ScriptedRequest] = []

    @property
    def remaining(self) -> int:
        """How many scripted responses are not used yet."""
        return len(self.responses) - len(self.requests)

    def stream(self, messages: Sequence[LLMMessage], *, tools: Iterable[dict[str, Any]] | None = None,
               temperature: float | None = None, **options: Any) -> AsyncIterator[LLMStreamChunk]:
        """Record the request and replay the next response (see the module docstring)."""
        index = len(self.requests)
        kept = [m.model_copy(deep=True) for m in messages] if self.record_messages else []
        self.requests.append(ScriptedRequest(kept,
                                             None if tools is None else list(tools), temperature, dict(options)))
        cancel = options.get("cancel")
        return self._replay(index, messages, cancel if isinstance(cancel, CancelSignal) else None)

    async def _replay(self, index: int, messages: Sequence[LLMMessage],
                      cancel: CancelSignal | None) -> AsyncIterator[LLMStreamChunk]:
        if index >= len(self.responses):
            raise LLMError(f"scripted provider: the script has {len(self.responses)} responses and request"
                           f" {index + 1} asked for another", kind="invalid_request", provider=self.name,
                           hint="add responses to the script (the loop made more requests than planned)")
        response = self.responses[index]
        if response.error is not None and response.error_after_chunks <= 0:
            raise response.error
        for sent, chunk in enumerate(self._chunks(index, response, messages)):
            if response.error is not None and sent >= response.error_after_chunks:
                raise response.error
            if response.delay_s:
                await _sleep(response.delay_s, cancel)
            if cancel is not None and cancel._set:  # (is_set, without the property's call: per chunk)
                raise StreamCancelled("the stream was cancelled")
            yield chunk
        if response.error is not None:  # fewer chunks than error_after_chunks: still a broken stream
            raise response.error

    def _chunks(self, index: int, response: ScriptedResponse, messages: Sequence[LLMMessage]) -> list[LLMStreamChunk]:
        chunks = [LLMStreamChunk(reasoning_delta=part) for part in _split(response.reasoning, response.chunk_chars)]
        chunks += [LLMStreamChunk(content_delta=part) for part in _split(response.text, response.chunk_chars)]
        calls = response.calls(index)
        chunks += [LLMStreamChunk(tool_call=call) for call in calls]
        finish = response.finish_reason or ("tool_calls" if calls else "stop")
        usage = response.usage or _estimate_usage(messages, response)
        chunks.append(LLMStreamChunk(finish_reason=finish, usage=usage))
        return chunks


__all__ = ["ScriptedProvider", "ScriptedRequest", "ScriptedResponse"]
