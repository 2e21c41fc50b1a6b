"""CoreLoop red-team: tools, hooks and models behaving badly, controls called at odd times.

Each case runs the real loop (ScriptedProvider, or OpenAICompatProvider against the replay
server on 127.0.0.1) on a real SqliteStorage file and asserts the documented outcome, that the
record resumes to exactly the loop's transcript, and (where a record is left) that
``steerable-maint check`` finds nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from steerable_agent_runtime import SqliteStorage, UsageError, resume_transcript
from steerable_agent_runtime.llm import LLMError, OpenAICompatProvider, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import (
    INTERRUPTED_ERROR,
    CoreLoop,
    LoopConfig,
    LoopHooks,
    PreStepAction,
    RetryAction,
)
from steerable_agent_runtime.tools import ToolResult, ToolRouter

from tests.helpers import run
from tests.loop.kit import USER, completion, drain, kinds
from tests.loop.test_crash import check_clean
from tests.replay_server import Reply, ReplayServer


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def odd_router() -> ToolRouter:
    router = ToolRouter()

    async def sysexit() -> None:
        raise SystemExit(3)

    async def self_cancel() -> None:
        raise asyncio.CancelledError()

    async def genexit() -> None:
        raise GeneratorExit()

    async def unprintable() -> None:
        raise _Unprintable()

    async def surrogate_error() -> None:
        raise OSError("no such file: b\udcffd \x00")

    async def surrogate_data() -> list:
        return ["b\udcffd", "\x00"]

    async def ok(n: int = 0) -> int:
        return n

    async def stop() -> None:
        raise KeyboardInterrupt

    def sleepy() -> int:
        time.sleep(0.5)
        return 1

    for fn in (sysexit, self_cancel, genexit, unprintable, surrogate_error, surrogate_data, ok, stop, sleepy):
        router.register(fn)
    return router


def call(name: str, arguments: dict | None = None, id: str | None = None) -> dict:
    return {"id": id or f"id_{name}", "name": name, "arguments": arguments or {}}


def turn(db, responses, *, tools=None, hooks=None, messages=None, before=None, during=None, config=None,
         provider=None):
    """Run one turn on a fresh SqliteStorage at ``db``: (events, the loop, the resumed record)."""
    async def main():
        store = SqliteStorage(db)
        loop = CoreLoop(provider or ScriptedProvider(responses), tools if tools is not None else odd_router(),
                        hooks=hooks, storage=store, config=config)
        if before:
            before(loop)
        events = []
        try:
            async for event in loop.run(messages or USER, chat_id="c1"):
                events.append(event)
                if during:
                    during(loop, event)
        finally:
            record = await resume_transcript(store, "c1")
            await store.close()
        return events, loop, record
    return run(asyncio.wait_for(main(), 30))


def results(events) -> list[dict]:
    return [e.data for e in events if e.kind == "tool_call_result"]


def same(loop, record) -> bool:
    return [m.to_wire() for m in record] == [m.to_wire() for m in loop.transcript]


@pytest.mark.parametrize("name,kind", [("sysexit", "SystemExit"), ("self_cancel", "CancelledError"),
                                       ("genexit", "GeneratorExit"), ("unprintable", "_Unprintable")])
def test_a_tool_raising_a_base_exception_is_a_failed_result_and_the_turn_goes_on(tmp_path, name, kind):
    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call(name), call("ok", {"n": 1})]), "done"])
    assert completion(events)["status"] == "completed"
    got = results(events)
    assert [r["success"] for r in got] == [False, True]
    assert got[0]["error"].startswith(f"tool {name!r} raised {kind}")
    assert same(loop, record)
    check_clean(db)


def test_keyboard_interrupt_from_a_tool_propagates_and_resume_answers_the_call_interrupted(tmp_path):
    db = tmp_path / "s.db"
    with pytest.raises(KeyboardInterrupt):
        turn(db, [ScriptedResponse(tool_calls=[call("stop")]), "done"])
    check_clean(db)

    async def resume():
        store = SqliteStorage(db)
        provider = ScriptedProvider(["checked"])
        events = await drain(CoreLoop(provider, odd_router(), storage=store).resume("c1"))
        await store.close()
        return events, provider
    events, provider = run(resume())
    assert completion(events)["status"] == "completed"
    assert INTERRUPTED_ERROR in provider.requests[0].messages[-1].content
    check_clean(db)


def test_a_host_executor_raising_base_exceptions_gets_failed_results(tmp_path):
    class Host:
        def describe(self):
            return []

        async def execute(self, call, ctx):
            if call.name == "exit":
                raise SystemExit(1)
            if call.name == "cancel":
                raise asyncio.CancelledError()
            raise _Unprintable()

    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call("exit")]),
                                     ScriptedResponse(tool_calls=[call("cancel")]), "done"], tools=Host(),
                                config=LoopConfig(max_tool_errors=5))
    assert completion(events)["status"] == "completed"
    errors = [r["error"] for r in results(events)]
    assert errors[0].startswith("tool 'exit' raised SystemExit") and "CancelledError" in errors[1]
    assert same(loop, record)


@pytest.mark.parametrize("name", ["surrogate_error", "surrogate_data"])
def test_a_lone_surrogate_in_a_tool_result_is_stored_as_its_json_escape(tmp_path, name):
    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call(name)]), "done"])
    assert completion(events)["status"] == "completed"
    assert same(loop, record)
    content = record[2].content
    assert "\\udcff" in content and "b\udcffd" in json.dumps(json.loads(content), ensure_ascii=False)
    check_clean(db)


def test_a_lone_surrogate_in_the_model_text_is_replaced_and_the_record_matches(tmp_path):
    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(text="half \ud800 of a pair")])
    assert completion(events)["status"] == "completed"
    assert loop.transcript[-1].content == "half \ufffd of a pair"
    assert same(loop, record)
    check_clean(db)


def _sse(*objs) -> Reply:
    return Reply(chunks=[f"data: {json.dumps(o)}\n\n".encode() for o in objs] + [b"data: [DONE]\n\n"])


def _wire_call(arguments: str, id: str, index: int = 0) -> dict:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function",
                                                                "function": {"name": "ok", "arguments": arguments}}]}}]}


_FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
           "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}
_DONE = _sse({"choices": [{"index": 0, "delta": {"content": "done"}}]},
             {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})


@pytest.mark.parametrize("arguments", ["[1, 2]", "5", "null", '{"n": ', '{"n": "\\ud800"}',
                                       json.dumps({"n": 1, "pad": "x" * 1_000_000})])
def test_odd_arguments_from_the_wire_get_a_failed_result_the_model_reads(tmp_path, arguments):
    db = tmp_path / "s.db"
    with ReplayServer([_sse(_wire_call(arguments, "c1"), _FINISH), _DONE]) as server:
        provider = OpenAICompatProvider("m", base_url=server.url + "/v1")
        events, loop, record = turn(db, [], provider=provider)
    assert completion(events)["status"] == "completed"
    assert [r["success"] for r in results(events)] == [False]
    assert same(loop, record)
    check_clean(db)


def test_duplicate_call_ids_in_one_response_get_unique_ids(tmp_path):
    db = tmp_path / "s.db"
    with ReplayServer([_sse(_wire_call('{"n": 1}', "x", 0), _wire_call('{"n": 2}', "x", 1), _FINISH),
                       _DONE]) as server:
        provider = OpenAICompatProvider("m", base_url=server.url + "/v1")
        events, loop, record = turn(db, [], provider=provider)
    assert completion(events)["status"] == "completed"
    ids = [c["id"] for c in loop.transcript[1].tool_calls]
    assert len(set(ids)) == 2 and ids[0] == "x"
    assert [m.tool_call_id for m in loop.transcript[2:4]] == ids
    assert [json.loads(m.content)["data"] for m in loop.transcript[2:4]] == [1, 2]
    assert same(loop, record)


def test_a_thousand_parallel_calls_are_answered_in_call_order(tmp_path):
    db = tmp_path / "s.db"
    calls = [call("ok", {"n": i}, id=f"c{i}") for i in range(1000)]
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=calls), "done"])
    assert completion(events)["status"] == "completed"
    assert [json.loads(m.content)["data"] for m in loop.transcript[2:-1]] == list(range(1000))
    assert same(loop, record)


class Broken(LoopHooks):
    """Each hook method returns (or raises) what it was given for it."""

    def __init__(self, **what):
        self.what = what

    def _give(self, name):
        value = self.what.get(name)
        if isinstance(value, BaseException):
            raise value
        return value

    async def pre_step(self, transcript, ctx):
        return self._give("pre_step")

    async def compact_now(self, transcript, ctx):
        return self._give("compact_now")

    async def post_tool_result(self, result, call, ctx):
        return self._give("post_tool_result")

    async def on_request_error(self, error, transcript, ctx):
        return self._give("on_request_error")

    async def before_completion(self, draft, ctx):
        return self._give("before_completion")


@pytest.mark.parametrize("hook,value", [
    ("pre_step", ValueError("boom")), ("pre_step", "yes"), ("pre_step", {"action": "reject"}),
    ("pre_step", PreStepAction(action="proceed", appends=["not a message"])),
    ("compact_now", ValueError("boom")), ("compact_now", "x"),
    ("before_completion", ValueError("boom")), ("before_completion", 42),
    ("on_request_error", ValueError("boom")), ("on_request_error", "retry"),
])
def test_a_hook_that_raises_or_returns_a_wrong_type_fails_the_turn_with_a_hook_error(tmp_path, hook, value):
    db = tmp_path / "s.db"
    responses = [ScriptedResponse(error=LLMError("down", kind="server"))] if hook == "on_request_error" else ["done"]
    events, loop, record = turn(db, responses, hooks=Broken(**{hook: value}),
                                before=lambda loop: loop.request_compact())
    assert completion(events)["status"] == "failed"
    error = [e.data for e in events if e.kind == "error"][-1]
    assert error["kind"] == "hook" and hook in error["message"] and error["hint"]
    assert same(loop, record)
    check_clean(db)


@pytest.mark.parametrize("value", [ValueError("boom"), "str", {"success": True}])
def test_a_post_tool_result_hook_that_fails_gives_a_failed_result(tmp_path, value):
    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call("ok", {"n": 1})]), "done"],
                                hooks=Broken(post_tool_result=value))
    assert completion(events)["status"] == "completed"
    got = results(events)[0]
    assert got["success"] is False and "post_tool_result" in got["error"]
    assert same(loop, record)


def test_hook_appends_given_as_dicts_are_messages(tmp_path):
    db = tmp_path / "s.db"
    hooks = Broken(pre_step=PreStepAction(action="proceed", appends=[{"role": "user", "content": "note"}]))
    events, loop, record = turn(db, ["done"], hooks=hooks)
    assert completion(events)["status"] == "completed"
    assert [m.content for m in record] == ["go", "note", "done"]


def test_a_hook_that_retries_forever_stops_at_the_attempt_cap(tmp_path):
    from steerable_agent_runtime.loop import MAX_ATTEMPTS_PER_REQUEST

    db = tmp_path / "s.db"
    responses = [ScriptedResponse(error=LLMError("bad", kind="invalid_request"))] * (MAX_ATTEMPTS_PER_REQUEST + 5)
    events, loop, record = turn(db, responses, hooks=Broken(on_request_error=RetryAction.retry()))
    assert completion(events)["status"] == "failed"
    assert kinds(events).count("llm_request") == MAX_ATTEMPTS_PER_REQUEST
    assert same(loop, record)


def test_cancel_from_another_task_stops_a_hook_that_retries_at_once(tmp_path):
    db = tmp_path / "s.db"
    responses = [ScriptedResponse(error=LLMError("bad", kind="invalid_request"))] * 200

    async def main():
        store = SqliteStorage(db)
        loop = CoreLoop(ScriptedProvider(responses), hooks=Broken(on_request_error=RetryAction.retry()),
                        storage=store)

        async def canceller():
            while not loop.running:
                await asyncio.sleep(0)
            loop.cancel()
        task = asyncio.ensure_future(canceller())
        events = await drain(loop.run(USER, chat_id="c1"))
        await task
        await store.close()
        return events
    events = run(asyncio.wait_for(main(), 10))
    assert completion(events)["status"] == "cancelled"
    assert kinds(events).count("llm_request") < 20


def test_cancel_from_another_thread_stops_a_running_tool(tmp_path):
    db = tmp_path / "s.db"
    errors = []

    def cancel_in_thread(loop):
        try:
            loop.cancel()
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)

    running = threading.Event()

    def cancel_once_running(loop):
        running.wait(10)
        cancel_in_thread(loop)

    def during(loop, event):
        if event.kind == "tool_call_start":  # the thread cancels while the tool awaits
            threading.Thread(target=cancel_once_running, args=(loop,), daemon=True).start()

    router = ToolRouter()

    async def wait() -> None:
        running.set()
        await asyncio.sleep(30)
    router.register(wait)
    started = time.monotonic()
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call("wait")]), "done"], tools=router,
                                during=during)
    assert errors == []
    assert completion(events)["status"] == "cancelled" and time.monotonic() - started < 10
    assert results(events)[0]["error"].startswith("cancelled")
    assert same(loop, record)


def test_controls_at_odd_times(tmp_path):
    db = tmp_path / "s.db"
    loop_box = {}

    def before(loop):
        loop.steer("first")
        loop.steer("second")
        loop.request_compact()
        loop.request_compact()  # twice: one compaction request
        loop_box["loop"] = loop
    events, loop, record = turn(db, ["done"], before=before)
    assert [e.data["content"] for e in events if e.kind == "steer"] == ["first", "second"]
    assert [e.data["action"] for e in events if e.kind == "hook_action"] == ["compact_noop"]
    with pytest.raises(UsageError):
        loop.steer("bad \ud800 text")
    with pytest.raises(UsageError):
        loop.steer("")
    loop.storage = None  # (the store is closed) the next turns run without a record
    loop.cancel()  # after the turn: honoured by the next run, then consumed
    loop.cancel()
    assert completion(run(drain(loop.run(USER, chat_id="c2"))))["status"] == "cancelled"
    loop.provider = ScriptedProvider(["again"])
    assert completion(run(drain(loop.run(USER, chat_id="c3"))))["status"] == "completed"


@pytest.mark.parametrize("field,value", [("max_rounds", 0), ("budget_tokens", 0), ("budget_tokens", -1),
                                         ("max_tool_errors", 0), ("tool_timeout_s", float("nan")),
                                         ("tool_timeout_s", 0), ("max_rounds", 1.5)])
def test_limits_out_of_range_are_usage_errors(field, value):
    with pytest.raises(UsageError, match=field):
        LoopConfig(**{field: value})


def test_a_transcript_with_a_tool_result_whose_call_is_missing_is_refused_at_run(tmp_path):
    loop = CoreLoop(ScriptedProvider(["done"]), storage=SqliteStorage(tmp_path / "s.db"))
    messages = [{"role": "user", "content": "go"},
                {"role": "tool", "toolCallId": "ghost", "name": "ok", "content": "{}"}]
    with pytest.raises(UsageError, match="ghost"):
        loop.run(messages, chat_id="c1")
    run(loop.storage.close())
    assert not loop.running


def test_sync_tool_past_its_timeout_is_answered_timed_out(tmp_path):
    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(tool_calls=[call("sleepy")]), "done"],
                                config=LoopConfig(tool_timeout_s=0.05))
    assert "timed out" in results(events)[0]["error"]
    assert same(loop, record)


def test_tool_result_preserves_a_surrogate_free_result():
    assert ToolResult(success=True, data="ü").to_content() == '{"success":true,"data":"ü"}'


def _events(*events) -> Reply:
    return Reply(chunks=[f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode() for kind, data in events])


def _anthropic(block: dict, delta: dict, stop: str) -> Reply:
    return _events(
        ("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                                "content": [], "model": "x",
                                                                "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}))


@pytest.mark.parametrize("partial", ["[1, 2]", "5", '{"n": '])
def test_anthropic_arguments_that_are_not_an_object_get_a_failed_result(tmp_path, partial):
    from steerable_agent_runtime.llm import AnthropicProvider

    call_reply = _anthropic({"type": "tool_use", "id": "tu1", "name": "ok", "input": {}},
                            {"type": "input_json_delta", "partial_json": partial}, "tool_use")
    done = _anthropic({"type": "text", "text": ""}, {"type": "text_delta", "text": "done"}, "end_turn")
    db = tmp_path / "s.db"
    with ReplayServer([call_reply, done]) as server:
        events, loop, record = turn(db, [], provider=AnthropicProvider("m", api_key="k", base_url=server.url))
    assert completion(events)["status"] == "completed"
    got = results(events)
    assert [r["success"] for r in got] == [False] and "not a JSON object" in got[0]["error"]
    assert same(loop, record)
    check_clean(db)


def _gemini(part: dict) -> Reply:
    body = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 1, "totalTokenCount": 6}}
    return Reply(chunks=[f"data: {json.dumps(body)}\r\n\r\n".encode()])


@pytest.mark.parametrize("args", [[1, 2], 5, "text"])
def test_gemini_arguments_that_are_not_an_object_get_a_failed_result(tmp_path, args):
    from steerable_agent_runtime.llm import GoogleGenAIProvider

    db = tmp_path / "s.db"
    with ReplayServer([_gemini({"functionCall": {"name": "ok", "args": args}}), _gemini({"text": "done"})]) as server:
        events, loop, record = turn(db, [], provider=GoogleGenAIProvider("m", api_key="k", base_url=server.url))
    assert completion(events)["status"] == "completed"
    got = results(events)
    assert [r["success"] for r in got] == [False] and "not a JSON object" in got[0]["error"]
    assert same(loop, record)


@pytest.mark.parametrize("exc", [SystemExit(1), asyncio.CancelledError(), ValueError("x")],
                         ids=["SystemExit", "CancelledError", "ValueError"])
def test_an_approver_raising_anything_is_a_denial(tmp_path, exc):
    router = ToolRouter()

    async def shell(command: str) -> str:
        return "ran"
    router.register(shell, mode="local")

    async def approver(call, mode, ctx):
        raise exc

    async def main():
        store = SqliteStorage(tmp_path / "s.db")
        loop = CoreLoop(ScriptedProvider([ScriptedResponse(tool_calls=[call("shell", {"command": "ls"})]), "done"]),
                        router, storage=store, approver=approver)
        events = await drain(loop.run(USER, chat_id="c1"))
        await store.close()
        return events
    events = run(main())
    assert completion(events)["status"] == "completed"
    assert results(events)[0]["error"].startswith("denied") and type(exc).__name__ in results(events)[0]["error"]


def test_a_fragment_with_nul_and_a_lone_surrogate_is_stored(tmp_path):
    from steerable_agent_runtime.context import ContextFragment

    class Odd(ContextFragment):
        role = "user"
        content_kind = "odd"
        start_marker = "<odd>"
        end_marker = "</odd>"

    class Inject(LoopHooks):
        async def pre_step(self, transcript, ctx):
            if ctx.round_index == 0:
                return PreStepAction.proceed(appends=[Odd("name b\udcffd \x00 end").to_message()])
            return None

    db = tmp_path / "s.db"
    events, loop, record = turn(db, [ScriptedResponse(text="nul \x00 here")], hooks=Inject(),
                                messages=[{"role": "user", "content": "a\x00b"}])
    assert completion(events)["status"] == "completed"
    assert "b\ufffdd \x00 end" in record[1].content and record[2].content == "nul \x00 here"
    assert same(loop, record)
    check_clean(db)


def test_a_record_compacted_with_an_odd_summary_resumes_to_the_same_transcript(tmp_path):
    from steerable_agent_runtime.compaction import CompactionHooks

    db = tmp_path / "s.db"
    long = [{"role": "user", "content": "go"}] + [
        m for i in range(10) for m in ({"role": "assistant", "content": "a" * 400}, {"role": "user", "content": "u" * 400})]
    hooks = CompactionHooks(max_context_tokens=1000, keep_last_messages=2,
                            summarizer=ScriptedProvider(["summary with \ud800 in it"]))
    events, loop, record = turn(db, ["done"], hooks=hooks, messages=long)
    assert [e.data["action"] for e in events if e.kind == "hook_action"] == ["rewrite"]
    assert same(loop, record) and len(record) < len(long)
    check_clean(db)

    async def resume():
        store = SqliteStorage(db)
        provider = ScriptedProvider(["second"])
        events = await drain(CoreLoop(provider, storage=store).resume("c1", [{"role": "user", "content": "more"}]))
        after = await resume_transcript(store, "c1")
        await store.close()
        return events, provider.requests[0].messages, after
    events, sent, after = run(resume())
    assert completion(events)["status"] == "completed"
    assert [m.to_wire() for m in sent] == [m.to_wire() for m in record] + [{"role": "user", "content": "more"}]
    assert [m.content for m in after][-2:] == ["more", "second"]
    check_clean(db)


@pytest.mark.parametrize("make", ["fails", "empty"])
def test_a_summariser_that_fails_or_says_nothing_gives_the_excerpt_summary(tmp_path, make):
    from steerable_agent_runtime.compaction import CompactionHooks

    summarizer = ScriptedProvider([ScriptedResponse(error=LLMError("down", kind="server")) if make == "fails" else ""])
    long = [{"role": "user", "content": "go"}] + [
        m for i in range(10) for m in ({"role": "assistant", "content": "a" * 400}, {"role": "user", "content": "u" * 400})]
    db = tmp_path / "s.db"
    events, loop, record = turn(db, ["done"], messages=long,
                                hooks=CompactionHooks(max_context_tokens=1000, keep_last_messages=2,
                                                      summarizer=summarizer))
    assert completion(events)["status"] == "completed"
    summary = [m.content for m in record if isinstance(m.content, str) and m.content.startswith("[conversation summary")]
    assert summary and "[assistant] " + "a" * 20 in summary[0]
    assert same(loop, record)
    check_clean(db)


@pytest.mark.parametrize("messages", [[{"role": "bogus", "content": "x"}], ["just a string"],
                                      [{"role": "user", "content": 5}], None, "go", {"role": "user"}])
def test_run_with_messages_that_are_not_messages_is_a_usage_error(messages):
    loop = CoreLoop(ScriptedProvider(["x"]))
    with pytest.raises(UsageError) as info:
        loop.run(messages, chat_id="c1")
    assert info.value.hint and "\n" not in str(info.value) and not loop.running


def test_a_credential_in_a_tool_exception_reaches_neither_the_model_nor_the_record(tmp_path):
    """A handler exception quoting a connection URL with its password and a bearer token: the
    failed result the model reads, the tool_call_result event and the history record keep the
    rest of the text and lose the credentials."""
    router = ToolRouter()

    async def query(sql: str) -> list:
        raise ConnectionError("cannot reach postgresql://app:s3cr3t-pw@db.internal:5432/app"
                              " (sent Authorization: Bearer sk-live-0123456789abcdef)")

    async def plain() -> None:
        raise ValueError("row 7 has no column 'total'")

    router.register(query)
    router.register(plain)
    db = tmp_path / "s.db"
    provider = ScriptedProvider([ScriptedResponse(tool_calls=[call("query", {"sql": "select 1"}), call("plain")]),
                                 "done"])
    events, loop, record = turn(db, [], tools=router, provider=provider)
    assert completion(events)["status"] == "completed"
    got = results(events)
    assert got[0]["error"] == ("tool 'query' raised ConnectionError: cannot reach"
                               " postgresql://app:[REDACTED]@db.internal:5432/app (sent Authorization: Bearer [REDACTED])")
    assert got[1]["error"] == "tool 'plain' raised ValueError: row 7 has no column 'total'"  # unchanged
    sent = [m for request in provider.requests for m in request.messages]
    assert len(provider.requests) == 2 and any(m.role == "tool" for m in sent)  # the model read the results
    texts = [str(m.content) for m in record] + [str(m.content) for m in sent]
    assert not any("s3cr3t" in t or "sk-live" in t for t in texts)
    assert any("[REDACTED]" in str(m.content) for m in record if m.role == "tool")
    assert same(loop, record)
