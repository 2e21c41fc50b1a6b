"""The spool: every salvaged copy of every row, kept on disk, ranked per key.

Salvage may find several copies of one key (the live b-tree, an older WAL frame, a freed
page). Holding them in memory would make memory grow with the database, so they go into a
private SQLite file in salvage's temp directory (never next to the source). Ranking:

- only committed copies can win; uncommitted WAL copies are reported, never mixed in;
- a copy on the current image of a live page (``rank`` LIVE) beats a page no tree reaches
  (UNALLOCATED), which beats superseded page versions (older WAL frames by frame order,
  database-file images a committed frame replaced, freelist pages);
- ties go to a verified copy.

The winner of a key is its newest committed copy; every other copy is ``superseded``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..storage.schema import TABLES, row_checksum
from .salvage_rows import Row

LIVE, UNALLOCATED, STALE = 3_000_000_000, 2_000_000_000, 0
_SCHEMA = """
CREATE TABLE cand (
    id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, key TEXT NOT NULL, columns TEXT NOT NULL, data BLOB,
    source TEXT NOT NULL, page INTEGER, frame INTEGER, committed INTEGER NOT NULL,
    placeable INTEGER NOT NULL, rank INTEGER NOT NULL, verified INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class Origin:
    """Where a copy was found: source (btree|freelist|wal|unallocated), page, WAL frame,
    whether its transaction committed, its rank, and whether rebuild may place its key."""

    source: str
    page: int | None
    frame: int | None
    committed: bool
    rank: int
    placeable: bool


class Spool:
    """Candidate rows on disk (``path``: a new file in a private directory)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path.as_uri(), isolation_level=None, uri=True)
        self.conn.execute("PRAGMA journal_mode = OFF")
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(_SCHEMA)
        # A damaged text column may hold invalid UTF-8: read it with replacement characters
        # (as the page reader does) instead of failing the whole export.
        self.conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        self.conn.create_function("skey", -1, lambda *values: _key([_text(v) for v in values]), deterministic=True)
        self.conn.create_function("row_crc", 1, row_checksum, deterministic=True)

    def attach_readonly(self, db: Path) -> bool:
        """Attach a private copy of the store read-only as ``src``; True if SQLite finds it
        sound (``quick_check`` ok), False (detached) if it refuses it or finds damage."""
        try:
            self.conn.execute("ATTACH DATABASE ? AS src", (db.as_uri() + "?mode=ro",))
        except (sqlite3.DatabaseError, UnicodeDecodeError):  # SQLite's message may quote damaged bytes
            return False
        try:
            ok = [r[0] for r in self.conn.execute("PRAGMA src.quick_check")] == ["ok"]
            ok = ok and bool(self.source_tables())
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            ok = False
        if not ok:
            self.conn.execute("DETACH DATABASE src")
        return ok

    def source_tables(self) -> list[str]:
        """The entity tables present in the attached copy."""
        rows = self.conn.execute("SELECT name FROM src.sqlite_master WHERE type = 'table'").fetchall()
        return [name for (name,) in rows if name in TABLES]

    def _begin(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")

    def add(self, rows: Iterable[tuple[Row, Origin]]) -> int:
        """Store copies; return how many."""
        self._begin()
        params = [(r.table, _key(r.key), json.dumps(r.columns, ensure_ascii=False), r.data, o.source, o.page,
                   o.frame, int(o.committed), int(o.placeable), o.rank, int(r.verified)) for r, o in rows]
        self.conn.executemany(
            "INSERT INTO cand (tbl, key, columns, data, source, page, frame, committed, placeable, rank, verified)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)", params)
        return len(params)

    def add_sqlite_table(self, schema: str, table: str) -> int:
        """Copy every row of ``schema.table`` (an attached, cleanly readable store) in, as live
        b-tree copies, inside SQLite: this is the fast path for a healthy table."""
        spec = TABLES[table]
        others = [c for c in spec.all_columns if c != "data"]
        columns = "json_object(" + ", ".join(f"'{c}', {c}" for c in others) + ")"
        self._begin()
        cur = self.conn.execute(
            "INSERT INTO cand (tbl, key, columns, data, source, page, frame, committed, placeable, rank, verified)"
            f" SELECT '{table}', skey({', '.join(_raw(k) for k in spec.key)}), {columns}, CAST(data AS BLOB), 'btree', NULL, NULL,"
            f" 1, 1, {LIVE}, crc IS row_crc(CAST(data AS BLOB)) FROM {schema}.{table}")
        return cur.rowcount

    def finish(self) -> None:
        """Commit the candidates and rank them (call once, after the last add)."""
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")
        self.conn.executescript("""
            CREATE TABLE win AS SELECT tbl, key, id FROM (
                SELECT tbl, key, id, row_number() OVER (PARTITION BY tbl, key
                    ORDER BY rank DESC, verified DESC, id) AS rn
                FROM cand WHERE committed = 1) WHERE rn = 1;
            CREATE UNIQUE INDEX win_key ON win(tbl, key);
        """)

    def copies(self) -> Iterator[dict[str, Any]]:
        """Every copy with its ``superseded`` flag, grouped by table and key."""
        cur = self.conn.execute("""
            SELECT c.tbl, c.key, c.columns, c.data, c.source, c.page, c.frame, c.committed, c.verified,
                   w.id IS NOT NULL AND w.id != c.id
            FROM cand c LEFT JOIN win w ON w.tbl = c.tbl AND w.key = c.key
            ORDER BY c.tbl, c.key, c.rank DESC, c.id""")
        names = ("table", "key", "columns", "data", "source", "page", "frame", "committed", "verified", "superseded")
        for values in cur:
            yield dict(zip(names, values))

    def best_verified(self) -> Iterator[tuple[str, str, dict[str, Any] | None, bytes | None, bool]]:
        """Per committed key: (table, key, columns, data, placeable) of its newest verified copy,
        or columns/data None when no copy verifies."""
        cur = self.conn.execute("""
            SELECT tbl, key, columns, data, verified, anyplace FROM (
                SELECT tbl, key, columns, data, verified,
                       max(placeable) OVER (PARTITION BY tbl, key) AS anyplace,
                       row_number() OVER (PARTITION BY tbl, key ORDER BY verified DESC, rank DESC, id) AS rn
                FROM cand WHERE committed = 1) WHERE rn = 1 ORDER BY tbl, key""")
        for tbl, key, columns, data, verified, anyplace in cur:
            yield (tbl, key, json.loads(columns) if verified else None, data if verified else None, bool(anyplace))

    def close(self) -> None:
        """Close the spool's connection."""
        self.conn.close()


def _raw(column: str) -> str:
    """SQL passing a text column to a Python function as bytes (no UTF-8 decode on the way)."""
    return f"CASE WHEN typeof({column}) = 'text' THEN CAST({column} AS BLOB) ELSE {column} END"


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _key(values: list[Any]) -> str:
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))
