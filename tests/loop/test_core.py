"""CoreLoop: the round order, events, the record at every request, guards and bad input."""

from __future__ import annotations

import asyncio
import json

import pytest
from steerable_agent_runtime import (
    InMemoryStorage,
    SqliteStorage,
    UsageError,
    resume_transcript,
)
from steerable_agent_runtime.llm import (
    LLMError,
    LLMUsage,
    ScriptedProvider,
    ScriptedResponse,
)
from steerable_agent_runtime.loop import EVENT_KINDS, CoreLoop, LoopConfig
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.loop.kit import (
    USER,
    RecordCheckingProvider,
    completion,
    drain,
    kinds,
    make_router,
    run_loop,
)


def calls(*pairs):
    return ScriptedResponse(tool_calls=[{"id": cid, "name": name, "arguments": args} for cid, name, args in pairs])


def test_record_equals_the_next_request_after_every_round_of_a_multi_round_run(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    router, _ = make_router()
    script = [calls(("a", "read_note", {"name": "x"}), ("b", "read_note", {"name": "y"})),
              calls(("c", "write_note", {"name": "x", "text": "t"})),
              calls(("d", "broken", {})),
              ScriptedResponse(text="all done", chunk_chars=3)]
    provider = RecordCheckingProvider(script, store, "c1")
    events = run_loop(CoreLoop(provider, router, storage=store), USER)
    assert completion(events)["status"] == "completed"
    assert len(provider.requests) == 4
    for request, snapshot in zip(provider.requests, provider.snapshots):
        assert snapshot == request.messages  # the record is exactly what the model was sent
    sent = provider.requests[-1].messages  # each call's assistant message comes before its results
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "tool"]
    assert [c["id"] for c in sent[1].tool_calls] == ["a", "b"] and sent[4].tool_calls[0]["id"] == "c"
    final = run(resume_transcript(store, "c1"))
    assert final == provider.requests[-1].messages + [LLMMessage(role="assistant", content="all done")]
    entries = run(store.list_history("c1"))
    assert [e["type"] for e in entries] == ["item"] * len(final)  # each message once, no duplicates
    run(store.close())


def test_event_sequence_and_data_of_a_tool_round():
    router, _ = make_router()
    usage = LLMUsage(prompt_tokens=100, completion_tokens=5, total_tokens=105, cached_prompt_tokens=60)
    provider = ScriptedProvider([ScriptedResponse(text="hm", reasoning="think", tool_calls=[
        {"id": "a", "name": "read_note", "arguments": {"name": "x"}}], usage=usage), "ok"])
    events = run_loop(CoreLoop(provider, router), USER)
    assert kinds(events) == ["stage_start", "llm_request", "reasoning_delta", "content_delta", "llm_response",
                             "tool_call_start", "tool_call_result", "stage_complete", "stage_start", "llm_request",
                             "content_delta", "llm_response", "stage_complete", "completion"]
    assert set(kinds(events)) <= EVENT_KINDS
    assert events[1].data == {"round": 0, "attempt": 1}
    assert events[4].data == {"round": 0, "attempt": 1, "promptTokens": 100, "cachedPromptTokens": 60,
                              "completionTokens": 5}
    assert events[5].data == {"id": "a", "name": "read_note", "arguments": {"name": "x"}}
    assert events[6].data["success"] is True and events[6].data["durationMs"] >= 0
    done = completion(events)
    assert done["status"] == "completed" and done["reason"] == "stop" and done["rounds"] == 2
    assert done["usage"]["promptTokens"] > 100
    # the second request carries the result the model reads
    tool_msg = provider.requests[1].messages[-1]
    assert tool_msg.role == "tool" and tool_msg.tool_call_id == "a"
    assert json.loads(tool_msg.content) == {"success": True, "data": {"name": "x", "text": "note x"}}


def test_empty_transcript_and_missing_chat_are_usage_errors():
    loop = CoreLoop(ScriptedProvider([]))
    with pytest.raises(UsageError, match="transcript is empty"):
        loop.run([], chat_id="c1")
    with pytest.raises(UsageError, match="chat_id is required"):
        loop.run(USER, chat_id="")
    assert not loop.running


def test_an_id_no_store_can_hold_is_a_usage_error_before_anything_runs():
    store = InMemoryStorage()
    for loop, chat in ((CoreLoop(ScriptedProvider(["x"]), storage=store), "c\ud800"),
                       (CoreLoop(ScriptedProvider(["x"]), storage=store, record_id="r\udc00"), "c1")):
        with pytest.raises(UsageError, match="lone surrogate"):
            loop.run(USER, chat_id=chat)
        assert not loop.running and loop.provider.requests == []


def test_run_works_on_its_own_copy_of_the_callers_messages():
    """A list of messages (the common call) or of dicts: the caller's list is never appended to."""
    for given in ([LLMMessage(role="user", content="hi")], [{"role": "user", "content": "hi"}],
                  (LLMMessage(role="user", content="hi"),)):
        before = list(given)
        loop = CoreLoop(ScriptedProvider([calls(("c1", "read_note", {"name": "a"})), "done"]), make_router()[0])
        run(drain(loop.run(given, chat_id="c1")))
        assert list(given) == before and loop.transcript is not given
        assert [m.role for m in loop.transcript] == ["user", "assistant", "tool", "assistant"]
        assert loop.transcript[0] == LLMMessage(role="user", content="hi")
    with pytest.raises(UsageError, match="message 1 is not a message"):
        CoreLoop(ScriptedProvider([])).run([LLMMessage(role="user", content="hi"), 5], chat_id="c1")


def test_max_rounds_ends_with_budget_exhausted():
    router, _ = make_router()
    provider = ScriptedProvider([calls((f"c{i}", "read_note", {"name": str(i)})) for i in range(5)])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(max_rounds=2)), USER)
    assert len(provider.requests) == 2
    [exhausted] = [e for e in events if e.kind == "budget_exhausted"]
    assert exhausted.data["reason"] == "max_rounds" and exhausted.data["rounds"] == 2
    assert completion(events)["status"] == "budget_exhausted"


def test_budget_tokens_ends_with_budget_exhausted():
    router, _ = make_router()
    big = LLMUsage(prompt_tokens=600, completion_tokens=10, total_tokens=610)
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"name": "read_note", "arguments": {"name": str(i)}}],
                                                  usage=big) for i in range(5)])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(budget_tokens=1000)), USER)
    assert len(provider.requests) == 2
    assert [e.data["reason"] for e in events if e.kind == "budget_exhausted"] == ["budget_tokens"]
    assert completion(events)["status"] == "budget_exhausted"


def test_provider_raising_mid_stream_fails_the_turn_and_keeps_the_record_clean():
    store = InMemoryStorage()
    err = LLMError("stream cut", kind="transport")
    provider = ScriptedProvider([ScriptedResponse(text="partial answer", chunk_chars=4, error=err, error_after_chunks=2)])
    events = run_loop(CoreLoop(provider, storage=store), USER)
    assert [e.data["delta"] for e in events if e.kind == "content_delta"] == ["part", "ial "]
    [response] = [e for e in events if e.kind == "llm_response"]
    assert response.data == {"round": 0, "attempt": 1, "errorKind": "transport"}
    [error] = [e for e in events if e.kind == "error"]
    assert error.data["kind"] == "transport" and "stream cut" in error.data["message"]
    assert completion(events)["status"] == "failed"
    assert run(resume_transcript(store, "c1")) == [LLMMessage(role="user", content="go")]


def test_a_non_llm_exception_from_the_provider_is_a_failed_turn_not_a_crash():
    class Broken(ScriptedProvider):
        def stream(self, messages, **kw):
            raise RuntimeError("bug in provider")

    events = run_loop(CoreLoop(Broken([])), USER)
    assert [e.data.get("errorKind") for e in events if e.kind == "llm_response"] == ["internal"]
    assert completion(events)["status"] == "failed" and "bug in provider" in completion(events)["reason"]


def test_a_non_llm_exception_from_the_provider_is_logged_with_its_traceback(caplog):
    """A bug (not an LLMError) ends the turn with an error event whose hint says "see the logs":
    the traceback is there (the sidecar's -32603 promises it on stderr)."""
    class Broken(ScriptedProvider):
        def stream(self, messages, **kw):
            raise RuntimeError("bug in provider")

    with caplog.at_level("ERROR"):
        events = run_loop(CoreLoop(Broken([])), USER)
    [error] = [e for e in events if e.kind == "error"]
    assert error.data["hint"] == "see the logs"
    logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is RuntimeError]
    assert logged and "bug in provider" in str(logged[0].exc_info[1]), caplog.records


def test_unknown_tool_and_non_json_arguments_are_results_the_model_reads():
    router, log = make_router()
    provider = ScriptedProvider([calls(("a", "read_notes", {"name": "x"}),
                                       ("b", "read_note", {"__raw_arguments__": '{"name": '})), "sorry"])
    events = run_loop(CoreLoop(provider, router), USER)
    assert completion(events)["status"] == "completed"
    results = [json.loads(m.content) for m in provider.requests[1].messages if m.role == "tool"]
    assert results[0]["success"] is False and "did you mean read_note" in results[0]["error"]
    assert results[1]["success"] is False and "not a JSON object" in results[1]["error"]
    assert log == []


def test_hanging_tool_times_out_and_the_loop_goes_on():
    router, _ = make_router()
    provider = ScriptedProvider([calls(("h", "hang", {})), "moving on"])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(tool_timeout_s=0.2)), USER)
    [result] = [e for e in events if e.kind == "tool_call_result"]
    assert result.data["success"] is False and "timed out after 0.2 s" in result.data["error"]
    assert completion(events)["status"] == "completed"
    assert "timed out" in provider.requests[1].messages[-1].content


def test_max_tool_errors_fails_after_consecutive_errors():
    router, log = make_router()
    provider = ScriptedProvider([calls(("a", "broken", {})), calls(("b", "broken", {}), ("c", "broken", {}))])
    events = run_loop(CoreLoop(provider, router, config=LoopConfig(max_tool_errors=3, tool_dedup=False)), USER)
    done = completion(events)
    assert done["status"] == "failed" and done["reason"].startswith("max_tool_errors: 3")
    assert len(log) == 3


def test_a_success_resets_the_tool_error_streak():
    router, _ = make_router()
    provider = ScriptedProvider([calls(("a", "broken", {}), ("b", "read_note", {"name": "n"})),
                                 calls(("c", "broken", {})), "done"])
    loop = CoreLoop(provider, router, config=LoopConfig(max_tool_errors=2, tool_dedup=False))
    assert completion(run_loop(loop, USER))["status"] == "completed"


def test_dedup_answers_the_same_call_from_the_first():
    router, log = make_router()
    provider = ScriptedProvider([calls(("a", "read_note", {"name": "x"})), calls(("b", "read_note", {"name": "x"})),
                                 "done"])
    events = run_loop(CoreLoop(provider, router), USER)
    assert log == [("read_note", "x")]
    assert [e.data.get("deduplicated", False) for e in events if e.kind == "tool_call_result"] == [False, True]
    no_dedup_log = make_router()
    router2, log2 = no_dedup_log
    provider2 = ScriptedProvider([calls(("a", "read_note", {"name": "x"})), calls(("b", "read_note", {"name": "x"})),
                                  "done"])
    run_loop(CoreLoop(provider2, router2, config=LoopConfig(tool_dedup=False)), USER)
    assert len(log2) == 2


def test_consecutive_read_calls_run_together_results_in_call_order():
    from steerable_agent_runtime.tools import ToolRouter, tool

    router = ToolRouter()
    gate = {"a": asyncio.Event, "b": None}
    started: list[str] = []

    @tool(router=router, description="wait for the other", mode="read")
    async def meet(me: str, other: str) -> str:
        started.append(me)
        gate[me].set()
        await asyncio.wait_for(gate[other].wait(), 2.0)  # only returns if the other runs at the same time
        return me

    @tool(router=router, description="wait for the other (a write)", mode="safe_write")
    async def meet_write(me: str, other: str) -> str:
        return await meet(me, other)

    async def scenario(first: str, second: str):
        gate.clear()
        gate.update({"a": asyncio.Event(), "b": asyncio.Event()})
        provider = ScriptedProvider([calls(("1", first, {"me": "b", "other": "a"}), ("2", second, {"me": "a", "other": "b"})),
                                     "done"])
        events = await drain(CoreLoop(provider, router, config=LoopConfig(tool_timeout_s=5)).run(USER, chat_id="c"))
        return [json.loads(m.content) for m in provider.requests[1].messages if m.role == "tool"], events

    results, _ = asyncio.run(scenario("meet", "meet"))
    assert [r["data"] for r in results] == ["b", "a"]  # call order, though "a" finished first
    results, _ = asyncio.run(scenario("meet", "meet_write"))  # a write is never batched: the first waits alone
    assert results[0]["success"] is False and "TimeoutError" in results[0]["error"]


def test_steer_enters_the_next_request_as_a_user_message():
    from steerable_agent_runtime.tools import ToolRouter, tool

    router = ToolRouter()
    loop_box = []

    @tool(router=router, description="steer from inside", mode="read")
    async def poke() -> str:
        loop_box[0].steer("also check the tests")
        return "poked"

    provider = ScriptedProvider([calls(("p", "poke", {})), "done"])
    loop = CoreLoop(provider, router)
    loop_box.append(loop)
    events = run_loop(loop, USER)
    assert [e.data for e in events if e.kind == "steer"] == [{"content": "also check the tests"}]
    assert provider.requests[1].messages[-1] == LLMMessage(role="user", content="also check the tests")
    assert kinds(events).index("steer") == kinds(events).index("stage_start", 1) + 1


def test_cancel_mid_stream_keeps_the_partial_text_in_the_record():
    store = InMemoryStorage()
    provider = ScriptedProvider([ScriptedResponse(text="a long answer that goes on", chunk_chars=2, delay_s=0.01)])
    loop = CoreLoop(provider, storage=store)

    async def scenario():
        seen = []
        async for event in loop.run(USER, chat_id="c1"):
            seen.append(event)
            if event.kind == "content_delta" and len([e for e in seen if e.kind == "content_delta"]) == 3:
                loop.cancel()
        return seen

    events = asyncio.run(scenario())
    assert completion(events)["status"] == "cancelled"
    transcript = run(resume_transcript(store, "c1"))
    assert transcript[-1] == LLMMessage(role="assistant", content="a long")
    assert not loop.running


def test_cancel_during_a_tool_answers_every_call():
    store = InMemoryStorage()
    router, log = make_router()
    provider = ScriptedProvider([calls(("h", "hang", {}), ("r", "read_note", {"name": "x"}))])
    loop = CoreLoop(provider, router, storage=store)

    async def scenario():
        seen = []
        async for event in loop.run(USER, chat_id="c1"):
            seen.append(event)
            if event.kind == "tool_call_start" and event.data["name"] == "hang":
                asyncio.get_running_loop().call_later(0.05, loop.cancel)
        return seen

    events = asyncio.run(scenario())
    assert completion(events)["status"] == "cancelled"
    transcript = run(resume_transcript(store, "c1"))
    results = {m.tool_call_id: json.loads(m.content) for m in transcript if m.role == "tool"}
    assert set(results) == {"h", "r"}
    assert all(r["error"].startswith("cancelled") for r in results.values())
    assert ("read_note", "x") not in log


def test_cancel_before_the_run_starts_is_honoured():
    provider = ScriptedProvider(["never"])
    loop = CoreLoop(provider)
    loop.cancel()
    events = run_loop(loop, USER)
    assert completion(events)["status"] == "cancelled" and provider.requests == []
    assert completion(run_loop(loop, USER))["status"] == "completed"  # the cancel was consumed


def test_a_cancel_made_in_pre_step_ends_the_round_before_the_request():
    """cancel() called while pre_step runs (a host's hook, or another task during it): the turn
    ends cancelled with no request sent, and what pre_step appended is in the record."""
    from steerable_agent_runtime.loop import LoopHooks, PreStepAction

    store = InMemoryStorage()
    note = LLMMessage(role="user", content="a note from pre_step")
    box: list[CoreLoop] = []

    class CancellingHook(LoopHooks):
        async def pre_step(self, transcript, ctx):
            if len(box) == 1:  # the first turn only
                box.append(ctx)
                box[0].cancel()
                return PreStepAction.proceed(appends=[note])
            return None

    provider = ScriptedProvider(["never sent"])
    loop = CoreLoop(provider, storage=store, hooks=CancellingHook())
    box.append(loop)
    events = run_loop(loop, USER)
    assert completion(events)["status"] == "cancelled"
    assert provider.requests == [] and "llm_request" not in kinds(events)
    assert run(resume_transcript(store, "c1"))[-1] == note
    assert completion(run_loop(loop, USER))["status"] == "completed"  # the cancel was consumed


def test_run_over_an_existing_record_that_differs_writes_a_seed():
    store = InMemoryStorage()
    run(store.append_history("c1", [{"type": "item", "message": {"role": "user", "content": "old"}}]))
    provider = ScriptedProvider(["fresh"])
    run_loop(CoreLoop(provider, storage=store), [{"role": "user", "content": "new start"}])
    assert [e["type"] for e in run(store.list_history("c1"))] == ["item", "seed", "item"]
    assert [m.content for m in run(resume_transcript(store, "c1"))] == ["new start", "fresh"]
    # continuing with the record as a prefix appends only the new messages
    again = [*run(resume_transcript(store, "c1")), LLMMessage(role="user", content="more")]
    run_loop(CoreLoop(ScriptedProvider(["ok"]), storage=store), again)
    assert [e["type"] for e in run(store.list_history("c1"))] == ["item", "seed", "item", "item", "item"]


def test_a_tool_returning_data_that_is_not_json_is_a_failed_result_and_the_loop_goes_on():
    from steerable_agent_runtime.tools import ToolRouter

    router = ToolRouter()

    async def opaque() -> object:
        return object()

    router.register(opaque, description="returns an object")
    store = InMemoryStorage()
    provider = ScriptedProvider([calls(("o", "opaque", {})), "noted"])
    events = run_loop(CoreLoop(provider, router, storage=store), USER)
    assert completion(events)["status"] == "completed"
    result = json.loads(provider.requests[1].messages[-1].content)
    assert result["success"] is False and "not JSON-serialisable" in result["error"]
    assert run(resume_transcript(store, "c1"))[-2].tool_call_id == "o"
