"""agent.chat.stream over HTTP: create_app on a real uvicorn, httpx reading the SSE stream,
an OpenAI-compatible replay server as the model."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
from steerable_agent_runtime import InMemoryStorage, SqliteStorage
from steerable_agent_runtime.transport import create_app

from tests.replay_server import Reply, ReplayServer

from .harness import ROOT
from .openai_sse import text_chunks, text_reply, tool_reply
from .served import Served, sse_frames
from .test_streams import WEATHER


def params(model: ReplayServer, chat: str = "c1", **extra) -> dict:
    return {"chatId": chat, "messages": [{"role": "user", "content": "go"}],
            "provider": {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}, **extra}


def app_for(model: ReplayServer, storage: Any, **options: Any) -> Any:
    """create_app with the replay model's URL allowed (over HTTP a client may name no other
    model server: test_fastapi_provider_policy.py)."""
    return create_app(storage, provider_base_urls=[model.url + "/v1"], **options)


def history(client: httpx.Client, chat: str) -> list[dict]:
    response = client.post("/agent.history.get", json={"recordId": chat})
    return list(sse_frames(iter(response.text.splitlines())))[0]["data"]["entries"]


def test_a_slow_reader_gets_every_event_in_order():
    pieces = [f"p{i} " for i in range(600)]
    with ReplayServer([text_reply(pieces)]) as model, \
            Served(app_for(model, InMemoryStorage(), queue_size=8)) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:
        with client.stream("POST", "/agent.chat.stream", json=params(model)) as response:
            assert response.status_code == 200
            frames = []
            for frame in sse_frames(response.iter_lines()):
                frames.append(frame)
                if len(frames) % 50 == 0:
                    time.sleep(0.1)  # the producer must wait: 8 queued events at most
        events = [f for f in frames if "event" in f]
        assert events[0]["event"] == "result" and events[-1]["event"] == "stream.done"
        assert events[-1]["data"]["status"] == "completed"
        text = "".join(f["data"].get("delta", "") for f in events if f["event"] == "stream.chunk")
        assert text == "".join(pieces)
        assert history(client, "c1")[-1]["message"]["content"] == "".join(pieces)


def test_keep_alive_comments_while_the_model_is_quiet():
    # one quiet spell of 0.8 s mid-answer (8 keep-alive intervals), not a pause before every chunk
    quiet = Reply(chunks=text_chunks(["a", "b", "c"]), stall_after=2, stall_s=0.8)
    with ReplayServer([quiet]) as model, \
            Served(app_for(model, InMemoryStorage(), keepalive_s=0.1)) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:
        with client.stream("POST", "/agent.chat.stream", json=params(model)) as response:
            frames = list(sse_frames(response.iter_lines()))
    comments = [f for f in frames if "comment" in f]
    assert len(comments) >= 3 and all(c["comment"] == "keep-alive" for c in comments)
    deltas = [i for i, f in enumerate(frames) if f.get("event") == "stream.chunk" and f["data"].get("delta")]
    assert sum("comment" in f for f in frames[deltas[0]:deltas[1]]) >= 3  # sent while the model was quiet
    assert "".join(f["data"].get("delta", "") for f in frames if f.get("event") == "stream.chunk") == "abc"


def test_a_client_disconnect_cancels_its_stream():
    pieces = [f"w{i} " for i in range(400)]
    with ReplayServer([text_reply(pieces, delay_s=0.02), text_reply(["again"])]) as model, \
            Served(app_for(model, InMemoryStorage())) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:
        seen = 0
        with client.stream("POST", "/agent.chat.stream", json=params(model)) as response:
            for frame in sse_frames(response.iter_lines()):
                if frame.get("event") == "stream.chunk":
                    seen += 1
                    if seen == 5:
                        break  # leaving the block closes the connection
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            entries = history(client, "c1")
            if entries and entries[-1]["message"]["role"] == "assistant":
                break
            time.sleep(0.1)
        partial = entries[-1]["message"]["content"]
        assert partial.startswith("w0 w1 w2 w3 w4") and len(partial) < len("".join(pieces))
        # the chat is free again: a new stream on it is accepted and completes
        for _ in range(50):  # the cancelled stream frees the chat right after its last write
            with client.stream("POST", "/agent.chat.stream", json={**params(model), "messages": [], "resume": True}) as response:
                again = list(sse_frames(response.iter_lines()))
            if response.status_code != 409:
                break
            time.sleep(0.1)
        assert again[-1]["event"] == "stream.done" and again[-1]["data"]["status"] == "completed"


def test_host_tools_over_http_through_rpc_reply():
    script = [tool_reply([("call_h", "get_weather", {"city": "Lisbon"})]), text_reply(["Sunny."])]
    with ReplayServer(script) as model, Served(app_for(model, InMemoryStorage())) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:
        invoked = []

        def answer(rid: str) -> None:
            with httpx.Client(base_url=served.url, timeout=20) as other:
                other.post("/rpc.reply", json={"id": rid, "result": {"success": True, "data": {"forecast": "sunny"}}})

        with client.stream("POST", "/agent.chat.stream", json=params(model, tools=WEATHER)) as response:
            frames = []
            for frame in sse_frames(response.iter_lines()):
                frames.append(frame)
                if frame.get("event") == "tool.invoke":
                    invoked.append(frame)
                    threading.Thread(target=answer, args=(frame["id"],)).start()
        assert invoked[0]["data"] == {"name": "get_weather", "arguments": {"city": "Lisbon"}, "callId": "call_h", "chatId": "c1"}
        assert frames[-1]["data"]["status"] == "completed"
        assert "sunny" in model.requests[1].json()["messages"][-1]["content"]


def _maint(*args: str) -> subprocess.CompletedProcess:
    """The real ``steerable-maint`` CLI in a child process (read-only commands)."""
    return _maint_together(args)[0]


def _maint_together(*commands: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
    """Several read-only ``steerable-maint`` commands, each in its own child process, run at once."""
    procs = [subprocess.Popen([sys.executable, "-m", "steerable_maint", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for args in commands]
    done = []
    for args, proc in zip(commands, procs):
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_a_chat_over_http_on_a_sqlite_file_is_a_clean_record_for_steerable_maint(tmp_path):
    """create_app over the durable SqliteStorage: a two-round chat with a host tool over SSE,
    then the store (still leased by the running server) passes ``steerable-maint check`` and
    ``history`` shows exactly the turn the stream relayed."""
    db = tmp_path / "http.db"
    script = [tool_reply([("call_s", "get_weather", {"city": "Porto"})]), text_reply(["Rain ", "in ", "Porto."])]
    with ReplayServer(script) as model, Served(app_for(model, SqliteStorage(str(db)))) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:

        def answer(rid: str) -> None:
            with httpx.Client(base_url=served.url, timeout=20) as other:
                other.post("/rpc.reply", json={"id": rid, "result": {"success": True, "data": {"forecast": "rain"}}})

        with client.stream("POST", "/agent.chat.stream", json=params(model, chat="c-sql", tools=WEATHER)) as response:
            assert response.status_code == 200
            frames = []
            for frame in sse_frames(response.iter_lines()):
                frames.append(frame)
                if frame.get("event") == "tool.invoke":
                    threading.Thread(target=answer, args=(frame["id"],)).start()
        assert frames[-1]["event"] == "stream.done" and frames[-1]["data"]["status"] == "completed", frames[-1]
        text = "".join(f["data"].get("delta", "") for f in frames if f.get("event") == "stream.chunk")
        assert text == "Rain in Porto."
        # while the server holds the store (both read-only: they run side by side)
        check, shown = _maint_together(("check", str(db), "--json"), ("history", str(db), "c-sql", "--json"))
        assert check.returncode == 0, check.stdout + check.stderr
        report = json.loads(check.stdout)
        assert report["integrity_ok"] is True and report["lease_held"] is True
        assert [f["code"] for f in report["findings"]] == ["lease-held"]  # info only: nothing wrong
        assert shown.returncode == 0, shown.stdout + shown.stderr
        over_http = history(client, "c-sql")
    entries = json.loads(shown.stdout)["entries"]
    assert all(e["readable"] for e in entries)
    messages = [e["entry"]["message"] for e in entries if e["type"] == "item"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["toolCalls"] == [{"id": "call_s", "name": "get_weather", "arguments": {"city": "Porto"}}]
    assert messages[2]["toolCallId"] == "call_s"
    assert "rain" in messages[2]["content"] and messages[-1]["content"] == "Rain in Porto."
    assert len(entries) == len(over_http)
    after = _maint("check", str(db), "--json")  # the server stopped: the lease is released, still clean
    assert after.returncode == 0, after.stdout + after.stderr
    assert json.loads(after.stdout)["lease_held"] is False and json.loads(after.stdout)["findings"] == []


def test_a_server_shutdown_that_cuts_streams_keeps_their_partial_turns(tmp_path):
    """uvicorn's graceful-shutdown timeout cancels the open responses; the app's shutdown
    then lets their streams write their partial turn before it closes the store."""
    import uvicorn

    db = tmp_path / "cut.db"
    pieces = [f"w{i} " for i in range(400)]
    with ReplayServer([text_reply(pieces, delay_s=0.02)]) as model:
        config = uvicorn.Config(app_for(model, SqliteStorage(str(db))), host="127.0.0.1", port=0, log_level="critical",
                                lifespan="on", timeout_graceful_shutdown=0.5)
        served = Served.__new__(Served)
        served.server = uvicorn.Server(config)
        served.thread = threading.Thread(target=served.server.run, daemon=True)
        seen: list[str] = []

        def read() -> None:
            try:
                with httpx.Client(base_url=served.url, timeout=30) as client, \
                        client.stream("POST", "/agent.chat.stream", json=params(model)) as response:
                    for frame in sse_frames(response.iter_lines()):
                        seen.append(frame["data"].get("delta", "") if frame.get("event") == "stream.chunk" else "")
            except httpx.HTTPError:
                pass  # the server cut the response

        with served:
            reader = threading.Thread(target=read)
            reader.start()
            deadline = time.monotonic() + 20
            while len(seen) < 20 and time.monotonic() < deadline:
                time.sleep(0.02)
        reader.join(20)
    from tests.helpers import run

    store = SqliteStorage(str(db))
    entries = run(store.list_history("c1"))
    run(store.close())
    assert [e["message"]["role"] for e in entries] == ["user", "assistant"], entries
    assert entries[1]["message"]["content"].startswith("".join(seen[:20]))


def test_a_client_that_stops_reading_and_leaves_cancels_its_stream():
    """The model outpaces the client, so the producer waits for room in the bounded queue;
    then the client disconnects. The stream is cancelled (the record keeps a partial turn, not
    the whole answer drained into the void) and the chat is free again soon after."""
    import socket

    pieces = [f"{i:05d}" + "x" * 2000 for i in range(6000)]  # ~12 MB: far more than every buffer on the way
    with ReplayServer([text_reply(pieces), text_reply(["again"])]) as model, \
            Served(app_for(model, InMemoryStorage(), queue_size=8)) as served, \
            httpx.Client(base_url=served.url, timeout=60) as client:
        host, port = served.url.removeprefix("http://").split(":")
        body = json.dumps(params(model)).encode()
        with socket.socket() as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: no autotuning
            raw.connect((host, int(port)))
            raw.sendall(b"POST /agent.chat.stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert raw.recv(4096).startswith(b"HTTP/1.1 200")
            time.sleep(1.0)  # not reading: the socket buffers and the queue fill, the producer waits
        deadline = time.monotonic() + 10
        while True:
            with client.stream("POST", "/agent.chat.stream", json={**params(model), "messages": [], "resume": True}) as response:
                again = list(sse_frames(response.iter_lines()))
            if response.status_code != 409:
                break
            assert time.monotonic() < deadline, "the chat stayed busy after its client left"
            time.sleep(0.1)
        assert again[-1]["event"] == "stream.done" and again[-1]["data"]["status"] == "completed"
        messages = [e["message"] for e in history(client, "c1")]
        assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
        partial, whole = len(messages[1]["content"]), len("".join(pieces))
        assert 0 < partial < whole // 2, (partial, whole)  # cancelled, not drained to the end
