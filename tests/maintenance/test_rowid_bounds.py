"""The rowid bounds check's and salvage's parallel passes start from are read by seeks, and
are the bounds: SQLite answers ``SELECT min(rowid), max(rowid) FROM t`` with a scan of the whole
table, so workers.rowid_bounds_sql asks for each aggregate in its own subquery. Not a timing:
the query plan (a scan would read every page of a million-row table before any worker starts)."""

from __future__ import annotations

import sqlite3

import pytest

from steerable_agent_runtime.maintenance.workers import rowid_bounds_sql
from steerable_agent_runtime.storage.schema import TABLES


@pytest.fixture
def conn(tmp_path):
    from steerable_agent_runtime.storage.schema import DDL, _statements

    db = sqlite3.connect(tmp_path / "s.db")
    for statement in _statements(DDL):
        db.execute(statement)
    yield db
    db.close()


@pytest.mark.parametrize("count", [False, True])
def test_every_tables_bounds_are_read_by_seeks_not_a_scan(conn, count):
    for table in TABLES:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + rowid_bounds_sql(table, count=count))]
        scans = [step for step in plan if step.startswith("SCAN") and step != "SCAN CONSTANT ROW"]
        # min and max: one seek each; the count (when asked) is SQLite's b-tree count of one index
        assert plan.count(f"SEARCH {table}") == 2 and len(scans) == int(count), (table, plan)


def test_the_bounds_and_count_are_those_of_the_table(conn):
    assert conn.execute(rowid_bounds_sql("sessions", count=True)).fetchone() == (None, None, 0)
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(r, r) for r in (7, 3, 40, 12)])
    assert conn.execute(rowid_bounds_sql("t", count=True)).fetchone() == (3, 40, 4)
    assert conn.execute(rowid_bounds_sql("main.t")).fetchone() == (3, 40)
