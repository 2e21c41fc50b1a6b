"""The spool: every salvaged copy of every row, kept on disk, ranked per key.

Salvage may find several copies of one key (the live b-tree, an older WAL frame, a freed
page). Holding them in memory would make memory grow with the database, so they go into a
private SQLite file in salvage's temp directory (never next to the source). Ranking:

- only committed copies can win; uncommitted WAL copies are reported, never mixed in;
- a copy on the current image of a live page (``rank`` LIVE) beats a page no tree reaches
  (UNALLOCATED), which beats superseded page versions (older WAL frames by frame order,
  database-file images a committed frame replaced, freelist pages);
- ties go to a verified copy.

The winner of a key is its newest committed copy; every other copy is ``superseded``. When
the newest committed copies of a key include two verified ones with different ``data`` (a key
collision: the checksums cannot tell which is right), the key is listed by
:meth:`Spool.collisions` and rebuild places neither.

``version`` is the schema version of the salvaged store (its header's, or this build's when
the header is lost): the checksum rule the copies are verified with (storage/checksum.py).

Fast path: when a sound private copy of the store is attached as ``src``, its rows are the
live copies and are streamed straight from it (``live_copies``), never spooled; only the
other copies (freelist, older WAL frames) go to the spool, where ``mark_live`` flags those
whose key has a live row (they are superseded by it).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ...storage.checksum import covers_key, crc_sql, identity_sql, register
from ...storage.schema import SCHEMA_VERSION, TABLES
from ..readonly import lenient_text
from ..workers import rowid_bounds_sql
from .rows import INDEXED, Row

LIVE, UNALLOCATED, STALE = 3_000_000_000, 2_000_000_000, 0
CHECK_LINES = 20
"""At most this many of quick_check's problems are kept (the first is the one to read)."""


def one_line(value: object, limit: int = 300) -> str:
    """``value`` as text on one line (SQLite may quote multi-line schema SQL), cut to ``limit``."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."

_SCHEMA = """
CREATE TABLE cand (
    id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, key TEXT NOT NULL, columns TEXT NOT NULL, data BLOB,
    source TEXT NOT NULL, page INTEGER, frame INTEGER, committed INTEGER NOT NULL,
    placeable INTEGER NOT NULL, rank INTEGER NOT NULL, verified INTEGER NOT NULL,
    live INTEGER NOT NULL DEFAULT 0
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


def span_sql(table: str) -> str:
    """The statement giving ``table``'s (schema-qualified) min rowid, max rowid and row count
    in one: SQLite answers it with a scan of the table's smallest covering index, so a file
    whose index SQLite cannot read fails it (salvage then reads it with the page reader)."""
    return f"SELECT min(rowid), max(rowid), count(*) FROM {table}"


class Copy(NamedTuple):
    """One stored copy as the export reads it (key and columns are JSON text)."""

    table: str
    key: str
    columns: str
    data: bytes | None
    source: str
    page: int | None
    frame: int | None
    committed: int
    verified: int
    superseded: int


_COPY_SQL = """c.tbl, c.key, c.columns, c.data, c.source, c.page, c.frame, c.committed, c.verified,
    c.live OR (w.id IS NOT NULL AND w.id != c.id) AS superseded
    FROM cand c LEFT JOIN win w ON w.tbl = c.tbl AND w.key = c.key"""


class Spool:
    """Candidate rows on disk (``path``: a new file in a private directory)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path.as_uri(), isolation_level=None, uri=True)
        self.conn.execute("PRAGMA journal_mode = OFF")
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.executescript(_SCHEMA)
        # A damaged text column may hold invalid UTF-8: read it with replacement characters
        # (as the page reader does) instead of failing the whole export.
        self.conn.text_factory = lenient_text
        self.src_uri = ""
        """The URI ``src`` was attached with (export workers open the same)."""
        self.live_tables: list[str] = []
        """Tables read from the attached ``src`` (fast path); their rows are not spooled."""
        register(self.conn)
        self.version = SCHEMA_VERSION
        """The salvaged store's schema version (its checksum rule); set before collecting."""
        self._collisions: set[tuple[str, str]] | None = None
        self._spans: dict[str, tuple[int, int, int]] = {}

    @property
    def keyed(self) -> bool:
        """Whether the salvaged store's checksums cover the key columns."""
        return covers_key(self.version)

    def attach_readonly(self, uri: str, *, check: bool = True) -> list[tuple[str, str]]:
        """Attach the store read-only as ``src`` (``uri``: a ``mode=ro`` private copy, or
        ``immutable=1`` for a source without a -wal) and ask SQLite whether it is sound.

        Returns [] when it is (``src`` stays attached), else what is wrong as (damage code,
        one-line message) pairs, ``src`` detached: ``sqlite_check_failed`` for SQLite
        refusing the file or each problem ``quick_check`` lists (at most CHECK_LINES),
        ``schema_columns_wrong`` for an entity table whose columns are not the store's.
        ``check=False``: without the quick_check (the caller takes SQLite's verdict itself,
        salvage.verdict, before it trusts anything read); [] then says only that SQLite
        opened the file and the columns are the store's.
        """
        self.src_uri = uri
        self._spans.clear()
        try:
            self.conn.execute("ATTACH DATABASE ? AS src", (uri,))
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # SQLite's message may quote damaged bytes
            return [("sqlite_check_failed", f"SQLite refuses to open it: {one_line(exc)}")]
        try:
            lines = [r[0] for r in self.conn.execute(f"PRAGMA src.quick_check({CHECK_LINES})")] if check else ["ok"]
            problems = [("sqlite_check_failed", f"quick_check: {one_line(x)}") for x in lines if x != "ok"]
            if not problems:
                problems = [("schema_columns_wrong", f"table {t} has other columns than a store's")
                            for t in self.schema_mismatches()]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            problems = [("sqlite_check_failed", f"quick_check could not finish: {one_line(exc)}")]
        if problems:
            self.conn.execute("DETACH DATABASE src")
        return problems

    def detach(self) -> None:
        """Detach ``src`` (attached by a successful attach_readonly)."""
        self._spans.clear()
        self.conn.execute("DETACH DATABASE src")

    def source_tables(self) -> list[str]:
        """The entity tables present in the attached copy."""
        rows = self.conn.execute("SELECT name FROM src.sqlite_master WHERE type = 'table'").fetchall()
        return [name for (name,) in rows if name in TABLES]

    def schema_mismatches(self) -> list[str]:
        """The entity tables of the attached copy whose columns are not exactly the expected
        ones (a damaged CREATE statement can still parse, with other names)."""
        wrong = []
        for table, spec in TABLES.items():
            names = tuple(r[1] for r in self.conn.execute(f"PRAGMA src.table_info({table})"))
            if names != spec.all_columns:
                wrong.append(table)
        return wrong

    def _begin(self) -> None:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")

    def add(self, rows: Iterable[tuple[Row, Origin]]) -> int:
        """Store copies; return how many. Keys are spelled by SQLite's json_array, as on the fast path."""
        self._begin()
        by_width: dict[int, list[tuple[Any, ...]]] = {}
        for r, o in rows:
            by_width.setdefault(len(r.key), []).append(
                (r.table, *r.key, json.dumps(r.columns, ensure_ascii=False), r.data, o.source, o.page, o.frame,
                 int(o.committed), int(o.placeable), o.rank, int(r.verified)))
        for width, params in by_width.items():
            self.conn.executemany(
                "INSERT INTO cand (tbl, key, columns, data, source, page, frame, committed, placeable, rank, verified)"
                f" VALUES (?, json_array({', '.join('?' * width)}), ?,?,?,?,?,?,?,?,?)", params)
        return sum(len(p) for p in by_width.values())

    def live_copies(self, table: str) -> Iterator[Copy]:
        """Every row of ``src.table`` (the attached sound copy) as a live b-tree copy, read by
        SQLite, the checksum computed in the same statement."""
        return map(Copy._make, self.conn.execute(live_copies_sql(table, "src", version=self.version)))

    def rowid_span(self, table: str, *, seeks: bool = False) -> tuple[int, int, int]:
        """(min rowid, max rowid, row count) of ``src.table`` (counted once per attach: the
        attached store is a snapshot nobody writes), by span_sql's scan; ``seeks``: by two
        seeks and SQLite's b-tree count instead (the same values from a sound file, ~10x
        faster: for a caller that runs span_sql's scan elsewhere, salvage.verdict)."""
        span = self._spans.get(table)
        if span is None:
            sql = rowid_bounds_sql(f"src.{table}", count=True) if seeks else span_sql(f"src.{table}")
            lo, hi, count = self.conn.execute(sql).fetchone()
            span = self._spans[table] = (lo or 0, hi or 0, count)
        return span

    def mark_live(self) -> None:
        """Flag spooled copies whose key has a row in ``src`` (the live copy supersedes them)."""
        self._begin()
        for table, spec in TABLES.items():
            match = " AND ".join(f"t.{k} = json_extract(cand.key, '$[{i}]')" for i, k in enumerate(spec.key))
            self.conn.execute(f"UPDATE cand SET live = EXISTS (SELECT 1 FROM src.{table} t WHERE {match})"
                              f" WHERE tbl = '{table}'")

    def finish(self) -> None:
        """Commit the candidates and rank them (call once, after the last add)."""
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")
        self.conn.executescript("""
            CREATE TABLE win AS SELECT tbl, key, id FROM (
                SELECT tbl, key, id, row_number() OVER (PARTITION BY tbl, key
                    ORDER BY rank DESC, verified DESC, id) AS rn
                FROM cand WHERE committed = 1 AND NOT live) WHERE rn = 1;
            CREATE UNIQUE INDEX win_key ON win(tbl, key);
            CREATE INDEX cand_key ON cand(tbl, key);
            CREATE TABLE clash AS SELECT tbl, key FROM (
                SELECT tbl, key, data, verified, rank, max(rank) OVER (PARTITION BY tbl, key) AS top
                FROM cand WHERE committed = 1 AND NOT live)
                WHERE rank = top AND verified = 1 GROUP BY tbl, key HAVING count(DISTINCT data) > 1;
        """)
        for table in self.live_tables:
            self._live_clashes(table)

    def _live_clashes(self, table: str) -> None:
        """Add the keys of ``src.table`` held by two verified rows with different data. Only a
        table without a unique index on its key can hold them (a store damaged or rebuilt
        without its primary key), so a sound store pays one PRAGMA per table."""
        spec = TABLES[table]
        for _seq, name, unique, *_rest in self.conn.execute(f"PRAGMA src.index_list({table})"):
            columns = tuple(r[2] for r in self.conn.execute(f"PRAGMA src.index_info('{name}')"))
            if unique and set(columns) == set(spec.key):
                return
        self.conn.execute(
            f"INSERT INTO clash SELECT '{table}', json_array({', '.join(spec.key)}) FROM src.{table}"
            f" WHERE crc IS {crc_sql(table, self.version)}"
            f" GROUP BY {', '.join(spec.key)} HAVING count(DISTINCT CAST(data AS BLOB)) > 1")

    def copies(self, *, live: bool = True) -> Iterator[Copy]:
        """Every copy with its ``superseded`` flag: the live tables' rows (fast path; left
        out with ``live=False``), then the spooled copies grouped by table and key."""
        rows = (c for table in self.live_tables for c in self.live_copies(table)) if live else iter(())
        cur = self.conn.execute(f"SELECT {_COPY_SQL} ORDER BY c.tbl, c.key, c.rank DESC, c.id")
        return itertools.chain(rows, map(Copy._make, cur))

    def best_verified(self) -> Iterator[tuple[str, str, dict[str, Any] | None, bytes | None, bool]]:
        """Per spooled committed key without a live row: (table, key, columns, data,
        placeable) of its newest verified copy, or columns/data None when no copy verifies."""
        cur = self.conn.execute("""
            SELECT tbl, key, columns, data, verified, anyplace FROM (
                SELECT tbl, key, columns, data, verified,
                       max(placeable) OVER (PARTITION BY tbl, key) AS anyplace,
                       row_number() OVER (PARTITION BY tbl, key ORDER BY verified DESC, rank DESC, id) AS rn
                FROM cand WHERE committed = 1 AND NOT live) WHERE rn = 1 ORDER BY tbl, key""")
        for tbl, key, columns, data, verified, anyplace in cur:
            yield (tbl, key, json.loads(columns) if verified else None, data if verified else None, bool(anyplace))

    def stale_verified(self, table: str, key: str) -> tuple[dict[str, Any], bytes] | None:
        """The newest verified committed spooled copy of a key (for a live row that fails
        its checksum), or None."""
        row = self.conn.execute(
            "SELECT columns, data FROM cand WHERE tbl = ? AND key = ? AND committed = 1 AND verified = 1"
            " ORDER BY rank DESC, id LIMIT 1", (table, key)).fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    def history_gaps(self) -> list[tuple[str, int]]:
        """(record_id, entries missing) of every history record whose recovered seqs on live
        or orphaned pages are not contiguous from 1 (after finish; the page-reader path):
        entries lost between (or before) the ones found. Freed and older WAL copies do not
        count: a deleted record leaves partial copies there."""
        return list(self.conn.execute(f"""
            SELECT r, max(s) - count(*) FROM (
                SELECT DISTINCT json_extract(key, '$[0]') AS r, json_extract(key, '$[1]') AS s
                FROM cand WHERE tbl = 'history' AND committed = 1 AND rank >= {UNALLOCATED})
            WHERE typeof(s) = 'integer' AND s >= 1 GROUP BY r HAVING max(s) != count(*) ORDER BY r"""))

    def collisions(self) -> set[tuple[str, str]]:
        """(table, key JSON) of every key whose newest committed copies include two verified
        copies with different data (after finish)."""
        if self._collisions is None:
            self._collisions = set(self.conn.execute("SELECT tbl, key FROM clash"))
        return self._collisions

    def close(self) -> None:
        """Close the spool's connection."""
        self.conn.close()


def live_copies_sql(table: str, schema: str, where: str = "", *, version: int = SCHEMA_VERSION) -> str:
    """SELECT of a sound store's rows of ``table`` as Copy tuples, verified with the checksum
    rule of schema ``version`` (needs storage.checksum.register)."""
    spec = TABLES[table]
    others = [c for c in spec.all_columns if c != "data"]
    columns = "json_object(" + ", ".join(f"'{c}', {c}" for c in others) + ")"
    return (f"SELECT '{table}', json_array({', '.join(spec.key)}), {columns}, CAST(data AS BLOB), 'btree', NULL,"
            f" NULL, 1, crc IS {crc_sql(table, version)}, 0 FROM {schema}.{table} {where}")


def live_rows_sql(table: str, schema: str, after: int | None = None, last: int | None = None) -> str:
    """SELECT of a sound store's rows of ``table`` for the export, in rowid order (rowids
    above ``after`` and up to ``last`` where given): (head, data, crc, rowid, the IDENTITY
    columns as the checksum reads them (storage.checksum.identity_sql: text as its raw
    bytes), the indexed columns in rows.INDEXED order). ``head`` is the line up to the data
    text, ``{"table":...,"key":[...],"columns":{...},"data":"``, with key and columns JSON
    rendered by SQLite (as live_copies_sql renders them), as bytes: SQLite copies invalid
    UTF-8 into them as it is, so the export checks it. The caller checks ``crc`` with the
    rule of the store's schema version (storage.checksum.row_checker)."""
    spec = TABLES[table]
    others = [c for c in spec.all_columns if c != "data"]
    columns = "json_object(" + ", ".join(f"'{c}', {c}" for c in others) + ")"
    head = f"""CAST('{{"table":"{table}","key":' || json_array({', '.join(spec.key)}) || ',"columns":' || {columns}""" \
           """ || ',"data":"' AS BLOB)"""
    indexed = "".join(f", {column}" for column, _field, _absent in INDEXED[table])
    bounds = [f"rowid > {int(after)}"] if after is not None else []
    bounds += [f"rowid <= {int(last)}"] if last is not None else []
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    return (f"SELECT {head}, CAST(data AS BLOB), crc, rowid, {identity_sql(table)}{indexed}"
            f" FROM {schema}.{table}{where} ORDER BY rowid")
