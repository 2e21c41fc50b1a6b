"""SqlAlchemyStorage shares the checksum rule and upgrades a schema-1 store on open, in one
transaction, on PostgreSQL and on SQLite; check URL only reports an older schema."""

from __future__ import annotations

import sqlite3

import pytest

from steerable_agent_runtime import DataIntegrityError, SqliteStorage
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.check.server import check_url
from steerable_agent_runtime.storage.checksum import IDENTITY, legacy_crc, row_crc
from steerable_agent_runtime.storage.schema import SCHEMA_VERSION, TABLES
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage
from tests.helpers import event, item, message, run, session, span, trace
from tests.storage.legacy import to_schema_v1


async def _fill(store) -> None:
    await store.upsert_session(session("s1"))
    await store.append_message(message("m1"))
    await store.upsert_trace(trace("t1"))
    await store.add_span("t1", span("sp1"))
    await store.add_event("t1", event("ev1", "sp1"))
    await store.append_history("c1", [item(f"e{i}") for i in range(5)])


async def _read(store) -> tuple:
    return ([e["message"]["content"] for e in await store.list_history("c1")],
            (await store.get_session("s1")).session_id, [s.span_id for s in await store.list_spans("t1")],
            [e.event_id for e in await store.list_events("t1")])


EXPECTED = ([f"e{i}" for i in range(5)], "s1", ["sp1"], ["ev1"])


def test_both_stores_write_the_same_checksums(tmp_path):
    plain, sqla = tmp_path / "a.db", tmp_path / "b.db"
    store = SqliteStorage(plain)
    run(_fill(store))
    run(store.close())

    async def through_sqlalchemy():
        s = SqlAlchemyStorage(f"sqlite+aiosqlite:///{sqla}")
        await _fill(s)
        await s.close()
    run(through_sqlalchemy())
    for path in (plain, sqla):
        conn = sqlite3.connect(path)
        for table in TABLES:
            for *ident, data, crc in conn.execute(f"SELECT {', '.join(IDENTITY[table])}, CAST(data AS BLOB), crc"
                                                   f" FROM {table}"):
                assert row_crc(table, ident, data) == crc
        conn.close()


def test_a_v1_sqlite_store_is_upgraded_on_open_through_sqlalchemy(tmp_path):
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    run(_fill(store))
    run(store.close())
    to_schema_v1(db)
    seen = []

    async def go():
        s = SqlAlchemyStorage(f"sqlite+aiosqlite:///{db}", on_upgrade=lambda d, t: seen.append((d, t)))
        try:
            assert await _read(s) == EXPECTED
            return s.upgraded_rows
        finally:
            await s.close()
    assert run(go()) == 10
    assert seen[-1] == (10, 10)
    assert check(db).findings == [] and check(db).schema_version == SCHEMA_VERSION


def _pg_to_v1(postgres, db: str) -> None:
    """Rewrite a PostgreSQL store's checksums with the schema-1 rule and mark it version 1."""
    for table, spec in TABLES.items():
        keys = ", ".join(spec.key)
        out = postgres.psql(f"SELECT {keys}, encode(convert_to(data, 'UTF8'), 'hex') FROM {table}", db)
        for line in out.splitlines():
            *key, hexdata = line.split("|") if "|" in line else line.split("\t")
            where = " AND ".join(f"{k} = '{v}'" for k, v in zip(spec.key, key))
            postgres.psql(f"UPDATE {table} SET crc = {legacy_crc(bytes.fromhex(hexdata))} WHERE {where}", db)
    postgres.psql("UPDATE steerable_meta SET value = '1' WHERE key = 'schema_version'", db)


def test_a_v1_postgresql_store_is_reported_by_check_then_upgraded_on_open(postgres, pg_url):
    async def fill():
        s = SqlAlchemyStorage(pg_url)
        await _fill(s)
        await s.close()
    run(fill())
    db = pg_url.rsplit("/", 1)[1]
    _pg_to_v1(postgres, db)
    report = check_url(pg_url)
    assert report.schema_version == 1
    assert [f.code for f in report.findings] == ["schema-too-old"]
    assert postgres.psql("SELECT value FROM steerable_meta WHERE key = 'schema_version'", db).strip() == "1"

    async def go():
        s = SqlAlchemyStorage(pg_url)
        try:
            assert await _read(s) == EXPECTED
            return s.upgraded_rows
        finally:
            await s.close()
    assert run(go()) == 10
    assert postgres.psql("SELECT value FROM steerable_meta WHERE key = 'schema_version'", db).strip() == "2"
    assert check_url(pg_url).findings == []
    postgres.psql("UPDATE history SET record_id = 'c9' WHERE seq = 2", db)  # a key moved: its checksum fails

    async def moved():
        s = SqlAlchemyStorage(pg_url)
        try:
            with pytest.raises(DataIntegrityError):
                await s.list_history("c9")
        finally:
            await s.close()
    run(moved())
