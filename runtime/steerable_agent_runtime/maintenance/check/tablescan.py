"""check's row pass over whole tables, one table at a time, on the job's one snapshot.

:func:`scan_table` scans one table with SQLite's fast strict UTF-8 decoding and, if a key
column holds damaged UTF-8, scans it again decoding leniently (U+FFFD) so the damage becomes
a column-mismatch finding instead of ending the scan. (Lenient decoding on every row costs
about 30% of the row pass, so it is only the fallback.) A read SQLite refuses part-way is
returned as ``error`` with what was counted up to there.

:func:`parallel_scan` scans the same rows in rowid ranges in forked worker processes
(:mod:`..workers`), when the snapshot is static (``immutable`` or a private ``copy``: every
worker reads the same bytes), the caller runs no thread yet and the store is big enough. The
ranges are merged in rowid order with the sequential scan's rules (a table's scan ends at
the first range SQLite could not read to the end), so the findings are the same as in one
process (a test compares both on every fixture and on damaged stores). A range is reached by
seeking, which on a damaged b-tree can pass by pages a full scan meets: check drops the
workers' result and scans in one process when integrity_check finds damage. A live store
read ``shared`` stays in one process and on one snapshot.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ...storage.schema import TABLES
from ...storage.dberrors import kind
from ..codes import FindingLog
from ..workers import Chunking, fork_pool, fork_workers, rowid_bounds_sql, rowid_ranges
from ..readonly import lenient_text
from .integrity import integrity_problems
from .rows import RecordStats, scan_entities, scan_history


@dataclass
class TableScan:
    """What scanning one table found: rows read, findings, record-version stats, a read error."""

    table: str
    rows: int = 0
    log: FindingLog = field(default_factory=lambda: FindingLog(0))
    stats: RecordStats = field(default_factory=RecordStats)
    error: str | None = None


def scan_table(conn: sqlite3.Connection, table: str, max_per_code: int, tick: Callable[[int], None],
               where: str = "") -> TableScan:
    """Scan every row of ``table`` (``where``: only a rowid range; see the module docstring).

    First in ``fetchmany`` batches (rows.py's fast loops); a batched scan that SQLite does not
    read to the end is dropped and the table scanned again row by row, so what is counted and
    found up to a read error is what the row-by-row loop counts and finds."""
    lenient = conn.text_factory
    try:
        for factory, batched in ((str, True), (str, False), (lenient, False)):
            conn.text_factory = factory
            result = TableScan(table, log=FindingLog(max_per_code))
            try:
                result.rows = _scan(conn, result, lambda n: (setattr(result, "rows", n), tick(n)), where, batched)
            except sqlite3.OperationalError as exc:
                if batched or (factory is not lenient and kind(exc) == "decode"):
                    continue
                result.error = str(exc)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # the latter: a garbled error message
                if batched:
                    continue
                result.error = str(exc)
            return result
    finally:
        conn.text_factory = lenient
    raise AssertionError("unreachable")  # pragma: no cover


def _scan(conn: sqlite3.Connection, result: TableScan, tick: Callable[[int], object], where: str,
          batched: bool) -> int:
    if result.table == "history":
        return scan_history(conn, result.log, result.stats, tick, where, batched)
    return scan_entities(conn, TABLES[result.table], result.log, tick, where, batched)


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


CHUNKING = Chunking(min_rows_per_worker=100_000, chunk_rows=25_000)
"""check's default: below 100,000 rows per worker the row pass runs in one process; 25,000
rows per task of a parallel scan."""


class ParallelScan:
    """Rowid ranges being scanned by worker processes; :meth:`results` merges them."""

    def __init__(self, tables: list[str], tasks: list[tuple[str, int, int]], futures: list[Future[TableScan] | None],
                 max_per_code: int, total: int, integrity: Future[list[str]] | None = None) -> None:
        self.tables, self.tasks, self.futures = tables, tasks, futures
        self.max_per_code, self.total = max_per_code, total
        self.integrity = integrity
        """integrity.integrity_problems' answer, when the pool runs it (``parallel_scan(integrity=...)``)."""

    def results(self, progress: Callable[[str, int, int | None], None]) -> list[TableScan]:
        """One TableScan per table, as scan_tables would return them; progress ``("rows", done, total)``."""
        merged = {table: TableScan(table, log=FindingLog(self.max_per_code)) for table in self.tables}
        done = 0
        for index, (table, _lo, _hi) in enumerate(self.tasks):
            part, whole = self.futures[index].result(), merged[table]
            self.futures[index] = None  # merged: let its findings go (memory stays flat in the ranges)
            done += part.rows
            progress("rows", done, max(done, self.total))
            if whole.error is not None:
                continue  # as one process: the table's scan ended at the range SQLite could not read
            whole.rows += part.rows
            whole.log.merge(part.log)
            whole.stats.merge(part.stats)
            whole.error = part.error
        return [merged[table] for table in self.tables]


@contextmanager
def parallel_scan(conn: sqlite3.Connection, uri: str, static: bool, tables: list[str],
                  max_per_code: int, chunking: Chunking | None = None,
                  integrity: str | None = None) -> Iterator[ParallelScan | None]:
    """Start scanning ``tables`` in worker processes (each opens ``uri``), or yield None when
    it should run in one process: the snapshot is not ``static``, the caller runs threads,
    the store is small, or SQLite cannot even read the tables' rowid bounds (the sequential
    scan then reports why). ``chunking``: how to split the rows (default CHUNKING).
    ``integrity``: a pragma (``integrity_check``) the pool runs first, on a connection of its
    own (the ParallelScan's ``integrity`` future). Call it before starting any thread."""
    chunking = chunking or CHUNKING
    spans = _spans(conn, tables) if static else None
    workers = fork_workers(sum(rows for _lo, _hi, rows in spans.values()), chunking.min_rows_per_worker) if spans else 1
    if spans is None or workers == 1:
        yield None
        return
    # An empty table gets one (empty) range too: its scan statement must still be prepared, as
    # the one-process scan does, so a table whose schema SQLite cannot use is reported either way.
    tasks = [(table, lo, hi) for table in tables
             for lo, hi in (rowid_ranges(*spans[table], chunking.chunk_rows) if spans[table][2] else [(0, 0)])]
    with fork_pool(workers, _start_worker, (uri, max_per_code)) as pool:
        first = pool.submit(_integrity, integrity) if integrity is not None else None
        futures: list[Future[TableScan] | None] = [pool.submit(_scan_range, task) for task in tasks]
        try:
            yield ParallelScan(tables, tasks, futures, max_per_code, sum(rows for *_, rows in spans.values()), first)
        finally:
            for future in (first, *futures):
                if future is not None:
                    future.cancel()


def _spans(conn: sqlite3.Connection, tables: list[str]) -> dict[str, tuple[int, int, int]] | None:
    """Per table (min rowid, max rowid, rows estimated from them); None if SQLite refuses."""
    spans = {}
    try:
        for table in tables:
            low, high = conn.execute(rowid_bounds_sql(table)).fetchone()
            spans[table] = (low or 0, high or 0, (high - low + 1) if high is not None else 0)
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return None
    return spans


_worker: dict[str, Any] = {}


def _start_worker(uri: str, max_per_code: int) -> None:
    """Worker start: open the snapshot read-only (after the fork: never share a connection)."""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    conn.text_factory = lenient_text
    _worker.update(conn=conn, max_per_code=max_per_code, uri=uri)


def _integrity(pragma: str) -> list[str]:
    """integrity_problems on a connection of its own, opened as the worker's."""
    conn = sqlite3.connect(_worker["uri"], uri=True, isolation_level=None)
    conn.text_factory = lenient_text
    return integrity_problems(conn, pragma)


def _scan_range(task: tuple[str, int, int]) -> TableScan:
    table, lo, hi = task
    return scan_table(_worker["conn"], table, _worker["max_per_code"], lambda _n: None,
                      f"WHERE rowid BETWEEN {lo} AND {hi}")
