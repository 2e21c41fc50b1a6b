"""agent.chat.stream end to end: a real sidecar process, a real OpenAI-compatible replay server
as the model, host tools answered over the reverse channel, crashes by real signals."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from steerable_agent_runtime import SqliteStorage

from tests.helpers import run
from tests.replay_server import ReplayServer, Reply

from .harness import ROOT, NoAnswer
from .openai_sse import text_chunks, text_reply, tool_reply

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def stream_params(model: ReplayServer, chat: str = "c1", **extra) -> dict:
    return {"chatId": chat, "messages": [{"role": "user", "content": "weather in Lisbon?"}], "tools": WEATHER,
            "provider": {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}, **extra}


def deltas(sc, stream_id: str) -> str:
    return "".join(c.get("delta", "") for c in sc.notifications_of("stream.chunk", stream_id))


def record(db) -> list[dict]:
    store = SqliteStorage(db)
    try:
        return run(store.list_history("c1"))
    finally:
        run(store.close())


def sent_messages(model: ReplayServer, index: int) -> list[dict]:
    return model.requests[index].json()["messages"]


def answer_weather(method: str, params: dict) -> dict:
    assert method == "tool.invoke"
    return {"success": True, "data": {"forecast": f"sunny in {params['arguments']['city']}"}}


def test_two_round_chat_with_a_host_tool_then_resumed_by_a_second_sidecar(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    script = [tool_reply([("call_1", "get_weather", {"city": "Lisbon"})]), text_reply(["It is ", "sunny."]),
              text_reply(["You are ", "welcome."])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db, on_reverse=answer_weather)
        sc.wait_ready()
        sid = sc.call("agent.session.create", {"chatId": "c1"})["sessionId"]
        stream_id = sc.call("agent.chat.stream", stream_params(model, sessionId=sid))["streamId"]
        done = sc.wait_done(stream_id)
        assert done["status"] == "completed", done
        assert deltas(sc, stream_id) == "It is sunny."
        chunks = sc.notifications_of("stream.chunk", stream_id)
        assert [c["toolCall"]["name"] for c in chunks if "toolCall" in c] == ["get_weather"]
        # the deltas (written by the loop's text sink) keep their place among the other chunks
        assert [next(k for k in c if k != "streamId") for c in chunks] == ["toolCall", "toolResult", "delta", "delta"]
        mine = [n["method"] for n in list(sc.notifications) if n["params"].get("streamId") == stream_id]
        assert mine[-1] == "stream.done" and mine.count("stream.done") == 1
        assert [c["toolResult"]["success"] for c in chunks if "toolResult" in c] == [True]
        invoke = sc.reverse_requests[0]["params"]
        assert invoke == {"name": "get_weather", "arguments": {"city": "Lisbon"}, "callId": "call_1", "chatId": "c1"}
        tool_msg = sent_messages(model, 1)[-1]
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1" and "sunny in Lisbon" in tool_msg["content"]
        assert done["usage"]["promptTokens"] > 0 and done["traceId"]
        trace = sc.call("trace.fetch", {"traceId": done["traceId"]})
        assert trace["trace"]["sessionId"] == sid and trace["trace"]["outcome"] == "ok"
        assert sorted(s["name"] for s in trace["spans"]) == ["get_weather", "llm.request", "llm.request"]
        with ReplayServer([Reply.json(200, {})]) as collector:
            exported = sc.call("trace.export", {"traceId": done["traceId"], "endpoint": collector.url})
            sent = collector.requests[0]
        assert exported["outcome"] == "success" and exported["spans"] == 4  # the agent.run root + 3
        assert sent.path == "/v1/traces"
        assert sent.json()["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == done["traceId"]
        with ReplayServer([Reply.json(400, {"message": "bad"})]) as refusing:
            refused = sc.request("trace.export", {"traceId": done["traceId"], "endpoint": refusing.url})["error"]
        assert refused["code"] == -32002 and refused["data"]["hint"]
        sc.call("system.shutdown")
        assert sc.exit_code() == 0

        again = spawn("--storage-path", db)
        again.wait_ready()
        resumed = again.call("agent.chat.stream", {**stream_params(model), "resume": True,
                                                   "messages": [{"role": "user", "content": "thanks"}]})["streamId"]
        assert again.wait_done(resumed)["status"] == "completed"
        assert deltas(again, resumed) == "You are welcome."
        third = sent_messages(model, 2)
        assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "user"]
        assert third[1]["tool_calls"][0]["id"] == "call_1" and third[3]["content"] == "It is sunny."
        again.close_stdin()
        assert again.exit_code() == 0
    roles = [e["message"]["role"] for e in record(db) if e["type"] == "item"]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_cancel_while_a_host_tool_runs_leaves_a_result_for_every_call(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    script = [tool_reply([("call_a", "get_weather", {"city": "Oslo"}), ("call_b", "get_weather", {"city": "Rome"})])]

    def never(method, params):
        raise NoAnswer

    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db, on_reverse=never)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        sc.wait(lambda: sc.reverse_requests, what="tool.invoke")
        assert sc.call("agent.chat.cancel", {"streamId": stream_id}) == {"accepted": True}
        done = sc.wait_done(stream_id)
        assert done["status"] == "cancelled"
        assert sc.call("agent.chat.cancel", {"streamId": stream_id})["accepted"] is False
        sc.call("system.shutdown")
        assert sc.exit_code() == 0
    items = [e["message"] for e in record(db) if e["type"] == "item"]
    calls = [c["id"] for m in items if m.get("toolCalls") for c in m["toolCalls"]]
    results = [m["toolCallId"] for m in items if m["role"] == "tool"]
    assert calls == ["call_a", "call_b"] and sorted(results) == ["call_a", "call_b"]


def test_cancel_mid_text_keeps_the_partial_answer(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    pieces = [f"w{i} " for i in range(200)]
    with ReplayServer([text_reply(pieces, delay_s=0.02)]) as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        sc.wait(lambda: len(sc.notifications_of("stream.chunk", stream_id)) >= 3, what="three chunks")
        assert sc.call("agent.chat.cancel", {"streamId": stream_id})["accepted"] is True
        assert sc.wait_done(stream_id)["status"] == "cancelled"
        partial = deltas(sc, stream_id)
        sc.close_stdin()
        assert sc.exit_code() == 0
    last = record(db)[-1]["message"]
    assert last["role"] == "assistant" and last["content"] == partial
    assert 0 < len(partial) < len("".join(pieces))


def test_steer_enters_the_next_request(spawn, tmp_path):
    steered = threading.Event()

    def slow_tool(method, params):
        assert steered.wait(20)
        return answer_weather(method, params)

    script = [tool_reply([("call_1", "get_weather", {"city": "Lisbon"})]), text_reply(["Porto too."])]
    with ReplayServer(script) as model:
        sc = spawn(on_reverse=slow_tool)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        sc.wait(lambda: sc.reverse_requests, what="tool.invoke")
        assert sc.call("agent.chat.steer", {"streamId": stream_id, "content": "also check Porto"})["accepted"]
        steered.set()
        assert sc.wait_done(stream_id)["status"] == "completed"
        second = sent_messages(model, 1)
        assert {"role": "user", "content": "also check Porto"} in second
        notices = [c["notice"] for c in sc.notifications_of("stream.chunk", stream_id) if "notice" in c]
        assert any(n["kind"] == "steer" for n in notices)
        bad = sc.request("agent.chat.steer", {"streamId": stream_id, "content": 5})["error"]
        assert bad["code"] == -32602 and bad["data"]["field"] == "content"


def test_compact_writes_a_boundary_into_the_record(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    compacted = threading.Event()

    def slow_tool(method, params):
        assert compacted.wait(20)
        return answer_weather(method, params)

    history = []
    for i in range(10):
        history += [{"role": "user", "content": f"question {i} " + "lorem ipsum " * 150},
                    {"role": "assistant", "content": f"answer {i} " + "dolor sit " * 150}]
    history.append({"role": "user", "content": "weather in Lisbon?"})
    script = [tool_reply([("call_1", "get_weather", {"city": "Lisbon"})]), text_reply(["Done."])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db, on_reverse=slow_tool)
        sc.wait_ready()
        params = {**stream_params(model), "messages": history, "maxContextTokens": 200_000}
        stream_id = sc.call("agent.chat.stream", params)["streamId"]
        sc.wait(lambda: sc.reverse_requests, what="tool.invoke")
        assert sc.call("agent.chat.compact", {"streamId": stream_id})["accepted"] is True
        compacted.set()
        assert sc.wait_done(stream_id)["status"] == "completed"
        notices = [c["notice"] for c in sc.notifications_of("stream.chunk", stream_id) if "notice" in c]
        assert any(n["kind"] == "hook_action" and n["action"] == "compact" for n in notices), notices
        entries = sc.call("agent.history.get", {"recordId": "c1"})["entries"]
        boundaries = [e for e in entries if e["type"] == "compaction_boundary"]
        assert len(boundaries) == 1 and boundaries[0]["trigger"] == "manual"
        assert boundaries[0]["postTokens"] < boundaries[0]["preTokens"]
        assert len(sent_messages(model, 1)) < len(history) + 2


def test_two_streams_on_one_chat_are_refused_and_different_chats_run_together(spawn):
    pieces = [f"t{i} " for i in range(30)]
    with ReplayServer([text_reply(pieces, delay_s=0.03)]) as model:
        sc = spawn()
        sc.wait_ready()
        first = sc.call("agent.chat.stream", stream_params(model, chat="a"))["streamId"]
        second = sc.call("agent.chat.stream", stream_params(model, chat="b"))["streamId"]
        refused = sc.request("agent.chat.stream", stream_params(model, chat="a"))["error"]
        assert refused["code"] == -32002 and refused["data"]["streamId"] == first and first in refused["message"]
        sc.wait(lambda: sc.notifications_of("stream.chunk", first) and sc.notifications_of("stream.chunk", second),
                what="both streams streaming")
        assert not sc.notifications_of("stream.done")  # both were running at once
        for stream_id in (first, second):
            assert sc.wait_done(stream_id)["status"] == "completed"
            assert deltas(sc, stream_id) == "".join(pieces)
        again = sc.call("agent.chat.stream", stream_params(model, chat="a"))["streamId"]
        assert sc.wait_done(again)["status"] == "completed"


def test_provider_errors_are_stream_errors_with_the_kind(spawn):
    with ReplayServer([Reply.json(401, {"error": {"message": "bad key"}})]) as model:
        sc = spawn(env={"MY_KEY": "sk-secret-value"})
        sc.wait_ready()
        missing = sc.request("agent.chat.stream", {**stream_params(model), "provider": {
            "kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1", "apiKeyEnv": "NOT_SET_ANYWHERE"}})["error"]
        assert missing["code"] == -32602 and missing["data"]["field"] == "provider.apiKeyEnv"
        stream_id = sc.call("agent.chat.stream", {**stream_params(model), "provider": {
            "kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1", "apiKeyEnv": "MY_KEY"}})["streamId"]
        done = sc.wait_done(stream_id)
        assert done["status"] == "failed"
        err = sc.notifications_of("stream.error", stream_id)[0]
        assert err["code"] == -32005 and err["data"]["kind"] == "auth" and err["data"]["hint"]
        # as the error table says of -32005: the provider and the HTTP status too
        assert err["data"]["provider"] == "openai_compat" and err["data"]["statusCode"] == 401, err
        assert model.requests[0].headers["authorization"] == "Bearer sk-secret-value"
    assert not any(b"sk-secret-value" in line for line in sc.lines)
    assert not any("sk-secret-value" in line for line in sc.stderr_lines)


def test_sigterm_mid_stream_exits_0_releases_the_lease_and_check_is_clean(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    with ReplayServer([text_reply([f"p{i} " for i in range(300)], delay_s=0.02)]) as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        sc.wait(lambda: len(sc.notifications_of("stream.chunk", stream_id)) >= 3, what="three chunks")
        sc.terminate()
        assert sc.exit_code() == 0
        assert sc.notifications_of("stream.done", stream_id)[0]["status"] == "cancelled"
        partial = deltas(sc, stream_id)
    store = SqliteStorage(db)  # the lease was released
    last = run(store.list_history("c1"))[-1]["message"]
    run(store.close())
    assert last["role"] == "assistant" and last["content"] == partial
    check = subprocess.run([sys.executable, "-m", "steerable_agent_runtime.maintenance", "check", db, "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["integrity_ok"] is True and report["findings"] == [] and report["lease_held"] is False


def test_sigkill_mid_tool_then_the_next_sidecar_resumes_with_no_dangling_call(spawn, tmp_path):
    db = str(tmp_path / "s.db")

    def never(method, params):
        raise NoAnswer

    script = [tool_reply([("call_k", "get_weather", {"city": "Kyiv"})]), text_reply(["Recovered."])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db, on_reverse=never)
        sc.wait_ready()
        sc.call("agent.chat.stream", stream_params(model))
        sc.wait(lambda: sc.reverse_requests, what="tool.invoke")
        sc.kill()
        again = spawn("--storage-path", db)
        again.wait_ready()
        resumed = again.call("agent.chat.stream", {**stream_params(model), "resume": True, "messages": []})["streamId"]
        assert again.wait_done(resumed)["status"] == "completed"
        sent = sent_messages(model, 1)
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        assert sent[2]["tool_call_id"] == "call_k" and "interrupted" in sent[2]["content"]
        again.close_stdin()
        assert again.exit_code() == 0
    items = [e["message"] for e in record(db) if e["type"] in ("item",)]
    assert any(m["role"] == "tool" and m["toolCallId"] == "call_k" for m in items)


@pytest.mark.parametrize("approved", [True, False])
def test_a_local_host_tool_asks_for_approval_over_the_reverse_channel(spawn, approved):
    def host(method, params):
        if method == "approval.request":
            assert params == {"name": "get_weather", "mode": "local", "arguments": {"city": "Lisbon"}, "chatId": "c1"}
            return {"approved": approved}
        return answer_weather(method, params)

    tools = [{**WEATHER[0], "mode": "local"}]
    script = [tool_reply([("call_1", "get_weather", {"city": "Lisbon"})]), text_reply(["ok"])]
    with ReplayServer(script) as model:
        sc = spawn(on_reverse=host)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", {**stream_params(model), "tools": tools})["streamId"]
        assert sc.wait_done(stream_id)["status"] == "completed"
        methods = [r["method"] for r in sc.reverse_requests]
        assert methods == (["approval.request", "tool.invoke"] if approved else ["approval.request"])
        assert "mode" not in model.requests[0].json()["tools"][0]


@pytest.mark.parametrize("cache_control", ["1", "0"])
def test_cache_control_wraps_the_provider_unless_switched_off(spawn, cache_control):
    stream_file = ROOT / "tests" / "llm" / "streams" / "anthropic" / "text.sse"
    with ReplayServer([Reply.sse_file(stream_file)]) as model:
        sc = spawn(env={"ANTHROPIC_TEST_KEY": "k-test", "STEERABLE_CACHE_CONTROL": cache_control})
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", {
            "chatId": "c1", "tools": WEATHER,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
            "provider": {"kind": "anthropic", "model": "claude-x", "baseUrl": model.url,
                         "apiKeyEnv": "ANTHROPIC_TEST_KEY"}})["streamId"]
        assert sc.wait_done(stream_id)["status"] == "completed"
        body = model.requests[0].body.decode()
        assert model.requests[0].headers["x-api-key"] == "k-test"
    assert ("cache_control" in body) is (cache_control == "1")


def test_sigterm_while_an_approval_waits_denies_it_and_records_a_result_for_the_call(spawn, tmp_path):
    db = str(tmp_path / "s.db")

    def never(method, params):
        raise NoAnswer

    tools = [{**WEATHER[0], "mode": "destructive"}]
    script = [tool_reply([("call_d", "get_weather", {"city": "Lisbon"})])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db, on_reverse=never)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", {**stream_params(model), "tools": tools})["streamId"]
        sc.wait(lambda: sc.reverse_requests, what="approval.request")
        assert sc.reverse_requests[0]["method"] == "approval.request"
        sc.terminate()
        assert sc.exit_code() == 0
        assert sc.notifications_of("stream.done", stream_id)[0]["status"] == "cancelled"
    items = [e["message"] for e in record(db) if e["type"] == "item"]
    results = [m for m in items if m["role"] == "tool"]
    assert [m["toolCallId"] for m in results] == ["call_d"]
    assert [r["method"] for r in sc.reverse_requests] == ["approval.request"]  # the tool never ran


def test_streams_of_one_sidecar_share_one_http_client_and_its_keep_alive_connection(spawn):
    """Every stream's provider runs on the sidecar's one httpx client: the second stream (another
    chat) reaches the model over the connection the first one opened, not a new client's."""
    with ReplayServer([text_reply(["one"]), text_reply(["two"])]) as model:
        sc = spawn()
        sc.wait_ready()
        for chat in ("c-a", "c-b"):
            stream_id = sc.call("agent.chat.stream", stream_params(model, chat=chat, tools=[]))["streamId"]
            assert sc.wait_done(stream_id)["status"] == "completed"
        assert [deltas(sc, s["streamId"]) for s in sc.notifications_of("stream.done")] == ["one", "two"]
        peers = [r.peer for r in model.requests]
        assert len(peers) == 2 and peers[0] is not None and peers[0] == peers[1], peers


def test_a_steer_during_the_last_answer_is_not_lost_it_gets_its_own_round(spawn, tmp_path):
    """A steer accepted while the model writes its final answer (no tool call follows, so no
    next round of that turn) still enters the transcript as a user message and the model
    answers it in the same stream; stream.done comes once, after that answer."""
    db = str(tmp_path / "s.db")
    script = [text_reply([f"w{i} " for i in range(40)], delay_s=0.03), text_reply(["en français."])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model, tools=[]))["streamId"]
        sc.wait(lambda: len(sc.notifications_of("stream.chunk", stream_id)) >= 3, what="three chunks")
        assert sc.call("agent.chat.steer", {"streamId": stream_id, "content": "in French please"})["accepted"]
        done = sc.wait_done(stream_id)
        assert done["status"] == "completed"
        assert len(model.requests) == 2
        assert sent_messages(model, 1)[-1] == {"role": "user", "content": "in French please"}
        assert deltas(sc, stream_id).endswith("en français.")
        assert any(c.get("notice", {}).get("kind") == "steer" for c in sc.notifications_of("stream.chunk", stream_id))
        assert len(sc.notifications_of("stream.done", stream_id)) == 1
        assert done["usage"]["promptTokens"] == 100  # both requests (50 each)
        sc.close_stdin()
        assert sc.exit_code() == 0
    items = [(e["message"]["role"], e["message"]["content"]) for e in record(db) if e["type"] == "item"]
    assert items[-2:] == [("user", "in French please"), ("assistant", "en français.")]


def test_more_than_a_hundred_streams_at_once_all_reach_the_model(spawn):
    """Streams on different chats run together, however many: the HTTP client they share has no
    cap on connections (httpx's default of 100 made the 101st stream wait for a free one and fail
    with PoolTimeout after 10 s while the others were still answering)."""
    count = 101
    with ReplayServer([Reply(chunks=text_chunks(["slow"]), stall_after=1, stall_s=30)]) as model:
        sc = spawn()
        sc.wait_ready()
        for n in range(count):
            sc.send({"jsonrpc": "2.0", "id": f"s{n}", "method": "agent.chat.stream",
                     "params": stream_params(model, chat=f"c{n}", tools=[])})
        ids = [sc.wait(lambda n=n: sc.responses.get(f"s{n}"))["result"]["streamId"] for n in range(count)]
        sc.wait(lambda: len(model.requests) == count, timeout=9.0, what=f"{count} requests at the model")
        for stream_id in ids:
            sc.send({"jsonrpc": "2.0", "method": "agent.chat.cancel", "params": {"streamId": stream_id}})
        assert {sc.wait_done(stream_id)["status"] for stream_id in ids} == {"cancelled"}


def test_host_tools_failing_max_tool_errors_times_is_its_own_code_not_a_bug(spawn):
    # -32603 means "a bug; the traceback is on stderr". A turn ended by max_tool_errors (the
    # host's tool kept failing) is no bug: it has its own code and names the limit.
    calls = [tool_reply([(f"call_{i}", "get_weather", {"city": f"c{i}"})]) for i in range(3)]
    failing = lambda method, params: {"success": False, "error": "the weather service is down"}  # noqa: E731
    with ReplayServer(calls) as model:
        sc = spawn(on_reverse=failing)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        done = sc.wait_done(stream_id)
        assert done["status"] == "failed" and "max_tool_errors" in done["reason"], done
        [err] = sc.notifications_of("stream.error", stream_id)
        assert err["code"] == -32006 and err["data"]["kind"] == "tool_errors", err
        assert "max_tool_errors" in err["message"] and err["data"]["hint"]
        assert not any("Traceback" in line for line in sc.stderr_lines)


def test_compact_on_a_stream_without_compaction_is_not_accepted(spawn):
    # Without maxContextTokens the stream has no compaction hooks, so a manual compaction can do
    # nothing: {accepted: false} with the reason, not {accepted: true} and then a no-op notice.
    release = threading.Event()

    def slow_tool(method, params):
        assert release.wait(20)
        return answer_weather(method, params)

    script = [tool_reply([("call_1", "get_weather", {"city": "Lisbon"})]), text_reply(["Done."])]
    with ReplayServer(script) as model:
        sc = spawn(on_reverse=slow_tool)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model))["streamId"]
        sc.wait(lambda: sc.reverse_requests, what="tool.invoke")
        answer = sc.call("agent.chat.compact", {"streamId": stream_id})
        release.set()
        assert answer["accepted"] is False and "maxContextTokens" in answer["reason"], answer
        assert sc.wait_done(stream_id)["status"] == "completed"
        notices = [c["notice"] for c in sc.notifications_of("stream.chunk", stream_id) if "notice" in c]
        assert not any(n.get("action", "").startswith("compact") for n in notices), notices


def test_a_compact_accepted_during_the_last_round_compacts_the_chats_next_stream(spawn, tmp_path):
    # agent.chat.compact while the model writes its final answer: the stream has no round left
    # for it, and its loop dies with it. It was accepted, so the chat's next stream takes it at
    # its first round (as a CoreLoop keeps a pending request_compact for its next turn), before
    # its request: one manual boundary, and the compacted transcript is what the model gets.
    db = str(tmp_path / "s.db")
    history = []
    for i in range(10):
        history += [{"role": "user", "content": f"question {i} " + "lorem ipsum " * 150},
                    {"role": "assistant", "content": f"answer {i} " + "dolor sit " * 150}]
    history.append({"role": "user", "content": "one more?"})
    script = [text_reply([f"w{i} " for i in range(40)], delay_s=0.05), text_reply(["Sure."])]
    with ReplayServer(script) as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        params = {**stream_params(model), "messages": history, "maxContextTokens": 200_000}
        first = sc.call("agent.chat.stream", params)["streamId"]
        sc.wait(lambda: deltas(sc, first), what="the final answer streaming")
        assert sc.call("agent.chat.compact", {"streamId": first})["accepted"] is True
        assert sc.wait_done(first)["status"] == "completed"
        second = sc.call("agent.chat.stream", {**params, "resume": True,
                                               "messages": [{"role": "user", "content": "and then?"}]})["streamId"]
        assert sc.wait_done(second)["status"] == "completed"
        notices = [c["notice"] for c in sc.notifications_of("stream.chunk", second) if "notice" in c]
        assert [n["action"] for n in notices if n["kind"] == "hook_action"] == ["compact"], notices
        entries = sc.call("agent.history.get", {"recordId": "c1"})["entries"]
        boundaries = [e for e in entries if e["type"] == "compaction_boundary"]
        assert [b["trigger"] for b in boundaries] == ["manual"]
        assert sent_messages(model, 1) == [{k: v for k, v in m.items() if v is not None}
                                           for m in boundaries[0]["replacement"]]
        # taken once: a third stream is not compacted again
        third = sc.call("agent.chat.stream", {**params, "resume": True,
                                              "messages": [{"role": "user", "content": "thanks"}]})["streamId"]
        assert sc.wait_done(third)["status"] == "completed"
        assert not [c for c in sc.notifications_of("stream.chunk", third) if "notice" in c]
