"""storage/schema.TABLES is the only description of the tables: the DDL agrees with it, and every
list a job derives from it (or keeps beside it) covers every table, so adding a table to TABLES and
the DDL is all it takes, and forgetting a job fails here."""

from __future__ import annotations

import sqlite3

from steerable_agent_runtime.maintenance import RowCounts
from steerable_agent_runtime.maintenance.archive import chatmove
from steerable_agent_runtime.maintenance.archive import job as archive_job
from steerable_agent_runtime.maintenance.check import orphans as check_orphans
from steerable_agent_runtime.maintenance.check.shapes import SHAPES
from steerable_agent_runtime.maintenance import inspect as inspect_job
from steerable_agent_runtime.maintenance.salvage import rows as salvage_rows
from steerable_agent_runtime.storage.schema import DDL, TABLES

ALL = set(TABLES)


def _ddl_columns() -> dict[str, list[tuple[str, str, bool]]]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(DDL)
    out = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'"):
        out[name] = [(r[1], r[2], not r[3]) for r in conn.execute(f"PRAGMA table_info({name})")]
    return out


def test_the_ddl_has_exactly_the_tables_and_columns_of_tables():
    ddl = _ddl_columns()
    assert set(ddl) == ALL
    for name, spec in TABLES.items():
        assert [c for c, _t, _n in ddl[name]] == list(spec.all_columns), name
        integers = {c for c, kind, _n in ddl[name] if kind == "INTEGER"} - {"crc"}
        assert integers == spec.integers, name
        assert {c for c, _t, nullable in ddl[name] if nullable} == spec.nullable, name
        assert set(spec.key) <= set(spec.columns) and spec.newest in spec.columns


def test_every_parent_and_chat_column_names_real_columns_and_every_row_reaches_a_chat():
    for name, spec in TABLES.items():
        if spec.parent:
            column, parent, parent_column = spec.parent
            assert column in spec.columns and parent_column in TABLES[parent].columns
        reach, seen = spec, set()
        while reach.chat_column is None:  # a span or event belongs to its chat through its trace
            assert reach.parent and reach.name not in seen, f"{name}: no way to its chat"
            seen.add(reach.name)
            reach = TABLES[reach.parent[1]]


def test_every_derived_list_covers_every_table():
    assert set(inspect_job._NEWEST) == ALL
    assert {t for t, _c in archive_job._CHAT_KEYS} == {n for n, s in TABLES.items() if s.chat_column}
    assert {o.table for o in check_orphans.ORPHANS} == {n for n, s in TABLES.items() if s.parent}
    assert set(salvage_rows.MODELS) | {"history"} == ALL
    assert set(salvage_rows.MARKERS) == ALL and len(set(salvage_rows.MARKERS.values())) == len(ALL)
    assert set(salvage_rows.INDEXED) == ALL
    assert set(SHAPES) | {"history"} == ALL
    assert set(chatmove.CHAT_TABLES) == ALL and len(chatmove.CHAT_TABLES) == len(ALL)
    assert set(RowCounts.model_fields) == ALL


def test_chat_tables_copy_parents_before_children():
    order = {name: i for i, name in enumerate(chatmove.CHAT_TABLES)}
    for name, spec in TABLES.items():
        if spec.parent:
            assert order[spec.parent[1]] < order[name], name


def test_each_model_is_the_shape_of_its_table_data():
    for name, spec in TABLES.items():
        if spec.model is not None:
            aliases = {f.alias or n for n, f in spec.model.model_fields.items()}
            assert {field for field in spec.columns.values() if field} <= aliases, name
            assert spec.marker.strip(b'"').decode() in aliases, name
