"""check's orphan pass: child rows whose parent row does not exist.

The parents a child table references are found first through the child's index (covering,
no table scan); only the children of a missing parent are read. A child table with many rows
per parent (messages: hundreds per chat) is not read whole even in its index: its distinct
values are visited by seeking from each to the next (one seek per distinct value, in C), up
to a cap; past the cap, or on a number where text belongs (damage: SQLite's text affinity
would then bend the comparisons), the same values come from the GROUP BY over the index.
Both give the same values, bytes and order (a property test holds them to each other).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from ...storage.schema import TABLES
from ..codes import FindingLog

ROWS_PER_SEEK = 16
"""Seek when the child table has more than this many rows per parent row; stop seeking
(and group instead) after ``rows // ROWS_PER_SEEK`` distinct values."""


@dataclass(frozen=True)
class OrphanSpec:
    """One child table's reference: its finding code, key, column, parent table and column."""

    code: str
    table: str
    key: str
    column: str
    parent: str
    parent_key: str
    noun: str


ORPHANS = tuple(
    OrphanSpec(f"orphan-{spec.singular}", name, spec.key[0], *spec.parent, spec.parent[0].removesuffix("_id"))
    for name, spec in TABLES.items() if spec.parent)
"""Per child table: what it references (storage/schema.py)."""


def check_orphans(conn: Any, present: set[str], log: FindingLog, rows: dict[str, int] | None = None) -> None:
    """Add an orphan finding per child row whose parent does not exist, in the child's index order.

    ``rows``: the tables' row counts when the caller has them (else they are counted here:
    one page walk of the smallest index each), to choose seeking or grouping.
    """
    counts: dict[str, int | None] = dict(rows or {})
    for spec in ORPHANS:
        if spec.table not in present or spec.parent not in present:
            continue
        for name in (spec.table, spec.parent):
            if name not in counts:
                counts[name] = _count(conn, name)
        child, parent = counts[spec.table], counts[spec.parent]
        cap = child // ROWS_PER_SEEK if child is not None and parent is not None else 0
        for raw in missing_parents(conn, spec, cap if cap > (parent or 0) else None):
            ref = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            sql = f"SELECT {spec.key} FROM {spec.table} WHERE {spec.column} = CAST(? AS TEXT) ORDER BY rowid"
            for (row_key,) in conn.execute(sql, (raw,)):
                log.add(spec.code, f"{spec.table} {row_key!r}: its {spec.noun} {ref!r} does not exist in {spec.parent}",
                        table=spec.table, key=str(row_key))


def _count(conn: Any, table: str) -> int | None:
    """``count(*)`` of ``table``, or None when SQLite cannot read it to the end (damage: the
    GROUP BY then reads what it can, as it did before the count was taken)."""
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return None


def missing_parents(conn: Any, spec: OrphanSpec, cap: int | None) -> list[Any]:
    """The distinct values of the child column that no parent row holds, ``CAST(... AS BLOB)``
    (exact bytes even when not valid UTF-8), in index order; not NULL (damage in a NOT NULL
    column: no row is found by ``= NULL`` to report). ``cap``: seek through at most that many
    distinct values (None: group)."""
    if cap is not None:
        found = _seek(conn, spec, cap)
        if found is not None:
            return found
    return [raw for (raw,) in conn.execute(
        f"SELECT CAST({spec.column} AS BLOB) FROM {spec.table} GROUP BY {spec.column} HAVING NOT EXISTS"
        f" (SELECT 1 FROM {spec.parent} p WHERE p.{spec.parent_key} = {spec.table}.{spec.column})") if raw is not None]


def _seek(conn: Any, spec: OrphanSpec, cap: int) -> list[Any] | None:
    """The missing parents by seeking value to value; None when that cannot answer (a number
    in the column, which sorts before text; more than ``cap`` distinct values).

    The walk starts at the first value ``>= ''``: past NULLs (no parent matches NULL, and the
    GROUP BY's NULL group has no row an ``=`` finds) and numbers (checked apart: one seek).
    Text and blobs compare as stored (text affinity leaves them alone), in the index's order.
    """
    t, c = spec.table, spec.column
    if conn.execute(f"SELECT 1 FROM {t} WHERE {c} < '' LIMIT 1").fetchone():
        return None
    walk = conn.execute(
        f"WITH RECURSIVE k(v) AS (SELECT min({c}) FROM {t} WHERE {c} >= ''"
        f" UNION ALL SELECT (SELECT min({c}) FROM {t} WHERE {c} > k.v) FROM k WHERE k.v IS NOT NULL LIMIT ?)"
        f" SELECT CAST(v AS BLOB), v IS NULL, v IS NOT NULL AND NOT EXISTS"
        f" (SELECT 1 FROM {spec.parent} p WHERE p.{spec.parent_key} = k.v) FROM k", (cap + 1,)).fetchall()
    if not walk or not walk[-1][1]:
        return None  # the cap was reached before the last value
    return [raw for raw, _end, missing in walk if missing]
