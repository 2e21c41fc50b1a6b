"""check: find everything wrong with a store, read-only, without stopping at the first problem.

Checks (DESIGN.md, Maintenance): SQLite integrity (``PRAGMA integrity_check``, or
``quick_check`` with ``quick``), schema version and tables, every row's checksum, JSON,
shape and indexed columns (full check only), history seq contiguity, record versions
(newer -> the downgrade triage, v1 -> legacy), orphans, the lease holder, the ``-wal`` size.

Guarantees: reads the store through :func:`read_store` (no lease, no byte changed, no
file created, one read snapshot); counts every finding and keeps the first
``max_per_code`` of each code; a part SQLite cannot read becomes a ``sqlite-integrity``
finding and the other checks still run. A schema newer than this build is a
``schema-too-new`` finding (rows are then not read), never an exception. Raises only what
``open_readonly`` raises for a file that is not a readable store.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...sqlitefile.wal import WalScan, scan_wal
from ...sqlitefile.pinned import open_pinned
from ...storage.access import wal_path
from ...storage.lease import LeaseHolder, lease_holder
from ...storage.schema import SCHEMA_VERSION, TABLES
from ..codes import FindingLog
from ..readonly import ReadOnlyConnection, read_store
from .integrity import integrity_problems
from .orphans import check_orphans
from .records import (DowngradeRecord, check_contiguity, stats_from_columns, version_findings)
from ..report import JobReport, Progress, no_progress
from .rows import RecordStats
from .tablescan import ParallelScan, parallel_scan, scan_tables

DEFAULT_WAL_THRESHOLD = 64 << 20

class CheckReport(JobReport):
    """What check found. ``counts`` has every finding per code; ``findings`` the first N of each."""

    job: str = "check"
    quick: bool = False
    access: str = ""
    schema_version: int = 0
    integrity_ok: bool | None = None
    rows: dict[str, int] = {}
    record_versions: dict[str, int] = {}
    counts: dict[str, int] = {}
    downgrades: list[DowngradeRecord] = []
    lease_holder_pid: int | None = None
    lease_held: bool = False
    wal_bytes: int = 0


def check(path: str | os.PathLike[str], *, quick: bool = False, max_per_code: int = 20,
          wal_threshold_bytes: int = DEFAULT_WAL_THRESHOLD, progress: Progress | None = None) -> CheckReport:
    """Check the store at ``path`` and return every finding (see the module docstring)."""
    tick = progress or no_progress

    def read(conn: ReadOnlyConnection) -> tuple[CheckReport, FindingLog, LeaseHolder | None]:
        log, report = FindingLog(max_per_code), CheckReport(path=str(path), quick=quick)
        report.access, report.schema_version = conn.strategy, conn.user_version
        pragma = "quick_check" if quick else "integrity_check"
        tick(pragma, 0, None)
        present = _readable_tables(conn, log)
        tables = [name for name in TABLES if name in present]
        # The row pass's worker processes are forked first, before any thread starts; when
        # there are, integrity_check is their first task (integrity.py), else it has a thread.
        with parallel_scan(conn, conn.uri, conn.strategy != "shared" and not quick, tables, max_per_code,
                           integrity=pragma) as early, \
                ThreadPoolExecutor(3) as pool:  # SQLite releases the GIL: these run beside the row pass
            integrity = early.integrity if early is not None else pool.submit(
                integrity_problems, conn.sibling(), pragma)
            # /proc/locks can take milliseconds to read (the kernel waits for an RCU grace period
            # after recent file locks): a fixed cost kept off the end of the job
            holder = pool.submit(lease_holder, path)
            # checksums in Python: beside SQLite's work (no thread for a missing or empty -wal)
            wal_scan = pool.submit(_scan_wal, Path(path)) if _wal_bytes(Path(path)) else None
            if present:
                _rows(conn, quick, present, report, log, tick, early, lambda: bool(integrity.result()))
            problems = integrity.result()
        tick(pragma, 1, 1)
        for line in problems:
            log.add("sqlite-integrity", f"{pragma}: {line}")
        report.integrity_ok = not problems
        _wal_frames(wal_scan.result() if wal_scan is not None else None, log)
        return report, log, holder.result()

    report, log, holder = read_store(path, read, allow_newer_schema=True)
    _lease(holder, report, log)
    _wal(Path(path), wal_threshold_bytes, report, log)
    report.counts, report.findings = dict(sorted(log.counts.items())), log.findings
    return report


def _readable_tables(conn: ReadOnlyConnection, log: FindingLog) -> set[str]:
    """The tables whose rows this build can check (none for a newer schema); adds the schema findings."""
    if conn.user_version > SCHEMA_VERSION:
        log.add("schema-too-new", f"schema version {conn.user_version} was written by a newer build (this build"
                f" reads up to {SCHEMA_VERSION}); rows were not checked")
        return set()
    if conn.user_version < SCHEMA_VERSION:
        log.add("schema-too-old", f"schema version {conn.user_version}, this build's is {SCHEMA_VERSION}:"
                " its rows were checked with the checksum rule of their version (data only, not the key columns)")
    present = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for name in TABLES:
        if name not in present:
            log.add("schema-missing-table", f"table {name} is missing; the other tables are still checked",
                    table=name)
    return present & set(TABLES)


def _guarded(log: FindingLog, what: str, job: Callable[[], object]) -> None:
    """Run one read; a part SQLite cannot read is a finding, and check goes on."""
    try:
        job()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # the latter: SQLite's message is garbled too
        log.add("sqlite-integrity", f"{what} could not be read to the end: {exc}")


def _rows(conn: ReadOnlyConnection, quick: bool, present: set[str], report: CheckReport, log: FindingLog,
          tick: Progress, early: ParallelScan | None = None, damaged: Callable[[], bool] = lambda: False) -> None:
    """The row, per-record and orphan passes, their findings added in that order.

    Quick mode runs them all here, beside quick_check's thread: one pass over history's
    key index answers contiguity and the history row count, one over its ``v`` and ``type``
    columns the versions (whose total is that count when every row is usual)."""
    stats = RecordStats()
    tables = [name for name in TABLES if name in present]
    # While worker processes scan the rows, this process runs the per-record and orphan
    # queries; their findings are merged where they would have been added (same report).
    ahead = _ahead(conn, present, log.max_per_code) if early is not None else None
    seqs = FindingLog(log.max_per_code)
    if quick:
        entries = _contiguity(conn, seqs) if "history" in present else None
        for name in tables:
            report.rows[name] = 0
            if name == "history" and entries is not None:
                report.rows[name] = entries
            else:
                _guarded(log, f"table {name}", lambda name=name: _count(conn, name, report))
    else:
        _guarded(log, "row scan", lambda: _scan(conn, tables, report, log, stats, tick, early, damaged))
    if "history" in present:
        if ahead is not None:
            log.merge(ahead[0])
        elif quick:
            log.merge(seqs)
            total = report.rows["history"] if entries is not None else None
            _guarded(log, "history versions", lambda: stats.merge(stats_from_columns(conn, log, total)))
        else:
            _guarded(log, "history seqs", lambda: check_contiguity(conn, log))
        report.record_versions = {str(v): n for v, n in sorted(stats.versions.items(), key=_version_order)}
        report.downgrades = version_findings(conn, stats, log, users="sessions" in present)
    if ahead is not None:
        log.merge(ahead[1])
    else:
        _guarded(log, "orphans", lambda: check_orphans(conn, present, log, report.rows if quick else None))


def _contiguity(conn: ReadOnlyConnection, log: FindingLog) -> int | None:
    """check_contiguity, guarded; the key index's entry count (None: count the table apart)."""
    entries: list[int | None] = [None]

    def run() -> None:
        entries[0] = check_contiguity(conn, log)

    _guarded(log, "history seqs", run)
    return entries[0]


def _ahead(conn: ReadOnlyConnection, present: set[str], max_per_code: int) -> tuple[FindingLog, FindingLog]:
    """The contiguity and orphan findings, each in its own log (run before the row scan's
    results are awaited, merged after them)."""
    seqs, orphans = FindingLog(max_per_code), FindingLog(max_per_code)
    if "history" in present:
        _guarded(seqs, "history seqs", lambda: check_contiguity(conn, seqs))
    _guarded(orphans, "orphans", lambda: check_orphans(conn, present, orphans))
    return seqs, orphans


def _version_order(item: tuple[Any, int]) -> tuple[int, Any]:
    """Numbers first in order, then whatever else a damaged v column holds (text, bytes) by repr."""
    v = item[0]
    return (0, v) if type(v) in (int, float) else (1, repr(v))


def _count(conn: ReadOnlyConnection, name: str, report: CheckReport) -> None:
    report.rows[name] = conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]


def _scan(conn: ReadOnlyConnection, tables: list[str], report: CheckReport, log: FindingLog,
          stats: RecordStats, tick: Progress, early: ParallelScan | None, damaged: Callable[[], bool]) -> None:
    """Every row of ``tables`` (tablescan.py: in worker processes when ``early`` started
    them); a table SQLite stops reading is a finding.

    The workers reach their rowid ranges by seeking, which on a damaged b-tree can pass by
    pages a full scan meets; so when integrity_check finds damage (``damaged()``), their
    result is dropped and the tables are scanned again in one process, as without workers."""
    report.rows.update({name: 0 for name in tables})
    units = early.results(tick) if early is not None else None
    if units is None or damaged():
        units = scan_tables(conn, tables, log.max_per_code, tick)
    for unit in units:
        report.rows[unit.table] += unit.rows
        log.merge(unit.log)
        stats.merge(unit.stats)
        if unit.error is not None:
            log.add("sqlite-integrity", f"table {unit.table} could not be read to the end: {unit.error}",
                    table=unit.table)


def _lease(holder: LeaseHolder | None, report: CheckReport, log: FindingLog) -> None:
    if holder is None:
        return
    report.lease_held, report.lease_holder_pid = True, holder.pid
    who = f"pid {holder.pid}" if holder.pid else "a process whose pid is unknown"
    log.add("lease-held", f"the write lease is held by {who} (found via {holder.method}, without taking it)")


def _wal(path: Path, threshold: int, report: CheckReport, log: FindingLog) -> None:
    try:
        report.wal_bytes = os.stat(wal_path(path)).st_size
    except FileNotFoundError:
        return
    if report.wal_bytes > threshold:
        log.add("wal-large", f"-wal is {report.wal_bytes} bytes, past the {threshold}-byte threshold")


def _wal_bytes(path: Path) -> int:
    """The -wal's size (0 when there is none: nothing to scan; a non-regular file is left
    to _scan_wal, which refuses it)."""
    try:
        st = os.stat(wal_path(path))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 1


def _scan_wal(path: Path) -> WalScan | None:
    """The source's -wal read and classified frame by frame (sqlitefile.wal; read-only, the
    -wal's own file, the db file's header for its page size); None when there is none."""
    name = wal_path(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            return None  # never open a FIFO or device (it could block): the store's opener refuses those
        with open_pinned(name) as wal, open_pinned(path) as db:  # SQLite has them open in this process
            header = db.read(18)
            raw = int.from_bytes(header[16:18], "big") if len(header) == 18 else 0
            return scan_wal(wal, os.fstat(wal.fileno()).st_size, 65536 if raw == 1 else raw or None)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None


def _wal_frames(scan: WalScan | None, log: FindingLog) -> None:
    """A -wal whose frames stop verifying before its end: SQLite reads frames up to the first
    bad one (or none, when the header's checksum fails), so the committed transactions after
    it are invisible to it, to integrity_check and to the app. The page reader's WAL scan
    tells that from a torn uncommitted tail, which is not damage."""
    if scan is None:
        return
    frames = len(scan.frames)
    if scan.broken_at is not None:
        log.add("wal-frames-stop-verifying", f"-wal frame {scan.broken_at} of {frames} fails its checksum and"
                " committed transactions follow it: SQLite does not see them")
    elif scan.damage["wal_header_damaged"] and scan.committed_frames:
        log.add("wal-frames-stop-verifying", f"the -wal header fails its checksum: SQLite ignores all {frames}"
                f" frames, {scan.committed_frames} of them committed")
