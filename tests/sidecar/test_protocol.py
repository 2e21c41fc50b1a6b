"""The sidecar's JSON-RPC framing, sessions and life cycle, over a real child process's pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .harness import ROOT, RpcFailed


def test_ready_line_then_lifecycle_ready_then_ping(spawn, tmp_path):
    sc = spawn("--storage-path", str(tmp_path / "s.db"))
    info = sc.wait_ready()
    assert info["storage"] == "sqlite" and info["pid"] == sc.proc.pid
    assert sc.notifications[0]["method"] == "lifecycle.ready"
    assert sc.notifications[0]["params"]["pid"] == sc.proc.pid
    pong = sc.call("system.ping")
    assert pong["pong"] is True and pong["version"]


def test_in_memory_by_default(shared):
    assert shared.wait_ready()["storage"] == "memory"


def test_session_create_get_list_update_end(spawn, tmp_path):
    sc = spawn("--storage-path", str(tmp_path / "s.db"))
    sc.wait_ready()
    made = sc.call("agent.session.create", {"chatId": "c1", "userId": "u1", "scenario": "trip"})
    sid = made["sessionId"]
    assert made["isActive"] is True and made["currentStage"] == "START"
    other = sc.call("agent.session.create", {"chatId": "c2", "userId": "u2", "sessionId": "fixed"})
    assert other["sessionId"] == "fixed"
    assert sc.call("agent.session.get", {"sessionId": sid}) == made
    assert [s["sessionId"] for s in sc.call("agent.session.list", {"userId": "u1"})["sessions"]] == [sid]
    assert len(sc.call("agent.session.list")["sessions"]) == 2
    updated = sc.call("agent.session.update", {"sessionId": sid, "currentStage": "PLANNING",
                                               "nextStage": "BOOKING", "stageData": {"k": [1, 2]}})
    assert (updated["currentStage"], updated["nextStage"], updated["stageData"]) == ("PLANNING", "BOOKING", {"k": [1, 2]})
    assert updated["scenario"] == "trip"
    ended = sc.call("agent.session.end", {"sessionId": sid})
    assert ended["isActive"] is False
    assert [s["sessionId"] for s in sc.call("agent.session.list", {"activeOnly": True})["sessions"]] == ["fixed"]
    with pytest.raises(RpcFailed) as missing:
        sc.call("agent.session.get", {"sessionId": "nope"})
    assert missing.value.code == -32001 and missing.value.error["data"]["hint"]


def test_sessions_are_visible_to_steerable_maint_while_the_sidecar_runs(spawn, tmp_path):
    db = tmp_path / "s.db"
    sc = spawn("--storage-path", str(db))
    sc.wait_ready()
    sc.call("agent.session.create", {"chatId": "c-visible"})
    sc.call("agent.session.create", {"chatId": "c-visible-2"})
    out = subprocess.run([sys.executable, "-m", "steerable_agent_runtime.maintenance", "inspect", str(db), "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["rows"]["sessions"] == 2
    assert report["lease_held"] is True and report["lease_holder_pid"] == sc.proc.pid


def _error(sc, raw: bytes) -> dict:
    sc.responses.pop(None, None)
    sc.send_raw(raw)
    return sc.wait(lambda: sc.responses.get(None), what=f"the error for {raw[:40]!r}")["error"]


def test_bad_frames_each_get_their_error_and_the_sidecar_keeps_serving(shared):
    sc = shared
    assert _error(sc, b"this is not json\n")["code"] == -32700
    assert _error(sc, b'{"jsonrpc":"2.0","id":1,"method":"system.ping"\xff\xfe}\n')["code"] == -32700
    assert _error(sc, b'[{"jsonrpc":"2.0","id":1,"method":"system.ping"}]\n')["code"] == -32600
    assert _error(sc, b'"just a string"\n')["code"] == -32600
    missing = sc.request("", None, rid=41)  # an empty method
    assert missing["error"]["code"] == -32600
    sc.send({"jsonrpc": "2.0", "id": 42})
    assert sc.wait(lambda: sc.responses.get(42))["error"]["code"] == -32600
    assert _error(sc, b'{"jsonrpc":"2.0","id":null,"method":"system.ping"}\n')["code"] == -32600
    assert _error(sc, b'{"jsonrpc":"1.0","id":null,"method":"system.ping"}\n')["code"] == -32600
    unknown = sc.request("agent.nope", {}, rid=43)["error"]
    assert unknown["code"] == -32601 and "agent.session.create" in unknown["data"]["hint"]
    wrong = sc.request("agent.session.create", {"chatId": 7}, rid=44)["error"]
    assert wrong["code"] == -32602 and wrong["data"]["field"] == "chatId" and "chatId" in wrong["message"]
    extra = sc.request("agent.session.list", {"userID": "u"}, rid=45)["error"]
    assert extra["code"] == -32602 and extra["data"]["field"] == "userID"
    positional = sc.request("agent.session.get", ["s1"], rid=46)["error"]
    assert positional["code"] == -32602
    nested = sc.request("agent.chat.stream", {"chatId": "c", "provider": {"kind": "nope", "model": "m"}}, rid=47)["error"]
    assert nested["code"] == -32602 and nested["data"]["field"] == "provider.kind"
    for err in (unknown, wrong, extra, positional, nested):
        assert err["data"]["hint"]
    # a response to a request the sidecar never sent: ignored (no answer), logged on stderr
    count = len(sc.lines)
    sc.send({"jsonrpc": "2.0", "id": "sc-999", "result": {"approved": True}})
    sc.send({"jsonrpc": "2.0", "id": 77, "error": {"code": 1, "message": "x"}})
    assert sc.call("system.ping", rid=48)["pong"] is True
    assert len(sc.lines) == count + 1  # only the ping's answer
    sc.wait(lambda: any("sc-999" in l for l in sc.stderr_lines), what="the stderr log of the stray response")
    # a notification for an unknown method gets nothing back
    sc.send({"jsonrpc": "2.0", "method": "agent.nope"})
    assert sc.call("system.ping", rid=49)["pong"] is True
    assert len(sc.lines) == count + 2


def test_a_10_mib_frame_round_trips(spawn, tmp_path):
    sc = spawn("--storage-path", str(tmp_path / "s.db"))
    sc.wait_ready()
    blob = "x" * (10 * 1024 * 1024)
    made = sc.call("agent.session.create", {"chatId": "big", "stageData": {"blob": blob}}, timeout=60)
    again = sc.call("agent.session.get", {"sessionId": made["sessionId"]}, timeout=60)
    assert again["stageData"]["blob"] == blob
    assert max(len(l) for l in sc.lines) > 10 * 1024 * 1024


def test_a_frame_over_16_mib_is_refused_and_the_sidecar_keeps_serving(shared):
    sc = shared
    big = b'{"jsonrpc":"2.0","id":1,"method":"system.ping","params":{"x":"' + b"y" * (16 * 1024 * 1024) + b'"}}\n'
    err = _error(sc, big)
    assert err["code"] == -32600 and "exceeds" in err["message"]
    assert sc.call("system.ping", rid=2)["pong"] is True


def test_second_sidecar_on_the_same_path_exits_3_with_the_lease_message(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    first = spawn("--storage-path", db)
    first.wait_ready()
    second = spawn("--storage-path", db)
    assert second.exit_code() == 3
    err = "\n".join(second.stderr_lines)
    assert "is held by" in err and str(first.proc.pid) in err
    assert second.lines == []
    assert first.call("system.ping")["pong"] is True


@pytest.mark.parametrize("how", ["shutdown", "eof", "sigterm"])
def test_every_shutdown_closes_the_store_and_exits_0(spawn, tmp_path, how):
    db = str(tmp_path / "s.db")
    sc = spawn("--storage-path", db)
    sc.wait_ready()
    sid = sc.call("agent.session.create", {"chatId": "c1"})["sessionId"]
    if how == "shutdown":
        assert sc.call("system.shutdown")["shuttingDown"] is True
    elif how == "eof":
        sc.close_stdin()
    else:
        sc.terminate()
    assert sc.exit_code() == 0
    after = spawn("--storage-path", db)  # the lease was released
    after.wait_ready()
    assert after.call("agent.session.get", {"sessionId": sid})["chatId"] == "c1"


def test_stdout_carries_only_protocol_even_when_something_prints(tmp_path):
    # A stray print inside the sidecar process goes to stderr: fd 1 is private to the protocol.
    code = ("import sys; from steerable_agent_runtime.sidecar.__main__ import main, take_stdout;"
            "import steerable_agent_runtime.sidecar.__main__ as m;"
            "orig = m.take_stdout\n"
            "def patched():\n    fd = orig(); print('stray print'); import os; os.write(1, b'raw write\\n'); return fd\n"
            "m.take_stdout = patched; sys.exit(main([]))")
    proc = subprocess.run([sys.executable, "-c", code], input=b'{"jsonrpc":"2.0","id":1,"method":"system.ping"}\n',
                          capture_output=True, cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [json.loads(l).get("method", "response") for l in lines] == ["lifecycle.ready", "response"]
    assert b"stray print" in proc.stderr and b"raw write" in proc.stderr


def _plant_newer_entry(db) -> None:

    from steerable_agent_runtime import SqliteStorage

    from tests.helpers import item, plant_history_row, run

    store = SqliteStorage(db)
    run(store.append_history("c1", [item("hello"), item("hi", role="assistant")]))
    # c2: a tool result that answers no call (a buggy host or a foreign build wrote it)
    run(store.append_history("c2", [item("hello"), {"type": "item", "message": {
        "role": "tool", "toolCallId": "ghost", "name": "t", "content": "{}"}}]))
    run(store.close())
    raw = ('{"v":3,"type":"item","seq":3,"at":"2026-01-01T00:00:00.000000Z",'
           '"message":{"role":"user","content":"x"},"parts":[]}')
    plant_history_row(db, "c1", 3, 3, raw)


def _history_rows(db) -> list:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT record_id, seq, v, type, at, data, crc FROM history ORDER BY record_id, seq").fetchall()
    finally:
        conn.close()


def test_a_record_from_a_newer_build_or_with_an_orphan_tool_result_is_32003_with_the_remedy_and_unchanged(spawn, tmp_path):
    db = tmp_path / "s.db"
    _plant_newer_entry(db)
    before = _history_rows(db)
    sc = spawn("--storage-path", str(db))
    sc.wait_ready()
    for method, params in [
        ("agent.chat.stream", {"chatId": "c1", "resume": True, "messages": [],
                               "provider": {"kind": "openai_compat", "model": "m", "baseUrl": "http://127.0.0.1:9"}}),
        ("agent.history.get", {"recordId": "c1"}),
    ]:
        err = sc.request(method, params)["error"]
        assert err["code"] == -32003, err
        assert "upgrade the app" in err["data"]["hint"] and "not modified" in err["data"]["hint"]
        assert err["data"]["version"] == 3 and err["data"]["seq"] == 3
    err = sc.request("agent.chat.stream", {"chatId": "c2", "resume": True, "messages": [], "provider": {
        "kind": "openai_compat", "model": "m", "baseUrl": "http://127.0.0.1:9"}})["error"]
    assert err["code"] == -32003 and err["data"]["seq"] == 2 and "'ghost'" in err["message"], err
    assert "run(messages, chat_id=" in err["data"]["hint"] and "not modified" in err["data"]["hint"]
    assert sc.call("system.ping")["pong"] is True
    assert sc.notifications_of("stream.chunk") == [] and sc.notifications_of("stream.done") == []
    sc.close_stdin()
    assert sc.exit_code() == 0
    assert _history_rows(db) == before


def test_history_get_pages_through_the_record(spawn, tmp_path):
    from steerable_agent_runtime import SqliteStorage

    from tests.helpers import item, run

    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    run(store.append_history("c9", [item(f"m{i}") for i in range(5)]))
    run(store.close())
    sc = spawn("--storage-path", str(db))
    sc.wait_ready()
    page = sc.call("agent.history.get", {"recordId": "c9", "limit": 3})
    assert [e["seq"] for e in page["entries"]] == [1, 2, 3] and page["more"] is True
    rest = sc.call("agent.history.get", {"recordId": "c9", "afterSeq": page["lastSeq"]})
    assert [e["message"]["content"] for e in rest["entries"]] == ["m3", "m4"] and rest["more"] is False
    missing = sc.request("trace.fetch", {"traceId": "0" * 31 + "1"})["error"]
    assert missing["code"] == -32001 and missing["data"]["hint"]


def test_params_sqlite_cannot_take_or_the_session_cannot_hold_are_32602_naming_the_wire_field(spawn, tmp_path):
    """An afterSeq past SQLite's 64-bit integers, and a null currentStage (every session has
    one), are the host's mistakes: -32602 naming the camelCase field, not -32603 'a bug'."""
    sc = spawn("--storage-path", str(tmp_path / "s.db"))
    sc.wait_ready()
    for after in (2**63, 10**30):
        err = sc.request("agent.history.get", {"recordId": "r", "afterSeq": after})["error"]
        assert err["code"] == -32602 and err["data"]["field"] == "afterSeq" and err["data"]["hint"], err
    assert sc.call("agent.history.get", {"recordId": "r", "afterSeq": 2**63 - 1})["entries"] == []
    sid = sc.call("agent.session.create", {"chatId": "c1"})["sessionId"]
    err = sc.request("agent.session.update", {"sessionId": sid, "currentStage": None})["error"]
    assert err["code"] == -32602 and err["data"]["field"] == "currentStage" and err["data"]["hint"], err
    assert sc.call("agent.session.get", {"sessionId": sid})["currentStage"] == "START"
    assert not any("Traceback" in line for line in sc.stderr_lines)


def test_sigterm_while_trace_export_waits_on_a_silent_collector_answers_it_and_exits_in_the_grace(spawn, tmp_path):
    """In-flight requests get the shutdown's grace (10 s), then their answer: an export to a
    collector that never answers is answered -32002 (shutting down) and the sidecar exits 0,
    not after the exporter's own 30 s deadline (its thread is not waited for at exit)."""
    import socket
    import time

    from tests.replay_server import ReplayServer

    from .openai_sse import text_reply

    silent = socket.socket()  # accepts connections (the backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with ReplayServer([text_reply(["hi"])]) as model:
            sc = spawn("--storage-path", str(tmp_path / "s.db"))
            sc.wait_ready()
            stream_id = sc.call("agent.chat.stream", {"chatId": "c1", "messages": [{"role": "user", "content": "x"}],
                                                      "provider": {"kind": "openai_compat", "model": "m",
                                                                   "baseUrl": model.url + "/v1"}})["streamId"]
            trace_id = sc.wait_done(stream_id)["traceId"]
            threads = _threads(sc.proc.pid)
            for n in range(12):  # a burst: the exports run a few at a time, not on a thread each
                sc.send({"jsonrpc": "2.0", "id": f"export-{n}", "method": "trace.export",
                         "params": {"traceId": trace_id, "endpoint": f"http://127.0.0.1:{silent.getsockname()[1]}"}})
            time.sleep(1.0)
            assert _threads(sc.proc.pid) <= threads + 4
            started = time.monotonic()
            sc.terminate()
            assert sc.exit_code() == 0
            assert time.monotonic() - started < 20
            for n in range(12):
                answer = sc.wait(lambda n=n: sc.responses.get(f"export-{n}"), timeout=1)
                assert answer["error"]["code"] == -32002 and answer["error"]["data"]["hint"], answer
    finally:
        silent.close()


def test_a_record_holding_a_lone_surrogate_another_program_wrote_is_32002_on_resume_and_unchanged(spawn, tmp_path):
    """A row whose JSON holds a lone surrogate escape (its checksum fine: another SQLite client
    wrote it; steerable-maint check calls it row-json-invalid) cannot be sent to any model: a
    resume is refused on the request, naming the row, with the remedy, and writes nothing
    (it used to start the stream, which failed -32603 'see the logs' with nothing logged)."""

    from steerable_agent_runtime import SqliteStorage

    from tests.helpers import item, plant_history_row, run

    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    run(store.append_history("c1", [item("hello")]))
    run(store.close())
    raw = ('{"v":2,"type":"item","seq":2,"at":"2026-01-01T00:00:00.000000Z",'
           '"message":{"role":"assistant","content":"half \\ud83d of it"}}')
    plant_history_row(db, "c1", 2, 2, raw)
    before = _history_rows(db)
    sc = spawn("--storage-path", str(db))
    sc.wait_ready()
    err = sc.request("agent.chat.stream", {"chatId": "c1", "resume": True, "messages": [], "provider": {
        "kind": "openai_compat", "model": "m", "baseUrl": "http://127.0.0.1:9/v1"}})["error"]
    assert err["code"] == -32002 and err["data"]["seq"] == 2 and err["data"]["recordId"] == "c1", err
    assert "steerable-maint" in err["data"]["hint"]
    assert sc.notifications_of("stream.done") == [] and sc.call("agent.session.list")["sessions"] == []
    sc.close_stdin()
    assert sc.exit_code() == 0
    assert _history_rows(db) == before


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
