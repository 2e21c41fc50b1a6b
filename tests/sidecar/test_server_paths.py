"""server_paths.PathScrubber, rule by rule: what of an error's text an HTTP client may see.
(The HTTP routes themselves: test_fastapi_store_errors.py.)"""

from __future__ import annotations

import logging

import pytest
from steerable_agent_runtime.transport.base import SSEEvent
from steerable_agent_runtime.transport.server_paths import PathScrubber, scrub_text, store_locations

STORE = "/srv/app-7f3a/sessions.db"


@pytest.mark.parametrize(("text", "expected"), [
    (f"{STORE}: SQLite reports damage: database disk image is malformed",
     "the store: SQLite reports damage: database disk image is malformed"),
    (f"{STORE}: directory /srv/app-7f3a does not exist", "the store: directory the store's directory does not exist"),
    (f"{STORE}: cannot read {STORE}-wal", "the store: cannot read the store-wal"),
    ("/srv/app-7f3a/backup/sessions.db.orig is missing", "the store's directory/backup/sessions.db.orig is missing"),
    ("internal error in trace.fetch: FileNotFoundError: [Errno 2] No such file or directory: '/opt/run/cache.json'",
     "internal error in trace.fetch: FileNotFoundError: [Errno 2] No such file or directory: '<path>'"),
    ("cannot open ~/.steerable/AGENTS.md or C:\\Users\\ann\\data.db", "cannot open <path> or <path>"),
    ("SQLite cannot open file:/var/lib/x.db?mode=ro", "SQLite cannot open <path>"),
    ("the collector at 'http://127.0.0.1:4318/v1/traces' answered 400", None),
    ("postgresql+asyncpg://app@db.internal:5432/app: cannot reach the database",
     "postgresql+asyncpg://app@db.internal:5432/app: cannot reach the database"),
    ("see docs/sidecar.md; OTLP/HTTP read/write 1/2", None),
])
def test_scrub_text(text, expected):
    assert scrub_text(text, [STORE]) == (text if expected is None else expected)


def test_a_relative_store_name_and_a_database_url_are_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    class Sqlite:
        path = "data.db"

    class Postgres:
        where = "postgresql+asyncpg://app@db.internal:5432/app"
        backend = "postgresql"

    locations = store_locations(Sqlite())
    assert locations[0] == "data.db" and str(tmp_path / "data.db") in locations
    assert scrub_text("data.db: storage is closed (not metadata.db)", locations) == "the store: storage is closed (not metadata.db)"
    assert scrub_text(f"{tmp_path}/data.db: no such file", locations) == "the store: no such file"
    assert scrub_text(f"{Postgres.where}: cannot reach the database", store_locations(Postgres())) == \
        "the store: cannot reach the database"
    assert store_locations(object()) == []
    assert scrub_text("/srv/my data/s.db: SQLite reports damage", ["/srv/my data/s.db"]) == "the store: SQLite reports damage"


def test_an_error_keeps_its_code_and_fields_loses_data_path_and_is_logged_whole(caplog):
    caplog.set_level(logging.WARNING, logger="steerable.server")
    scrubber = PathScrubber([])
    wire = {"code": -32002, "message": "/data/x7/s.db: SQLite reports damage",
            "data": {"error": "DatabaseDamagedError", "path": "/data/x7/s.db", "recordId": "c1", "seq": 3,
                     "hint": "run `steerable-maint check /data/x7/s.db`"}}
    out = scrubber.error(wire, "agent.history.get")
    assert out == {"code": -32002, "message": "the store: SQLite reports damage",
                   "data": {"error": "DatabaseDamagedError", "recordId": "c1", "seq": 3,
                            "hint": "run `steerable-maint check the store`"}}
    assert any("/data/x7/s.db: SQLite reports damage" in r.getMessage() for r in caplog.records)
    clean = {"code": -32001, "message": "session 'a' not found", "data": {"sessionId": "a", "hint": "create it"}}
    caplog.clear()
    assert scrubber.error(clean, "agent.session.get") == clean and caplog.records == []


def test_stream_events_only_errors_and_the_done_reason_are_scrubbed():
    scrubber = PathScrubber(["/data/x7/s.db"])
    chunk = SSEEvent("stream.chunk", {"streamId": "st-1", "delta": "see /etc/hosts"})
    assert scrubber.event(chunk, "agent.chat.stream") is chunk  # the model's text is not an error
    failed = scrubber.event(SSEEvent("stream.error", {"streamId": "st-1", "code": -32002, "message": "/data/x7/s.db: gone",
                                                      "data": {"path": "/data/x7/s.db", "hint": "h"}}), "agent.chat.stream")
    assert failed.data == {"streamId": "st-1", "code": -32002, "message": "the store: gone", "data": {"hint": "h"}}
    done = scrubber.event(SSEEvent("stream.done", {"streamId": "st-1", "status": "failed", "reason": "/data/x7/s.db: gone"}),
                          "agent.chat.stream")
    assert done.data["reason"] == "the store: gone" and done.data["status"] == "failed"


@pytest.mark.parametrize(("text", "expected"), [
    ("the store: [Errno 111] Connect call failed ('10.0.0.5', 5432)",
     "the store: [Errno 111] Connect call failed ('<address>', 5432)"),
    ("Multiple exceptions: [Errno 111] Connect call failed ('::1', 5432, 0, 0), [Errno 111] Connect call failed"
     " ('127.0.0.1', 5432)",
     "Multiple exceptions: [Errno 111] Connect call failed ('<address>', 5432, 0, 0), [Errno 111] Connect call"
     " failed ('<address>', 5432)"),
    ('connection to server at "fd00:0:0:0:0:0:0:5", port 5432 failed', 'connection to server at "<address>", port 5432 failed'),
    ("host=192.168.1.20 refused; retry later", "host=<address> refused; retry later"),
    ("peer [fe80::1%eth0] reset the connection", "peer [<address>] reset the connection"),
    # addresses inside a URL stay with the URL; things that only look like addresses stay
    ("the collector at 'http://127.0.0.1:4318/v1/traces' answered 400", None),
    ("cannot reach http://[::1]:8080/v1 or https://user@[fd00::2]/x", None),
    ("started at '11:10:13', version 3.40.1, build 1.2.3.4.5, ratio 0.5", None),
    ("SQLite 3.40.1 reports 10.0.0 pages", None),
])
def test_network_addresses_outside_urls_are_scrubbed(text, expected):
    assert scrub_text(text, [STORE]) == (text if expected is None else expected)


def test_the_database_host_of_the_store_is_scrubbed_where_it_stands_alone():
    from steerable_agent_runtime.transport.server_paths import store_hosts

    class Url:
        host = "db.internal"

    class Postgres:
        where = "postgresql+asyncpg://app:***@db.internal:5432/app"
        backend = "postgresql"
        url = Url()

    class SqliteOverSqlAlchemy:
        backend = "sqlite"
        url = Url()

    hosts = store_hosts(Postgres())
    assert hosts == ["db.internal"] and store_hosts(SqliteOverSqlAlchemy()) == [] and store_hosts(object()) == []
    scrub = PathScrubber(store_locations(Postgres()), hosts)._for(None)
    assert scrub('could not translate host name "db.internal" to address') == \
        'could not translate host name "<address>" to address'
    assert scrub("db.internal:5432 refused the connection.") == "<address>:5432 refused the connection."
    assert scrub(f"{Postgres.where}: cannot reach the database") == "the store: cannot reach the database"
    for kept in ("http://db.internal:8080/health failed", "db.internal2 and replica.db.internal.example answered"):
        assert scrub(kept) == kept
