"""The loop's fast paths give what its general path gives.

A turn with nothing configured around it (no hooks, no recorder, no text sink) runs its common
round inline: a single tool call runs its first step without the batch's coroutines
(ToolBatch.single), an untraced request enters no span. Hooks that override the methods (and do
nothing) send the same script down the general path (``open_round``, ``ToolBatch._one`` /
``_call`` / ``_execute``); the events must be the same, apart from the measured durations.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from steerable_agent_runtime import InMemoryStorage, resume_transcript
from steerable_agent_runtime.llm import LLMUsage, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop, LoopConfig, LoopHooks
from steerable_agent_runtime.tools import ToolConsentError, ToolResult, ToolRouter, tool

from tests.helpers import run
from tests.loop.kit import USER, completion, drain, kinds, make_router


class GeneralHooks(LoopHooks):
    """Overrides every per-round hook and does nothing: the loop takes its general path."""

    async def pre_step(self, transcript, ctx):
        return None

    async def post_tool_result(self, result, call, ctx):
        return None

    async def before_completion(self, draft, ctx):
        return None


USAGE = LLMUsage(prompt_tokens=50, completion_tokens=5, total_tokens=55, cached_prompt_tokens=10)


def one_call(cid: str, name: str, arguments: dict[str, Any], text: str | None = None) -> ScriptedResponse:
    return ScriptedResponse(text=text, tool_calls=[{"id": cid, "name": name, "arguments": arguments}], usage=USAGE)


def comparable(events) -> list[tuple[str, dict[str, Any]]]:
    """The events without what is measured (a tool's duration) or random (a trace id)."""
    out = []
    for event in events:
        data = dict(event.data)
        data.pop("durationMs", None)
        data.pop("traceId", None)
        out.append((event.kind, data))
    return out


def both_paths(script, tools: Any, *, config: LoopConfig | None = None, storage: bool = False):
    """The same script through the fast path and the general path: (events, requests) of each."""
    results = []
    for hooks in (None, GeneralHooks()):
        provider = ScriptedProvider(list(script))
        store = InMemoryStorage() if storage else None
        loop = CoreLoop(provider, tools, config=config, hooks=hooks, storage=store)
        events = asyncio.run(drain(loop.run(USER, chat_id="c1")))
        record = run(resume_transcript(store, "c1")) if store is not None else None
        results.append((events, [r.messages for r in provider.requests], record))
    return results


def test_a_multi_round_run_with_single_tool_calls_gives_the_same_events_on_both_paths():
    router, log = make_router()
    script = [one_call("a", "read_note", {"name": "x"}, text="looking"),
              one_call("b", "broken", {}),
              one_call("c", "read_note", {"name": "x"}),  # answered by dedup
              one_call("d", "read_notes", {"name": "y"}),  # unknown tool
              one_call("e", "write_note", {"name": "y", "text": "t"}),
              ScriptedResponse(text="done", usage=USAGE)]
    (fast, fast_requests, fast_record), (general, general_requests, general_record) = both_paths(
        script, router, storage=True)
    assert comparable(fast) == comparable(general)
    assert fast_requests == general_requests and fast_record == general_record
    assert completion(fast)["status"] == "completed"
    results = [e.data for e in fast if e.kind == "tool_call_result"]
    assert [r["success"] for r in results] == [True, False, True, False, True]
    assert results[2].get("deduplicated") is True and "did you mean read_note" in results[3]["error"]
    assert all(r["durationMs"] >= 0 for r in results)
    assert log == [("read_note", "x"), ("broken", None), ("write_note", "y")] * 2  # once per path each


def test_tools_that_wait_time_out_or_return_bad_data_give_the_same_events_on_both_paths():
    router = ToolRouter()

    @tool(router=router, description="Waits a little", mode="read")
    async def slow(name: str) -> dict:
        await asyncio.sleep(0.001)
        return {"name": name}

    @tool(router=router, description="Never returns", mode="read")
    async def hang() -> None:
        await asyncio.sleep(3600)

    @tool(router=router, description="Returns something that is not JSON", mode="read")
    async def odd() -> dict:
        return {"value": object()}

    script = [one_call("a", "slow", {"name": "x"}), one_call("b", "hang", {}), one_call("c", "odd", {}),
              one_call("d", "slow", {"name": "x"}), "done"]
    (fast, fast_requests, _), (general, general_requests, _) = both_paths(
        script, router, config=LoopConfig(tool_timeout_s=0.05))
    assert comparable(fast) == comparable(general)
    assert fast_requests == general_requests
    results = [e.data for e in fast if e.kind == "tool_call_result"]
    assert results[0]["success"] is True
    assert "timed out after 0.05 s" in results[1]["error"]
    assert results[2]["success"] is False
    assert results[3].get("deduplicated") is True  # the waiting call's result was kept for dedup
    timed_out = [e.data for e in fast if e.kind == "tool_call_result"][1]["durationMs"]
    assert timed_out >= 40  # stopped at the timeout, dated from the call's start


class HostTools:
    """A host executor (not a ToolRouter): its answers cover every kind of outcome."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def describe(self) -> list[dict[str, Any]]:
        return []

    def execute(self, call, ctx):
        self.calls.append(call.name)
        if call.name == "future":  # an awaitable that is not a coroutine
            future = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(future.set_result, {"success": True, "data": 1})
            return future
        return self._run(call)

    async def _run(self, call):
        if call.name == "refuse":
            raise ToolConsentError("the host refused", tool=call.name, mode="local")
        if call.name == "boom":
            raise RuntimeError("host broke")
        if call.name == "plain":
            return "a string, not a ToolResult"
        if call.name == "dict":
            return {"success": True, "data": {"k": "v"}}
        return ToolResult(success=True, data=call.name)


@pytest.mark.parametrize("name", ["future", "refuse", "boom", "plain", "dict", "ok"])
def test_a_host_executor_gives_the_same_events_on_both_paths(name):
    script = [one_call("a", name, {}), "done"]
    (fast, fast_requests, _), (general, general_requests, _) = both_paths(script, HostTools())
    assert comparable(fast) == comparable(general)
    assert fast_requests == general_requests
    [result] = [e.data for e in fast if e.kind == "tool_call_result"]
    assert result["success"] is (name in ("future", "dict", "ok"))
    if name == "refuse":
        assert result["error"].startswith("denied")
    content = json.loads(fast_requests[1][-1].content)
    assert content["success"] is result["success"]


def test_a_cancel_while_a_single_call_waits_answers_it_cancelled():
    store = InMemoryStorage()
    router, log = make_router()
    loop = CoreLoop(ScriptedProvider([one_call("h", "hang", {})]), router, storage=store)

    async def scenario():
        seen = []
        async for event in loop.run(USER, chat_id="c1"):
            seen.append(event)
            if event.kind == "tool_call_start":
                asyncio.get_running_loop().call_later(0.05, loop.cancel)
        return seen

    events = asyncio.run(scenario())
    assert completion(events)["status"] == "cancelled"
    [result] = [e.data for e in events if e.kind == "tool_call_result"]
    assert result["error"].startswith("cancelled") and result["durationMs"] >= 40
    transcript = run(resume_transcript(store, "c1"))
    assert json.loads(transcript[-1].content)["error"].startswith("cancelled")
    assert log == [("hang", None)]


def test_a_cancel_seen_at_the_tool_call_start_answers_the_call_without_running_it():
    router, log = make_router()
    loop = CoreLoop(ScriptedProvider([one_call("a", "read_note", {"name": "x"})]), router)

    async def scenario():
        seen = []
        async for event in loop.run(USER, chat_id="c1"):
            seen.append(event)
            if event.kind == "tool_call_start":
                loop.cancel()
        return seen

    events = asyncio.run(scenario())
    assert kinds(events)[-4:] == ["tool_call_start", "tool_call_result", "stage_complete", "completion"]
    assert events[-3].data["error"].startswith("cancelled") and log == []
    assert completion(events)["status"] == "cancelled"


def test_a_traced_turn_gives_the_same_events_as_an_untraced_one():
    from steerable_agent_runtime.tracing import TraceRecorder

    router, _ = make_router()
    script = [one_call("a", "read_note", {"name": "x"}, text="looking"), "done"]
    store = InMemoryStorage()
    untraced = asyncio.run(drain(CoreLoop(ScriptedProvider(list(script)), router).run(USER, chat_id="c1")))
    traced_loop = CoreLoop(ScriptedProvider(list(script)), router, recorder=TraceRecorder(store))
    traced = asyncio.run(drain(traced_loop.run(USER, chat_id="c1")))
    assert comparable(traced) == comparable(untraced)
    assert completion(traced)["traceId"] == traced_loop.trace_id is not None
    spans = run(store.list_spans(traced_loop.trace_id))
    assert sorted(s.name for s in spans) == ["llm.request", "llm.request", "read_note"]
    assert all(s.end_at is not None for s in spans)


def test_a_cancel_during_a_retry_delay_ends_the_wait_at_once():
    import time

    from steerable_agent_runtime.llm import LLMError
    from steerable_agent_runtime.loop import RetryAction

    class SlowRetry(LoopHooks):
        async def on_request_error(self, error, transcript, ctx):
            return RetryAction.retry(delay_ms=30_000)

    failing = ScriptedResponse(error=LLMError("overloaded", kind="rate_limited", provider="scripted"))
    provider = ScriptedProvider([failing, "never sent"])
    loop = CoreLoop(provider, hooks=SlowRetry())

    async def scenario():
        seen = []
        async for event in loop.run(USER, chat_id="c1"):
            seen.append(event)
            if event.kind == "llm_response":
                asyncio.get_running_loop().call_later(0.05, loop.cancel)
        return seen

    started = time.monotonic()
    events = asyncio.run(scenario())
    assert time.monotonic() - started < 10  # not the 30 s delay
    assert completion(events)["status"] == "cancelled" and len(provider.requests) == 1
    assert [e.data.get("errorKind") for e in events if e.kind == "llm_response"] == ["rate_limited"]


def test_the_tool_error_streak_counts_alike_on_both_paths():
    """Failed results in a row end the turn at max_tool_errors (a success in between resets the
    streak) the same way on the fast and the general path."""
    router, _ = make_router()
    script = [one_call("a", "broken", {}), one_call("b", "read_note", {"name": "x"}), one_call("c", "broken", {"n": 1}),
              one_call("d", "broken", {"n": 2}), one_call("e", "broken", {"n": 3}), "done"]
    (fast, _, _), (general, _, _) = both_paths(script, router, config=LoopConfig(max_tool_errors=3))
    assert comparable(fast) == comparable(general)
    assert completion(fast)["status"] == "failed" and "3 consecutive tool errors" in completion(fast)["reason"]
    assert [e.data["success"] for e in fast if e.kind == "tool_call_result"] == [False, True, False, False, False]
