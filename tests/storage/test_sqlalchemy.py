"""SqlAlchemyStorage beyond the contract suite: bad input, fail-closed reads, search, row bytes.

Against the session's real PostgreSQL (tests/pgcluster.py) and real SQLite files.
"""

from __future__ import annotations

import logging
import socket
import sqlite3

import pytest
from steerable_agent_runtime import (
    DataIntegrityError,
    NotAStoreError,
    RecordFormatError,
    SchemaTooNewError,
    SqliteStorage,
    SteerableError,
    UsageError,
)
from steerable_agent_runtime.errors import StoreAuthError, StoreConnectionError
from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.storage.schema import TABLES
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

from tests.helpers import (
    boundary,
    event,
    item,
    message,
    run,
    seed,
    session,
    span,
    trace,
)
from tests.pgcluster import PASSWORD, PW_USER


def db_name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def tables_of(postgres, db: str) -> str:
    return postgres.psql("SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables"
                         " WHERE table_schema = 'public'", db)


def no_password_anywhere(err: SteerableError, password: str) -> None:
    assert password not in str(err) and password not in err.hint and password not in repr(err.to_dict())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# bad input ------------------------------------------------------------------------------
def test_unreachable_server_is_one_error_with_a_hint_and_no_password(caplog):
    caplog.set_level(logging.DEBUG)
    store = SqlAlchemyStorage(f"postgresql://u:{PASSWORD}@127.0.0.1:{closed_port()}/db")
    with pytest.raises(StoreConnectionError) as err:
        run(store.open())
    assert "cannot reach the database" in str(err.value) and "server is running" in err.value.hint
    assert "***" in str(err.value)  # the URL is named, its password hidden
    no_password_anywhere(err.value, PASSWORD)
    assert PASSWORD not in caplog.text


def test_wrong_password_is_an_auth_error_and_the_right_one_works(postgres, caplog):
    caplog.set_level(logging.DEBUG)
    db = postgres.create_database(owner=PW_USER)
    wrong = "Wr0ng-" + PASSWORD
    with pytest.raises(StoreAuthError) as err:
        run(SqlAlchemyStorage(postgres.url(db, user=PW_USER, password=wrong)).open())
    assert "refused the credentials" in str(err.value) and "password" in err.value.hint
    no_password_anywhere(err.value, wrong)
    assert wrong not in caplog.text
    assert tables_of(postgres, db) == ""  # nothing was created
    good = SqlAlchemyStorage(postgres.url(db, user=PW_USER, password=PASSWORD))
    run(good.upsert_session(session("s1")))
    assert run(good.get_session("s1")) == session("s1")
    run(good.close())


def test_missing_database_names_the_remedy(postgres):
    with pytest.raises(StoreConnectionError) as err:
        run(SqlAlchemyStorage(postgres.url("no_such_db")).open())
    assert "does not exist" in str(err.value) and "createdb" in err.value.hint


def test_tables_of_something_else_are_refused_and_untouched(postgres, pg_url):
    db = db_name(pg_url)
    postgres.psql("CREATE TABLE sessions (x integer); INSERT INTO sessions VALUES (7)", db)
    with pytest.raises(NotAStoreError) as err:
        run(SqlAlchemyStorage(pg_url).upsert_session(session("s1")))
    assert "belong to something else" in str(err.value) and "another database" in err.value.hint
    assert tables_of(postgres, db) == "sessions"
    assert postgres.psql("SELECT x FROM sessions", db) == "7"


def test_newer_schema_is_refused_and_unchanged(postgres, pg_url):
    db = db_name(pg_url)
    store = SqlAlchemyStorage(pg_url)
    run(store.append_history("c1", [item("a")]))
    run(store.close())
    postgres.psql("UPDATE steerable_meta SET value = '3' WHERE key = 'schema_version'", db)
    before = postgres.psql("SELECT string_agg(data || crc, '|') FROM history", db)
    with pytest.raises(SchemaTooNewError) as err:
        run(SqlAlchemyStorage(pg_url).list_history("c1"))
    assert "newer build" in str(err.value) and "upgrade" in err.value.hint
    assert postgres.psql("SELECT value FROM steerable_meta WHERE key = 'schema_version'", db) == "3"
    assert postgres.psql("SELECT string_agg(data || crc, '|') FROM history", db) == before


def test_an_unreadable_schema_version_marker_is_refused_not_a_raw_error(postgres, pg_url):
    db = db_name(pg_url)
    run(SqlAlchemyStorage(pg_url).open())
    postgres.psql("UPDATE steerable_meta SET value = 'x2' WHERE key = 'schema_version'", db)
    with pytest.raises(NotAStoreError) as err:
        run(SqlAlchemyStorage(pg_url).list_history("c1"))
    assert "'x2'" in err.value.message and "schema_version" in err.value.hint
    assert postgres.psql("SELECT value FROM steerable_meta WHERE key = 'schema_version'", db) == "x2"


def test_create_false_refuses_an_empty_database_and_create_schema_is_idempotent(postgres, pg_url):
    db = db_name(pg_url)
    with pytest.raises(NotAStoreError, match="no steerable schema"):
        run(SqlAlchemyStorage(pg_url, create=False).open())
    assert tables_of(postgres, db) == ""
    store = SqlAlchemyStorage(pg_url, create=False)
    run(store.create_schema())
    run(store.create_schema())
    assert tables_of(postgres, db) == "events,history,messages,sessions,spans,steerable_meta,traces"
    assert run(store.list_sessions()) == []
    run(store.close())


@pytest.mark.parametrize("url", ["mysql://u:pw-xyz@host/db", "not a url pw-xyz", "sqlite+aiosqlite:///:memory:"])
def test_unsupported_urls_are_usage_errors(url):
    with pytest.raises(UsageError) as err:
        SqlAlchemyStorage(url)
    assert "pw-xyz" not in str(err.value)


def test_sqlite_urls_refuse_foreign_newer_and_missing_places(tmp_path):
    from tests.helpers import digest_files

    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    newer = tmp_path / "newer.db"
    run(SqliteStorage(newer).close())
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 9")
    conn.close()
    before = digest_files(tmp_path)
    with pytest.raises(NotAStoreError):
        run(SqlAlchemyStorage(f"sqlite:///{foreign}").open())
    with pytest.raises(SchemaTooNewError):
        run(SqlAlchemyStorage(f"sqlite:///{newer}").open())
    with pytest.raises(NotAStoreError, match="does not exist"):
        run(SqlAlchemyStorage(f"sqlite:///{tmp_path / 'no' / 's.db'}").open())
    assert digest_files(tmp_path) == before


def _aiosqlite_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t.is_alive()]


def test_a_refused_sqlite_store_keeps_no_connection_open(tmp_path):
    """open() refusing a store closes the connection it inspected with: one left in the pool
    kept its aiosqlite thread until the storage object was collected, and a thread that then
    answered an event loop closed meanwhile died with "Event loop is closed" (seen as a
    PytestUnhandledThreadExceptionWarning in later tests)."""
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = _aiosqlite_threads()
    store = SqlAlchemyStorage(f"sqlite:///{foreign}")
    with pytest.raises(NotAStoreError):
        run(store.open())
    for thread in _aiosqlite_threads():
        if thread not in before:
            thread.join(5)
    assert [t for t in _aiosqlite_threads() if t not in before] == []
    with pytest.raises(NotAStoreError):  # still refuses, and still usable after
        run(store.open())
    run(store.close())


# fail-closed reads ----------------------------------------------------------------------
def test_corrupt_and_newer_rows_fail_closed_on_postgres(postgres, pg_url):
    db = db_name(pg_url)
    store = SqlAlchemyStorage(pg_url)
    run(store.append_history("c1", [item("a"), item("b")]))
    run(store.upsert_session(session("s1")))
    postgres.psql("UPDATE history SET data = replace(data, '\"a\"', '\"A\"') WHERE seq = 1", db)
    with pytest.raises(DataIntegrityError) as err:
        run(store.list_history("c1"))
    assert err.value.record_id == "c1" and err.value.seq == 1
    assert [e["seq"] for e in run(store.list_history("c1", after_seq=1))] == [2]
    v3 = '{"v":3,"type":"item","seq":3,"at":"2026-01-01T00:00:00.000000Z","message":{"role":"user","content":"x"}}'
    postgres.psql(f"INSERT INTO history VALUES ('c1', 3, 3, 'item', '2026-01-01T00:00:00.000000Z', '{v3}',"
                  f" {row_crc('history', ('c1', 3), v3)})", db)
    with pytest.raises(RecordFormatError, match="newer build"):
        run(store.list_history("c1", after_seq=1))
    bad = '{"sessionId": 5}'
    postgres.psql(f"UPDATE sessions SET data = '{bad}', crc = {row_crc('sessions', ('s1',), bad)}", db)
    with pytest.raises(RecordFormatError, match="does not parse"):
        run(store.get_session("s1"))
    run(store.close())


# search -----------------------------------------------------------------------------------
def populate(store) -> None:
    run(store.upsert_session(session("s-rare", chat="c-rare", minute=1)))
    run(store.upsert_session(session("s-many", chat="c-many", minute=2)))
    run(store.upsert_session(session("s-many-2", chat="c-many", minute=3)))
    run(store.upsert_session(session("s-none", chat="c-none", minute=4)))
    run(store.append_message(message("m1", chat="c-rare", content="a long talk about weather and then one mention of kiwi")))
    run(store.append_message(message("m2", chat="c-many", content="kiwi kiwi kiwi")))
    run(store.append_message(message("m3", chat="c-many", content="kiwi again")))
    run(store.append_message(message("m4", chat="c-none", content="nothing relevant here 100%_sure \x00 nul")))


@pytest.fixture(params=["postgres", "sqlite"])
def search_store(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else f"sqlite:///{tmp_path / 's.db'}"
    store = SqlAlchemyStorage(url)
    populate(store)
    yield store
    run(store.close())


def ids(found) -> list[str]:
    return [s.session_id for s in found]


def test_search_ranks_best_chat_first_and_follows_updates(search_store):
    assert ids(run(search_store.search_sessions("kiwi"))) == ["s-many", "s-many-2", "s-rare"]
    assert ids(run(search_store.search_sessions("kiwi", limit=1))) == ["s-many", "s-many-2"]
    assert run(search_store.search_sessions("durian")) == []
    assert ids(run(search_store.search_sessions("relevant"))) == ["s-none"]  # content holding U+0000
    run(search_store.append_message(message("m1", chat="c-rare", content="now about mango")))
    assert ids(run(search_store.search_sessions("mango"))) == ["s-rare"]
    assert "s-rare" not in ids(run(search_store.search_sessions("weather")))
    with pytest.raises(UsageError):
        run(search_store.search_sessions("  "))
    with pytest.raises(UsageError):
        run(search_store.search_sessions("kiwi", order="best"))


def test_search_orders_recent_and_relevance(search_store):
    run(search_store.append_message(message("m5", chat="c-rare", content="kiwi once more")))
    assert ids(run(search_store.search_sessions("kiwi"))) == ["s-rare", "s-many", "s-many-2"]  # newest match
    assert ids(run(search_store.search_sessions("kiwi", limit=1))) == ["s-rare"]
    # "kiwi kiwi kiwi" is the best match on both engines
    assert ids(run(search_store.search_sessions("kiwi", order="relevance"))) == ["s-many", "s-many-2", "s-rare"]


def test_postgres_search_takes_web_search_syntax(pg_url):
    store = SqlAlchemyStorage(pg_url)
    populate(store)
    assert ids(run(store.search_sessions('"kiwi again"'))) == ["s-many", "s-many-2"]
    assert ids(run(store.search_sessions("kiwi -again"))) == ["s-many", "s-many-2", "s-rare"]
    assert ids(run(store.search_sessions("weather kiwi"))) == ["s-rare"]
    assert ids(run(store.search_sessions('"unbalanced'))) == []  # never a syntax error
    run(store.close())


def test_postgres_search_uses_the_gin_index(postgres, pg_url):
    store = SqlAlchemyStorage(pg_url)
    populate(store)
    run(store.close())
    plan = postgres.psql("SET enable_seqscan = off; EXPLAIN SELECT id FROM messages WHERE to_tsvector('simple',"
                         " steerable_message_text(data)) @@ websearch_to_tsquery('simple', 'kiwi')", db_name(pg_url))
    assert "messages_search" in plan


def test_sqlite_search_rejects_what_fts5_rejects(tmp_path):
    store = SqlAlchemyStorage(f"sqlite:///{tmp_path / 's.db'}")
    populate(store)
    with pytest.raises(UsageError) as err:
        run(store.search_sessions('"unbalanced'))
    assert "double quotes" in err.value.hint
    run(store.close())


# the same rows ----------------------------------------------------------------------------
def write_everything(store) -> None:
    run(store.upsert_session(session("s1")))
    run(store.append_message(message("m1", content="plain ✓ \n \" \\ \u2028 \x00")))
    run(store.upsert_trace(trace("t1")))
    run(store.add_span("t1", span("sp1")))
    run(store.add_event("t1", event("e1", "sp1")))
    run(store.append_history("c1", [{**item("x"), "at": "2026-01-01T00:00:00Z"},
                                    {**seed("s"), "at": "2026-01-01T00:00:00Z"},
                                    {**boundary("b"), "at": "2026-01-01T00:00:00Z"}]))


@pytest.mark.parametrize("driver", ["postgresql+asyncpg", "postgresql+psycopg"])
def test_rows_are_byte_identical_to_sqlite_storage(postgres, pg_url, tmp_path, driver):
    sqlite_store = SqliteStorage(tmp_path / "s.db")
    write_everything(sqlite_store)
    run(sqlite_store.close())
    pg_store = SqlAlchemyStorage(driver + "://" + pg_url.split("://", 1)[1])
    write_everything(pg_store)
    run(pg_store.close())
    conn = sqlite3.connect(tmp_path / "s.db")
    for name, spec in TABLES.items():
        cols = ", ".join(spec.all_columns)
        local = conn.execute(f"SELECT {cols} FROM {name} ORDER BY {', '.join(spec.key)}").fetchall()
        remote = postgres.psql(f"SELECT json_agg(json_build_array({cols}) ORDER BY {', '.join(spec.key)})"
                               f" FROM {name}", db_name(pg_url))
        import json

        assert [tuple(r) for r in json.loads(remote)] == local, name
    conn.close()


def test_a_sqlite_url_makes_a_store_sqlite_storage_reads(tmp_path):
    path = tmp_path / "s.db"
    store = SqlAlchemyStorage(f"sqlite+aiosqlite:///{path}")
    write_everything(store)
    written = run(store.list_history("c1"))
    run(store.close())
    assert (path.stat().st_mode & 0o777) == 0o600
    local = SqliteStorage(path)
    assert run(local.list_history("c1")) == written
    assert run(local.search_sessions("plain")) == [session("s1")]
    run(local.close())


def test_order_is_bytewise_whatever_the_database_collation(postgres):
    """Ids and timestamps sort as SQLite sorts them (bytes), also in an ICU en-US database."""
    name = "icu_" + db_name(postgres.url(postgres.create_database()))
    postgres.psql(f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
                  " LOCALE 'C.UTF-8'")
    assert postgres.psql("SELECT string_agg(x, ',' ORDER BY x) FROM (VALUES ('a'), ('B'), ('_c')) v(x)",
                         name) == "_c,a,B"  # the database's own order is linguistic
    store = SqlAlchemyStorage(postgres.url(name))
    ids = ["a", "B", "_c", "b", "A1", "a-2"]
    for sid in ids:
        run(store.upsert_session(session(sid)))
        run(store.upsert_trace(trace(sid)))
    assert [s.session_id for s in run(store.list_sessions())] == sorted(ids)
    assert [t.trace_id for t in run(store.list_traces())] == sorted(ids)
    run(store.close())


def test_the_remembered_head_is_only_a_guess(postgres, pg_url):
    """A process appends at the head it last wrote without a lock; when another writer moved
    the head (or the record was deleted) the guard writes nothing and the locked path runs."""
    first, second = SqlAlchemyStorage(pg_url), SqlAlchemyStorage(pg_url)
    assert [e["seq"] for e in run(first.append_history("c1", [item("a"), item("b")]))] == [1, 2]
    assert [e["seq"] for e in run(second.append_history("c1", [item("c")]))] == [3]
    assert [e["seq"] for e in run(first.append_history("c1", [item("d")]))] == [4]  # its guess (2) was stale
    assert [e["seq"] for e in run(first.append_history("c1", [item("e")]))] == [5]  # its guess (4) was right
    postgres.psql("DELETE FROM history WHERE record_id = 'c1' AND seq > 2", db_name(pg_url))
    assert [e["seq"] for e in run(first.append_history("c1", [item("f")]))] == [3]  # no gap after a delete
    assert [e["message"]["content"] for e in run(first.list_history("c1"))] == ["a", "b", "f"]
    run(first.close())
    run(second.close())


# lost connections ---------------------------------------------------------------------
def test_a_driver_error_on_a_connection_sqlalchemy_found_dead_is_a_connection_error():
    """asyncpg's "cannot switch to state ..; another operation is in progress" and "connection
    is closed", psycopg's "server closed the connection unexpectedly" carry no SQLSTATE; the
    one sign they mean a lost connection is SQLAlchemy's ``connection_invalidated``."""
    from steerable_agent_runtime.storage.dberrors import translate

    class DriverError(Exception):
        pass

    DriverError.__module__ = "asyncpg.exceptions._base"
    for invalidated, expected in ((True, "StoreConnectionError"), (False, "StoreServerError")):
        wrapper = Exception("(InternalClientError) cannot switch to state 12; another operation (2) is in progress")
        wrapper.connection_invalidated = invalidated  # what sqlalchemy.exc.DBAPIError carries
        wrapper.__cause__ = DriverError("cannot switch to state 12; another operation (2) is in progress")
        assert type(translate(wrapper, where="postgresql://h/db", password=None)).__name__ == expected


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
def test_backends_killed_mid_append_are_connection_errors_and_lose_nothing_acknowledged(postgres, pg_url, driver):
    """pg_terminate_backend while several appends are in flight: every failed call is
    StoreConnectionError (never StoreServerError, whose hint sends the operator to the server's
    log), every acknowledged entry is there once, and seq stays contiguous."""
    import asyncio

    url = pg_url if driver == "asyncpg" else "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    db = db_name(pg_url)
    errors: list[BaseException] = []
    acked: list[str] = []

    async def writer(store: SqlAlchemyStorage, name: str) -> None:
        for i in range(30):
            try:
                await store.append_history("r", [item(f"{name}-{i}")])
                acked.append(f"{name}-{i}")
            except SteerableError as exc:
                errors.append(exc)

    async def rounds() -> None:
        store = SqlAlchemyStorage(url, pool_size=3)
        await store.open()
        for round_ in range(6):
            async def kill() -> None:
                await asyncio.sleep(0.02)
                await asyncio.to_thread(postgres.psql, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                        f" WHERE datname = '{db}' AND pid <> pg_backend_pid()")
            await asyncio.gather(*(writer(store, f"w{round_}.{k}") for k in range(8)), kill())
        await store.close()

    run(rounds())
    assert errors, "no call met a killed connection"
    assert {type(e).__name__ for e in errors} == {"StoreConnectionError"}, [str(e) for e in errors]
    stored = run(SqlAlchemyStorage(url).list_history("r"))
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    texts = [e["message"]["content"] for e in stored]
    assert len(texts) == len(set(texts)) and set(acked) <= set(texts)


def test_a_pooled_connection_the_server_closed_while_idle_is_replaced_not_used(postgres, pg_url):
    """A server restart (or an idle backend ended by the server) closes the pool's idle
    connections; asyncpg sees the close at once, and the pool opens a new connection instead of
    handing the dead one to the next call, which succeeds (no round trip is added)."""
    import asyncio

    db = db_name(pg_url)

    async def main() -> None:
        store = SqlAlchemyStorage(pg_url, pool_size=3)
        await asyncio.gather(*(store.append_history(f"r{k}", [item("before")]) for k in range(3)))
        ended = await asyncio.to_thread(postgres.psql, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                        f" WHERE datname = '{db}' AND pid <> pg_backend_pid()")
        assert int(ended) >= 1
        await asyncio.sleep(0.3)  # the server's FATAL message and close reach the client
        for k in range(3):
            assert [e["seq"] for e in await store.append_history(f"r{k}", [item("after")])] == [2]
        assert await store.get_session("none") is None
        await store.close()

    run(main())


# text no row can hold -----------------------------------------------------------------
@pytest.fixture(params=["sqla-sqlite", "sqla-postgres"])
def sqla_store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}" if request.param == "sqla-sqlite" else request.getfixturevalue("pg_url")
    store = SqlAlchemyStorage(url)
    yield store
    run(store.close())


def test_a_key_no_row_can_hold_is_found_nowhere_and_refused_for_writes(sqla_store):
    """A lone surrogate (no character: UTF-8 cannot encode it) and, on PostgreSQL, U+0000 (text
    cannot hold it) in an id, a filter or a record id: a read answers "nothing there" as for any
    missing key, a write is a UsageError naming the cause; never a raw driver error (the
    sqlite3 module's UnicodeEncodeError) nor StoreServerError's "see the server's log"."""
    bad = ["a\ud800"] + (["a\x00b"] if sqla_store.backend == "postgresql" else [])
    run(sqla_store.upsert_session(session("s1")))
    for key in bad:
        assert run(sqla_store.get_session(key)) is None
        assert run(sqla_store.list_sessions(chat_id=key)) == []
        assert run(sqla_store.list_sessions(user_id=key, active_only=True)) == []
        assert run(sqla_store.list_messages(key)) == [] and run(sqla_store.list_messages(key, limit=3)) == []
        assert run(sqla_store.get_trace(key)) is None and run(sqla_store.list_traces(session_id=key)) == []
        assert run(sqla_store.list_spans(key)) == [] and run(sqla_store.list_events("t", span_id=key)) == []
        assert run(sqla_store.list_history(key)) == [] and run(sqla_store.history_checkpoint(key)) is None
        assert run(sqla_store.search_sessions("\ud800")) == []
        writes = [lambda: sqla_store.append_history(key, [item("x")]), lambda: sqla_store.add_span(key, span("p")),
                  lambda: sqla_store.add_event(key, event("e", "p"))]
        if "\x00" in key:  # a surrogate inside a model's JSON is refused by the model first, in every store
            writes.append(lambda: sqla_store.append_message(message("m", chat=key)))
        for write in writes:
            with pytest.raises(UsageError) as caught:
                run(write())
            assert "no row can hold" in caught.value.message and caught.value.hint
    assert run(sqla_store.list_sessions()) == [session("s1")] and run(sqla_store.list_spans("t")) == []


def test_postgres_search_reads_u0000_in_a_query_as_the_index_does(pg_url):
    """Content holding U+0000 is indexed without it; a query holding it is searched without it
    (PostgreSQL text cannot carry it to websearch_to_tsquery)."""
    store = SqlAlchemyStorage(pg_url)
    run(store.upsert_session(session("s1")))
    run(store.append_message(message("m1", content="he\x00llo world")))
    assert run(store.search_sessions("he\x00llo")) == [session("s1")]
    with pytest.raises(UsageError):
        run(store.search_sessions("\x00"))  # nothing left to search for
    run(store.close())


def test_postgres_search_refuses_a_query_too_large_for_the_server_as_a_usage_error(pg_url):
    """A query of tens of thousands of words exceeds PostgreSQL's stack depth in
    websearch_to_tsquery: the caller's query is at fault, not the server (UsageError with a
    hint, not StoreServerError's "see the server's log"); the store stays usable."""
    store = SqlAlchemyStorage(pg_url)
    run(store.upsert_session(session("s1")))
    run(store.append_message(message("m1", content="needle")))
    for query in ("w " * 40_000, '"' + "w " * 30_000 + '"', "a or " * 40_000):
        with pytest.raises(UsageError) as caught:
            run(store.search_sessions(query))
        assert "too large" in caught.value.message and "fewer words" in caught.value.hint
    assert run(store.search_sessions("needle " * 1000)) == [session("s1")]
    run(store.close())


def _many_words(count: int, seed: int) -> str:
    import random
    import string

    rnd = random.Random(seed)
    return " ".join("".join(rnd.choices(string.ascii_lowercase, k=8)) for _ in range(count))


def test_postgres_stores_a_message_too_long_for_one_tsvector(postgres, pg_url):
    """A message whose words exceed PostgreSQL's tsvector limit (1 MB of lexemes: a pasted log
    or document) is stored, not refused by its search index; the index keeps the longest
    prefix that fits. A store made by an earlier build gets the new function at open (it
    returns the same text for every row that could be stored before: the index stays valid)."""
    db = db_name(pg_url)
    store = SqlAlchemyStorage(pg_url)
    run(store.upsert_session(session("s1", chat="big")))
    run(store.upsert_session(session("s2", chat="small")))
    run(store.close())
    # the function as the previous build created it: a stored row is indexed whole or refused
    postgres.psql("CREATE OR REPLACE FUNCTION steerable_message_text(data text) RETURNS text LANGUAGE plpgsql"
                  " IMMUTABLE PARALLEL SAFE AS $$ BEGIN RETURN data::json ->> 'content'; END $$", db)
    store = SqlAlchemyStorage(pg_url)
    big = "findme " + _many_words(250_000, 1) + " farend"  # ~2.2 MB, ~3 MB of lexemes
    stored = run(store.append_message(message("m-big", chat="big", content=big)))
    assert stored.content == big and run(store.list_messages("big"))[0].content == big
    run(store.append_message(message("m-small", chat="small", content="farend findme")))
    assert run(store.search_sessions("findme")) == [session("s2", chat="small"), session("s1", chat="big")]
    assert run(store.search_sessions("farend")) == [session("s2", chat="small")]  # past the indexed prefix
    run(store.close())


def test_bounds_beyond_64_bits_read_as_the_other_stores_read_them(sqla_store):
    """seq bounds and limits are Python ints: one past the database's 64-bit range means
    "beyond every row" (as in InMemoryStorage), not a raw OverflowError or a refused statement."""
    run(sqla_store.append_history("r", [item("a"), item("b")]))
    run(sqla_store.append_message(message("m1")))
    huge = 2**70
    assert [e["seq"] for e in run(sqla_store.list_history("r", until_seq=huge, limit=huge))] == [1, 2]
    assert [e["seq"] for e in run(sqla_store.list_history("r", after_seq=-huge, reverse=True))] == [2, 1]
    assert run(sqla_store.list_history("r", after_seq=huge)) == [] and run(sqla_store.list_history("r", until_seq=-huge)) == []
    assert [m.id for m in run(sqla_store.list_messages("c1", limit=huge))] == ["m1"]
