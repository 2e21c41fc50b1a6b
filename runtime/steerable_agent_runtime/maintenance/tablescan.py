"""check's row pass over whole tables, one table at a time, on the job's one snapshot.

:func:`scan_table` scans one table with SQLite's fast strict UTF-8 decoding and, if a key
column holds damaged UTF-8, scans it again decoding leniently (U+FFFD) so the damage becomes
a column-mismatch finding instead of ending the scan. (Lenient decoding on every row costs
about 30% of the row pass, so it is only the fallback.) A read SQLite refuses part-way is
returned as ``error`` with what was counted up to there.

Not done, on purpose: scanning rowid ranges in worker processes. ``fork`` is unsafe in a
caller that has threads using SQLite, and ``spawn``/``forkserver`` re-run an unguarded main
module (``python -m steerable_agent_runtime.maintenance``, any script calling check());
a library job that runs on the only copy of a user's chats must not depend on either.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from ..storage.schema import TABLES
from .check_codes import FindingLog
from .rowcheck import RecordStats, scan_entities, scan_history


@dataclass
class TableScan:
    """What scanning one table found: rows read, findings, record-version stats, a read error."""

    table: str
    rows: int = 0
    log: FindingLog = field(default_factory=lambda: FindingLog(0))
    stats: RecordStats = field(default_factory=RecordStats)
    error: str | None = None


def scan_table(conn: sqlite3.Connection, table: str, max_per_code: int, tick: Callable[[int], None]) -> TableScan:
    """Scan every row of ``table`` (see the module docstring)."""
    lenient = conn.text_factory
    try:
        for factory in (str, lenient):
            conn.text_factory = factory
            result = TableScan(table, log=FindingLog(max_per_code))
            try:
                result.rows = _scan(conn, result, lambda n: (setattr(result, "rows", n), tick(n)))
            except sqlite3.OperationalError as exc:
                if factory is not lenient and "decode" in str(exc):
                    continue
                result.error = str(exc)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # the latter: a garbled error message
                result.error = str(exc)
            return result
    finally:
        conn.text_factory = lenient
    raise AssertionError("unreachable")  # pragma: no cover


def _scan(conn: sqlite3.Connection, result: TableScan, tick: Callable[[int], object]) -> int:
    if result.table == "history":
        return scan_history(conn, result.log, result.stats, tick)
    return scan_entities(conn, TABLES[result.table], result.log, tick)


def scan_tables(conn: sqlite3.Connection, tables: list[str], max_per_code: int,
                progress: Callable[[str, int, int | None], None]) -> list[TableScan]:
    """Scan every row of ``tables`` in order; progress is ``("rows", done, total)``."""
    total = sum(_max_rowid(conn, t) for t in tables)
    results: list[TableScan] = []
    done = 0
    for table in tables:
        results.append(scan_table(conn, table, max_per_code, lambda n, base=done: progress("rows", base + n, total)))
        done += results[-1].rows
    progress("rows", done, max(done, total))
    return results


def _max_rowid(conn: sqlite3.Connection, table: str) -> int:
    """The progress total of a table (0 when even that cannot be read: the scan will say why)."""
    try:
        return conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return 0
