"""Move whole chats from one store to another: copy, verify, commit the copy, then delete.

Works on one connection whose ``main`` is the source and which has the destination attached
as ``dst``; the caller holds both leases (archive and restore do). A chat is its
``sessions``, ``messages`` and ``traces`` rows (by ``chat_id``), its ``history`` record
(``record_id`` = chat id), and the ``spans``/``events`` of those traces (by ``trace_id``).

Guarantees of :func:`move_batch`:
- Rows move byte-identical: every stored column is copied as is (``INSERT ... SELECT``), in
  source rowid order; the destination's own FTS triggers index the copied messages.
- Copy and verify run in one transaction on the destination only; it commits (FULL sync)
  only when every source row of the batch has a destination row with the same key and the
  same bytes in every column. Only then, in a second transaction on the source only, are
  the rows deleted. A crash at any point leaves each row in the source, or in both files
  identical; never in neither.
- Re-run convergence: a row already in the destination and identical is not copied again
  (``INSERT OR IGNORE`` + verify) and the source copy is deleted. A row in both files with
  different bytes is a conflict: the batch is rolled back, nothing is deleted, nothing is
  overwritten, and the conflict (table, key) is returned.

:func:`drop_leftover_copies` handles the other way an interrupted move can be left: the
copy committed, the source delete did not, and by the re-run the chat is no longer
eligible (the app touched it). It deletes from ``dst`` only rows that are byte-identical to
a row the source still holds, in one transaction, so no information can be lost.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from pydantic import BaseModel

from ...errors import SteerableError
from ...storage.access import transaction
from ...storage.schema import TABLES

CHAT_TABLES = ("sessions", "messages", "history", "traces", "spans", "events")
"""Copy order (parents first); deletion runs in the reverse order."""


class RowCounts(BaseModel):
    """Rows per table of the chats a job moved (or would move)."""

    sessions: int = 0
    messages: int = 0
    history: int = 0
    traces: int = 0
    spans: int = 0
    events: int = 0

    @property
    def total(self) -> int:
        """All rows, every table."""
        return sum(getattr(self, t) for t in CHAT_TABLES)

    def add(self, other: "RowCounts") -> None:
        """Add ``other`` into this one, table by table."""
        for table in CHAT_TABLES:
            setattr(self, table, getattr(self, table) + getattr(other, table))


@dataclass
class Conflict:
    """A row present in both files with different bytes: the batch was rolled back."""

    table: str
    key: str


@dataclass
class BatchResult:
    """What one batch did: rows moved, rows that were already in the destination, or a conflict."""

    moved: RowCounts = field(default_factory=RowCounts)
    already: RowCounts = field(default_factory=RowCounts)
    conflict: Conflict | None = None


def prepare(conn: sqlite3.Connection) -> None:
    """Create the temp tables naming the current batch (per connection, in memory)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS move_chats (chat_id TEXT PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS move_traces (trace_id TEXT PRIMARY KEY)")


def load_batch(conn: sqlite3.Connection, chats: list[str]) -> None:
    """Name ``chats`` (and their traces in the source) as the current batch."""
    conn.execute("DELETE FROM temp.move_chats")
    conn.execute("DELETE FROM temp.move_traces")
    conn.executemany("INSERT INTO temp.move_chats (chat_id) VALUES (?)", [(c,) for c in chats])
    conn.execute("INSERT INTO temp.move_traces SELECT trace_id FROM main.traces"
                 " WHERE chat_id IN (SELECT chat_id FROM temp.move_chats)")


def _where(table: str, alias: str = "") -> str:
    spec, col = TABLES[table], (alias + "." if alias else "")
    if spec.chat_column:
        return f"{col}{spec.chat_column} IN (SELECT chat_id FROM temp.move_chats)"
    return f"{col}trace_id IN (SELECT trace_id FROM temp.move_traces)"


def count_rows(conn: sqlite3.Connection) -> RowCounts:
    """Rows of the current batch in the source, per table."""
    return RowCounts(**{t: conn.execute(f"SELECT count(*) FROM main.{t} WHERE {_where(t)}").fetchone()[0]
                        for t in CHAT_TABLES})


def _copy(conn: sqlite3.Connection) -> RowCounts:
    counts = RowCounts()
    for table in CHAT_TABLES:
        cols = ", ".join(TABLES[table].all_columns)
        sql = (f"INSERT OR IGNORE INTO dst.{table} ({cols}) SELECT {cols} FROM main.{table}"
               f" WHERE {_where(table)} ORDER BY rowid")
        setattr(counts, table, conn.execute(sql).rowcount)
    return counts


def _identical(table: str) -> str:
    """SQL: row ``d`` of dst has the same key and the same bytes in every column as ``s``."""
    spec = TABLES[table]
    same = [f"d.{c} = s.{c}" for c in spec.key]
    same += [f"d.{c} IS s.{c}" for c in spec.columns if c not in spec.key]
    same += ["CAST(d.data AS BLOB) = CAST(s.data AS BLOB)", "d.crc = s.crc"]
    return " AND ".join(same)


def _first_mismatch(conn: sqlite3.Connection) -> Conflict | None:
    """The first batch row of the source without a byte-identical row in ``dst``, or None."""
    for table in CHAT_TABLES:
        keys = " || '/' || ".join(f"s.{c}" for c in TABLES[table].key)
        sql = (f"SELECT {keys} FROM main.{table} s WHERE {_where(table, 's')} AND NOT EXISTS"
               f" (SELECT 1 FROM dst.{table} d WHERE {_identical(table)}) LIMIT 1")
        row = conn.execute(sql).fetchone()
        if row is not None:
            return Conflict(table=table, key=str(row[0]))
    return None


def _delete(conn: sqlite3.Connection) -> RowCounts:
    counts = RowCounts()
    for table in reversed(CHAT_TABLES):
        setattr(counts, table, conn.execute(f"DELETE FROM main.{table} WHERE {_where(table)}").rowcount)
    return counts


class _Mismatch(Exception):
    """A copied row differs from the destination's: the batch's copy is rolled back."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict)
        self.conflict = conflict


def move_batch(conn: sqlite3.Connection, chats: list[str]) -> BatchResult:
    """Move ``chats`` from ``main`` to ``dst``: copy + verify, commit, then delete. See module doc."""
    load_batch(conn, chats)
    expected = count_rows(conn)
    try:
        with transaction(conn):
            copied = _copy(conn)
            conflict = _first_mismatch(conn)
            if conflict:
                raise _Mismatch(conflict)  # rolls the copy back
    except _Mismatch as found:
        return BatchResult(conflict=found.conflict)
    _delete_verified(conn, expected)
    already = RowCounts(**{t: getattr(expected, t) - getattr(copied, t) for t in CHAT_TABLES})
    return BatchResult(moved=expected, already=already)


def _delete_verified(conn: sqlite3.Connection, expected: RowCounts) -> None:
    """Delete the batch from the source in one transaction, only if it is exactly what was verified."""
    with transaction(conn):
        deleted = _delete(conn)
        if deleted != expected:
            raise SteerableError(f"the source changed during the move (expected {expected}, found {deleted});"
                                 " nothing was deleted", hint="make sure no other process writes the store"
                                 " without its lease, then re-run")


def chats_in_destination(conn: sqlite3.Connection, chats: list[str]) -> list[str]:
    """The chats of ``chats`` of which ``dst`` holds any session, message, trace or history row."""
    held = " OR ".join(f"EXISTS (SELECT 1 FROM dst.{t} WHERE {TABLES[t].chat_column} = page.chat_id)"
                       for t, spec in TABLES.items() if spec.chat_column)
    sql = f"WITH page(chat_id) AS (SELECT value FROM json_each(?)) SELECT chat_id FROM page WHERE {held}"
    return [row[0] for row in conn.execute(sql, (json.dumps(chats),))]


def drop_leftover_copies(conn: sqlite3.Connection, chats: list[str]) -> RowCounts:
    """Delete from ``dst`` the rows of ``chats`` that the source holds byte-identical; one transaction.

    For chats that stay in the source. A dst row that differs from the source, or that the
    source does not hold, is kept (never destroyed: it may be the only copy).
    """
    load_batch(conn, chats)
    counts = RowCounts()
    with transaction(conn):
        for table in reversed(CHAT_TABLES):
            sql = (f"DELETE FROM dst.{table} WHERE rowid IN (SELECT d.rowid FROM main.{table} s"
                   f" JOIN dst.{table} d ON {_identical(table)} WHERE {_where(table, 's')})")
            setattr(counts, table, conn.execute(sql).rowcount)
    return counts
