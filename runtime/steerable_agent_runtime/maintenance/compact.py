"""compact: prune old traces (with their spans and events), then VACUUM.

Guarantees:
- Only ``traces`` rows whose ``started_at`` is strictly older than the cutoff go, together
  with the ``spans`` and ``events`` rows carrying their ``trace_id``. ``sessions``,
  ``messages`` and ``history`` are never written.
- Bounded batches: each batch selects at most ``batch_size`` old traces into a temp table,
  in storage (rowid) order with a keyset cursor, and deletes them and their children in one
  transaction. Python memory is flat in the number of traces; no id list is built. Rowid
  order, not time order: a trace's spans and events were written right after it, so a batch
  touches neighbouring pages and no page is rewritten by batch after batch (time order can
  interleave chats across the whole file: ~4x slower on such a store).
- Crash behaviour: every batch is one SQLite transaction with ``synchronous=FULL``; a kill
  leaves whole batches deleted and the rest intact. A re-run converges (it just prunes
  what is left). VACUUM is atomic too (SQLite rewrites through the WAL).
- The write lease is taken first: another holder -> StoreAlreadyOwnedError (exit 3) naming
  its pid, nothing changed. A newer schema -> SchemaTooNewError, file untouched.
- ``dry_run=True`` returns the same report with the counts a real run would delete (and its
  batch count), and changes no byte of the db or ``-wal``.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timedelta

from ..errors import UsageError
from .duration import cutoff_timestamp
from .report import JobReport, Progress, no_progress
from ..storage.access import open_store, refuse_damaged, store_bytes, transaction

_OLD_TRACES = "SELECT trace_id FROM main.traces WHERE started_at < :cutoff"


class CompactReport(JobReport):
    """What compact pruned (or, for a dry run, would prune) and the bytes it freed."""

    job: str = "compact"
    cutoff: str
    batch_size: int
    batches: int = 0
    traces: int = 0
    spans: int = 0
    events: int = 0
    vacuumed: bool = False
    bytes_before: int = 0
    bytes_after: int = 0


def compact(path: str | os.PathLike[str], *, older_than: timedelta, now: datetime | None = None,
            dry_run: bool = False, vacuum: bool = True, batch_size: int = 500,
            progress: Progress | None = None) -> CompactReport:
    """Prune traces older than ``now - older_than`` from the store at ``path``; see the module doc."""
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, not {batch_size}", hint="pass a positive batch size")
    report = CompactReport(path=str(path), dry_run=dry_run, cutoff=cutoff_timestamp(older_than, now),
                           batch_size=batch_size)
    with open_store(path, readonly=dry_run) as conn:
        refuse_damaged(conn, path, "compact")
        report.bytes_before = store_bytes(path)
        if dry_run:
            _count(conn, report)
        else:
            _prune(conn, report, progress or no_progress)
            report.vacuumed = vacuum and _vacuum(conn)
    report.bytes_after = store_bytes(path)
    return report


def _count(conn, report: CompactReport) -> None:
    """Fill the counts (and batch count) a real run would delete, reading only."""
    args = {"cutoff": report.cutoff}
    report.traces = conn.execute(f"SELECT count(*) FROM ({_OLD_TRACES})", args).fetchone()[0]
    for table in ("spans", "events"):
        sql = f"SELECT count(*) FROM main.{table} WHERE trace_id IN ({_OLD_TRACES})"
        setattr(report, table, conn.execute(sql, args).fetchone()[0])
    report.batches = math.ceil(report.traces / report.batch_size)


def _prune(conn, report: CompactReport, progress: Progress) -> None:
    """Delete old traces batch by batch, one transaction per batch, oldest first."""
    args = {"cutoff": report.cutoff, "limit": report.batch_size, "after": -(2**63)}
    total = conn.execute(f"SELECT count(*) FROM ({_OLD_TRACES})", args).fetchone()[0]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS compact_batch (trace_id TEXT PRIMARY KEY, src INTEGER)")
    progress("prune traces", 0, total)
    while _prune_batch(conn, report, args):
        report.batches += 1
        progress("prune traces", report.traces, total)


def _prune_batch(conn, report: CompactReport, args: dict) -> bool:
    """Delete the next batch in one transaction and advance ``args["after"]``; False when none is left."""
    with transaction(conn):
        conn.execute("DELETE FROM temp.compact_batch")
        conn.execute("INSERT INTO temp.compact_batch SELECT trace_id, rowid FROM main.traces"
                     " WHERE rowid > :after AND started_at < :cutoff ORDER BY rowid LIMIT :limit", args)
        last = conn.execute("SELECT max(src) FROM temp.compact_batch").fetchone()[0]
        batch = "trace_id IN (SELECT trace_id FROM temp.compact_batch)"
        for table in ("events", "spans", "traces"):
            deleted = conn.execute(f"DELETE FROM main.{table} WHERE {batch}").rowcount
            setattr(report, table, getattr(report, table) + deleted)
    if last is None:
        return False
    args["after"] = last
    return True


def _vacuum(conn) -> bool:
    """VACUUM when there are free pages to give back; then fold the WAL into the db."""
    if conn.execute("PRAGMA main.freelist_count").fetchone()[0] == 0:
        return False
    conn.execute("VACUUM main")
    conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)")
    return True
