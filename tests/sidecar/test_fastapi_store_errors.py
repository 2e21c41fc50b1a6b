"""A store error over HTTP names no server path: create_app on a real uvicorn over a real
SqliteStorage file (in a directory with a recognisable name) whose history and traces tables
are damaged. Every way the error reaches the client (an error response, a stream's
stream.error and stream.done) keeps its code and loses the path; the server log keeps the
full message; the stdio sidecar still sends it whole."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import httpx
from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.transport import create_app

from tests.damage import page_size_of
from tests.helpers import item, run, span, trace
from tests.replay_server import ReplayServer

from .openai_sse import text_reply
from .served import Served, sse_frames

SECRET = "private-volume-7f3a9c"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def damaged_store(tmp_path: Path) -> Path:
    """A store at ``tmp_path/SECRET/sessions.db`` holding chat c1's record and one trace, whose
    history and traces tables' root pages are overwritten (SQLite: "malformed")."""
    directory = tmp_path / SECRET
    directory.mkdir()
    db = directory / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_history("c1", [item(f"m{i} " + "x" * 3000) for i in range(20)]))
    run(store.upsert_trace(trace(TRACE_ID)))
    run(store.add_span(TRACE_ID, span("sp1")))
    run(store.close())
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        roots = [r for (r,) in conn.execute("SELECT rootpage FROM sqlite_master WHERE name IN ('history', 'traces')")]
    finally:
        conn.close()
    size = page_size_of(db)
    with open(db, "r+b") as fh:
        for root in roots:
            fh.seek((root - 1) * size)
            fh.write(b"\xff" * size)
    return db


def provider(model: ReplayServer) -> dict:
    return {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}


def assert_no_server_path(body: bytes, tmp_path: Path) -> None:
    assert SECRET.encode() not in body and str(tmp_path).encode() not in body, body
    assert b"sessions.db" not in body, body


def test_a_damaged_store_over_http_answers_32002_without_its_path_and_the_log_keeps_it(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    db = damaged_store(tmp_path)
    storage = SqliteStorage(db)
    with ReplayServer([text_reply(["hi"])]) as model, \
            Served(create_app(storage, provider_base_urls=[model.url + "/v1"])) as served, \
            httpx.Client(base_url=served.url, timeout=30) as client:
        for method, params in [("agent.history.get", {"recordId": "c1"}), ("trace.fetch", {"traceId": TRACE_ID}),
                               ("agent.chat.stream", {"chatId": "c1", "resume": True, "messages": [],
                                                      "provider": provider(model)})]:
            response = client.post(f"/{method}", json=params)
            assert_no_server_path(response.content, tmp_path)
            [frame] = list(sse_frames(iter(response.text.splitlines())))
            error = frame["data"]
            assert response.status_code == 409 and frame["event"] == "error" and error["code"] == -32002, error
            assert error["message"].startswith("the store: SQLite reports damage"), error
            assert "path" not in error["data"] and "steerable-maint salvage" in error["data"]["hint"], error
            assert error["data"]["error"] == "DatabaseDamagedError"

        # a stream the damage fails once it runs: its stream.error and stream.done
        body = client.post("/agent.chat.stream", json={"chatId": "c2", "messages": [{"role": "user", "content": "go"}],
                                                       "provider": provider(model)})
        assert_no_server_path(body.content, tmp_path)
        frames = [f for f in sse_frames(iter(body.text.splitlines())) if "event" in f]
        assert [f["event"] for f in frames] == ["result", "stream.error", "stream.done"], frames
        failed, done = frames[1]["data"], frames[2]["data"]
        assert failed["code"] == -32002 and failed["message"].startswith("the store: ") and "path" not in failed["data"]
        assert done["status"] == "failed" and done["reason"] == failed["message"], done
    logged = [r.getMessage() for r in caplog.records if r.name == "steerable.server"]
    assert any(f"{db}: SQLite reports damage" in line for line in logged), logged


def test_the_stdio_sidecar_still_names_the_store_its_host_owns(spawn, tmp_path):
    db = damaged_store(tmp_path)
    sc = spawn("--storage-path", str(db))
    sc.wait_ready()
    error = sc.request("agent.history.get", {"recordId": "c1"})["error"]
    assert error["code"] == -32002 and error["message"].startswith(f"{db}: SQLite reports damage"), error
    assert error["data"]["path"] == str(db)
    sc.close_stdin()
    assert sc.exit_code() == 0


def test_an_unreachable_database_over_http_names_neither_its_url_nor_its_address(caplog):
    """SqlAlchemyStorage on a PostgreSQL URL nobody listens at (127.0.0.1, port 1): the
    driver's text names the address it tried; over HTTP that becomes <address> (the server
    log keeps it)."""
    from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

    caplog.set_level(logging.WARNING)
    storage = SqlAlchemyStorage("postgresql://app:pw@127.0.0.1:1/app")
    with Served(create_app(storage)) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        response = client.post("/agent.history.get", json={"recordId": "c1"})
    [frame] = list(sse_frames(iter(response.text.splitlines())))
    error = frame["data"]
    assert error["code"] == -32002 and error["data"]["error"] == "StoreConnectionError", error
    assert error["message"].startswith("the store: cannot reach the database"), error
    assert "<address>" in error["message"] and b"127.0.0.1" not in response.content, error
    assert "127.0.0.1" in caplog.text  # the operator's log has it
