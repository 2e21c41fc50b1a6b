"""ScriptedProvider replays text, reasoning, tool calls, usage and errors through real chunk types."""

from __future__ import annotations

import asyncio
import threading

import pytest
from steerable_agent_runtime.llm import (
    LLMError,
    LLMProvider,
    LLMUsage,
    ScriptedProvider,
    ScriptedResponse,
    collect,
)
from steerable_agent_runtime.llm.cancel import CancelSignal, StreamCancelled
from steerable_agent_runtime.models import LLMMessage, ToolCall

from tests.helpers import run

USER = [LLMMessage(role="user", content="hi")]


async def _chunks(provider, messages=USER, **kw):
    return [c async for c in provider.stream(messages, **kw)]


def test_text_split_per_chunk_then_finish_and_usage():
    usage = LLMUsage(prompt_tokens=10, completion_tokens=3, total_tokens=13, cached_prompt_tokens=4)
    provider = ScriptedProvider([ScriptedResponse(text="hello world", reasoning="hm", chunk_chars=4, usage=usage)])
    assert isinstance(provider, LLMProvider)
    chunks = run(_chunks(provider, tools=[{"type": "function"}], temperature=0.2, max_tokens=9))
    assert [c.reasoning_delta for c in chunks if c.reasoning_delta] == ["hm"]
    assert [c.content_delta for c in chunks if c.content_delta] == ["hell", "o wo", "rld"]
    assert chunks[-1].finish_reason == "stop" and chunks[-1].usage == usage
    [req] = provider.requests
    assert req.messages == USER and req.tools == [{"type": "function"}]
    assert req.temperature == 0.2 and req.options == {"max_tokens": 9}


def test_tool_calls_come_whole_with_finish_tool_calls():
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"name": "a", "arguments": {"x": 1}},
                                                              ToolCall(id="given", name="b")])])
    message, usage, finish = run(collect(provider.stream(USER)))
    assert finish == "tool_calls"
    assert message.tool_calls == [{"id": "call_0_0", "name": "a", "arguments": {"x": 1}},
                                  {"id": "given", "name": "b", "arguments": {}}]
    assert usage.prompt_tokens > 0


def test_error_before_and_mid_stream():
    err = LLMError("overloaded", kind="server", status_code=529)
    provider = ScriptedProvider([ScriptedResponse(error=err),
                                 ScriptedResponse(text="abcdef", chunk_chars=2, error=err, error_after_chunks=2)])
    with pytest.raises(LLMError, match="overloaded"):
        run(_chunks(provider))
    got = []

    async def drain():
        async for chunk in provider.stream(USER):
            got.append(chunk.content_delta)

    with pytest.raises(LLMError):
        run(drain())
    assert got == ["ab", "cd"]


def test_complete_and_exhausted_script():
    provider = ScriptedProvider(["only one"])
    message, _ = run(provider.complete(USER))
    assert message.content == "only one" and provider.remaining == 0
    with pytest.raises(LLMError, match="script has 1 responses") as info:
        run(provider.complete(USER))
    assert info.value.kind == "invalid_request"


def test_a_cancel_ends_a_long_delay_from_another_thread():
    """The CancelSignal promise of the HTTP providers (llm/cancel.py) holds for the replay too:
    a signal set while the replay sleeps ends the sleep and the stream raises StreamCancelled.
    The delay is an hour and the wait is bounded at 60 s: only the signal can end it in time."""
    signal = CancelSignal()
    provider = ScriptedProvider([ScriptedResponse(text="abcdef", chunk_chars=2, delay_s=3600)])

    async def scenario():
        got = []
        threading.Timer(0.05, signal.set).start()
        with pytest.raises(StreamCancelled):
            async for chunk in provider.stream(USER, cancel=signal):
                got.append(chunk)
        return got

    assert run(asyncio.wait_for(scenario(), 60)) == []


def test_a_cancel_set_while_the_caller_holds_a_chunk_stops_the_next_one():
    signal = CancelSignal()
    provider = ScriptedProvider([ScriptedResponse(text="abcdef", chunk_chars=2)])

    async def scenario():
        got = []
        with pytest.raises(StreamCancelled):
            async for chunk in provider.stream(USER, cancel=signal):
                got.append(chunk.content_delta)
                signal.set()
        return got

    assert run(scenario()) == ["ab"]
    already = CancelSignal()
    already.set()
    with pytest.raises(StreamCancelled):
        run(_chunks(ScriptedProvider(["hello"]), cancel=already))
