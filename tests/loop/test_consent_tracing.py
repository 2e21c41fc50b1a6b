"""Consent through the approver, and the trace a run leaves (spans per attempt, tool, approval)."""

from __future__ import annotations

import json

from steerable_agent_runtime import InMemoryStorage
from steerable_agent_runtime.llm import (
    LLMError,
    RetryPolicy,
    ScriptedProvider,
    ScriptedResponse,
)
from steerable_agent_runtime.loop import CoreLoop, LoopConfig, RetryHooks
from steerable_agent_runtime.models import ToolCall
from steerable_agent_runtime.tools import ToolResult
from steerable_agent_runtime.tracing import TraceRecorder

from tests.helpers import run
from tests.loop.kit import USER, completion, make_router, run_loop


def shell_then(text="done"):
    return [ScriptedResponse(tool_calls=[{"id": "s", "name": "shell", "arguments": {"command": "ls"}}]), text]


def tool_results(provider, index=1):
    return [json.loads(m.content) for m in provider.requests[index].messages if m.role == "tool"]


def test_no_approver_denies_a_local_call_and_the_loop_goes_on():
    router, log = make_router()
    provider = ScriptedProvider(shell_then())
    events = run_loop(CoreLoop(provider, router), USER)
    [result] = tool_results(provider)
    assert result["success"] is False and result["error"].startswith("denied")
    assert log == [] and completion(events)["status"] == "completed"


def test_approver_decides_and_sees_the_call():
    asked = []

    async def approver(call, mode, ctx):
        asked.append((call.name, mode, call.arguments, ctx.chat_id))
        return call.arguments["command"] == "ls"

    router, log = make_router()
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[
        {"id": "a", "name": "shell", "arguments": {"command": "ls"}},
        {"id": "b", "name": "shell", "arguments": {"command": "rm -rf /"}}]), "ok"])
    run_loop(CoreLoop(provider, router, approver=approver), USER)
    assert asked == [("shell", "local", {"command": "ls"}, "c1"), ("shell", "local", {"command": "rm -rf /"}, "c1")]
    ok, denied = tool_results(provider)
    assert ok == {"success": True, "data": "ran"} and denied["error"].startswith("denied")
    assert log == [("shell", "ls")]


def test_an_approver_that_raises_is_a_denial():
    async def approver(call, mode, ctx):
        raise ConnectionError("host went away")

    router, log = make_router()
    provider = ScriptedProvider(shell_then())
    assert completion(run_loop(CoreLoop(provider, router, approver=approver), USER))["status"] == "completed"
    assert tool_results(provider)[0]["error"].startswith("denied") and log == []


def test_denials_do_not_count_as_tool_errors():
    router, _ = make_router()
    script = [ScriptedResponse(tool_calls=[{"name": "shell", "arguments": {"command": str(i)}}]) for i in range(4)]
    provider = ScriptedProvider([*script, "gave up"])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(max_tool_errors=2)), USER)
    assert completion(events)["status"] == "completed"


class HostTools:
    """A host's tools: describe() + execute(call, ctx), no ToolRouter (the sidecar's shape)."""

    def __init__(self):
        self.calls = []

    def describe(self):
        return [{"type": "function", "function": {"name": "host_echo", "description": "echo", "parameters": {}}}]

    async def execute(self, call: ToolCall, ctx) -> ToolResult:
        self.calls.append((call.name, call.arguments, ctx.chat_id))
        if call.arguments.get("explode"):
            raise RuntimeError("host tool crashed")
        return ToolResult(success=True, data=call.arguments)


def test_any_object_with_describe_and_execute_serves_as_tools():
    tools = HostTools()
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"id": "1", "name": "host_echo", "arguments": {"x": 1}},
                                                              {"id": "2", "name": "host_echo",
                                                               "arguments": {"explode": True}}]), "ok"])
    run_loop(CoreLoop(provider, tools), USER)
    assert provider.requests[0].tools == tools.describe()
    ok, failed = tool_results(provider)
    assert ok == {"success": True, "data": {"x": 1}}
    assert failed["success"] is False and "host tool crashed" in failed["error"]
    assert tools.calls[0] == ("host_echo", {"x": 1}, "c1")


def test_trace_has_one_run_an_llm_span_per_attempt_tool_and_approval_spans():
    store = InMemoryStorage()
    recorder = TraceRecorder(store)

    async def approver(call, mode, ctx):
        return True

    router, _ = make_router()
    err = LLMError("overloaded", kind="server")
    provider = ScriptedProvider([ScriptedResponse(error=err),
                                 ScriptedResponse(tool_calls=[{"id": "s", "name": "shell", "arguments": {"command": "ls"}},
                                                              {"id": "r", "name": "read_note", "arguments": {"name": "n"}}]),
                                 "done"])
    loop = CoreLoop(provider, router, hooks=RetryHooks(RetryPolicy(base_delay_ms=1)), recorder=recorder,
                    approver=approver)
    events = run_loop(loop, USER)
    assert completion(events)["traceId"] == loop.trace_id
    [trace] = run(store.list_traces())
    assert trace.trace_id == loop.trace_id and trace.outcome == "ok" and trace.ended_at and trace.chat_id == "c1"
    spans = run(store.list_spans(trace.trace_id))
    llm = [s for s in spans if s.name == "llm.request"]
    assert [s.attrs["llm.attempt"] for s in llm] == [1, 2, 1]
    assert llm[0].attrs["llm.error_kind"] == "server" and llm[1].attrs["llm.prompt_tokens"] > 0
    assert all(s.kind == "llm" and s.end_at for s in llm)
    shell = next(s for s in spans if s.name == "shell")
    [wait] = [s for s in spans if s.name == "approval.wait"]
    assert wait.parent_id == shell.span_id and wait.kind == "approval" and wait.attrs["approval.approved"] is True
    assert shell.kind == "tool" and shell.attrs["tool.success"] is True
    assert next(s for s in spans if s.name == "read_note").attrs["tool.call_id"] == "r"


def test_trace_outcomes_follow_the_completion_status():
    for provider, config, expected in [
        (ScriptedProvider([ScriptedResponse(error=LLMError("no", kind="auth"))]), None, "error"),
        (ScriptedProvider([ScriptedResponse(tool_calls=[{"name": "read_note", "arguments": {"name": "a"}}])]),
         LoopConfig(max_rounds=1), "budget_exhausted"),
    ]:
        store = InMemoryStorage()
        router, _ = make_router()
        run_loop(CoreLoop(provider, router, config=config, recorder=TraceRecorder(store)), USER)
        [trace] = run(store.list_traces())
        assert trace.outcome == expected
    store = InMemoryStorage()
    loop = CoreLoop(ScriptedProvider(["x"]), recorder=TraceRecorder(store))
    loop.cancel()
    run_loop(loop, USER)
    assert run(store.list_traces())[0].outcome == "cancelled"


def test_cancel_while_waiting_for_approval_answers_the_call_cancelled():
    import asyncio

    router, log = make_router()
    provider = ScriptedProvider(shell_then())
    loop_box = []

    async def approver(call, mode, ctx):
        asyncio.get_running_loop().call_later(0.05, loop_box[0].cancel)
        await asyncio.sleep(3600)  # the user never answers
        return True

    loop = CoreLoop(provider, router, approver=approver, storage=InMemoryStorage())
    loop_box.append(loop)
    events = run_loop(loop, USER)
    assert completion(events)["status"] == "cancelled" and log == []
    [result] = [e.data for e in events if e.kind == "tool_call_result"]
    assert result["success"] is False and result["error"].startswith("cancelled")


def test_a_denied_call_repeated_in_the_turn_is_answered_by_dedup_and_still_not_a_tool_error():
    # The model retries a call the user denied: dedup answers it from the first (denied) result
    # without asking again, and that answer is a denial like the first, never a tool error.
    router, log = make_router()
    script = [ScriptedResponse(tool_calls=[{"name": "shell", "arguments": {"command": "ls"}}]) for _ in range(3)]
    provider = ScriptedProvider([*script, "gave up"])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(max_tool_errors=2)), USER)
    assert completion(events)["status"] == "completed"
    results = [e.data for e in events if e.kind == "tool_call_result"]
    assert [r.get("deduplicated", False) for r in results] == [False, True, True]
    assert all(r["error"].startswith("denied") for r in results) and log == []


def test_a_host_executor_refusal_repeated_in_the_turn_is_still_a_denial():
    from steerable_agent_runtime.tools import ToolConsentError

    class Refusing(HostTools):
        async def execute(self, call, ctx):
            self.calls.append(call.name)
            raise ToolConsentError("the host refused")

    tools = Refusing()
    script = [ScriptedResponse(tool_calls=[{"name": "host_echo", "arguments": {"x": 1}}]) for _ in range(3)]
    provider = ScriptedProvider([*script, "gave up"])
    events = run_loop(CoreLoop(provider, tools, config=LoopConfig(max_tool_errors=2)), USER)
    assert completion(events)["status"] == "completed" and tools.calls == ["host_echo"]
    assert all(e.data["error"].startswith("denied") for e in events if e.kind == "tool_call_result")


def test_an_approver_answer_that_is_not_a_bool_is_a_denial():
    # Consent fails closed: only True approves. A truthy non-bool ("no", a dict, a coroutine
    # result the host forgot to unwrap) must never run a local or destructive tool.
    for answer in ("no", {"approved": False}, 1, [False]):
        async def approver(call, mode, ctx, answer=answer):
            return answer

        router, log = make_router()
        provider = ScriptedProvider(shell_then())
        events = run_loop(CoreLoop(provider, router, approver=approver), USER)
        assert completion(events)["status"] == "completed"
        [result] = tool_results(provider)
        assert result["success"] is False and result["error"].startswith("denied"), answer
        assert "not a bool" in result["error"] and log == [], answer


def test_a_consumer_that_stops_at_the_completion_event_keeps_the_turns_outcome():
    # Reading until the completion event and then leaving the loop (break, then aclose) is
    # how a host waits for a turn: the turn had already ended ok, so the trace must say ok,
    # not cancelled.
    import asyncio

    async def until_completion(loop):
        events = loop.run(USER, chat_id="c1")
        async for event in events:
            if event.kind == "completion":
                break
        await events.aclose()
        return event

    store = InMemoryStorage()
    loop = CoreLoop(ScriptedProvider(["hello"]), recorder=TraceRecorder(store))
    last = asyncio.run(until_completion(loop))
    assert last.data["status"] == "completed"
    [trace] = run(store.list_traces())
    assert trace.outcome == "ok" and trace.ended_at


def test_a_consumer_that_stops_mid_turn_still_records_cancelled():
    import asyncio

    async def first_delta(loop):
        events = loop.run(USER, chat_id="c1")
        async for event in events:
            if event.kind == "content_delta":
                break
        await events.aclose()

    store = InMemoryStorage()
    asyncio.run(first_delta(CoreLoop(ScriptedProvider(["hello there"]), recorder=TraceRecorder(store))))
    [trace] = run(store.list_traces())
    assert trace.outcome == "cancelled" and trace.ended_at
    assert all(s.end_at for s in run(store.list_spans(trace.trace_id)))


def test_a_tool_error_holding_a_lone_surrogate_does_not_fail_a_traced_turn():
    # The untraced turn completes (ToolResult.to_content writes the JSON escape); tracing must
    # not turn it into a crash with the tool span left open.
    from steerable_agent_runtime.tools import tool

    router, _ = make_router()

    @tool(router=router, description="Open a file", mode="read")
    async def open_file(path: str) -> str:
        raise FileNotFoundError("no file " + b"/tmp/\xff".decode("utf-8", "surrogateescape"))

    store = InMemoryStorage()
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"id": "o", "name": "open_file",
                                                               "arguments": {"path": "x"}}]), "ok"])
    events = run_loop(CoreLoop(provider, router, recorder=TraceRecorder(store)), USER)
    assert completion(events)["status"] == "completed"
    [trace] = run(store.list_traces())
    assert trace.outcome == "ok"
    spans = run(store.list_spans(trace.trace_id))
    assert all(s.end_at for s in spans)
    assert next(s for s in spans if s.name == "open_file").attrs["tool.error"].endswith("/tmp/\ufffd")
