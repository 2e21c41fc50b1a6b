"""Export a sound store's live rows with several worker processes (the fast path, sped up).

The store salvage reads is a static file nobody writes, so the rows of a big table can be
split into rowid ranges of about ``CHUNKING.chunk_rows`` rows, each read, validated and formatted by a
worker process. Each worker writes its rendered chunk straight into the output file, in
turn (chunk ``i`` after chunk ``i - 1``: a shared counter under a lock), so the JSONL is
byte-identical to a single-process export and every byte is written once: no part files,
no pipes. Small stores (or one CPU) stay in-process: starting workers costs more than it
saves.

SQLite's ``quick_check`` may run beside the workers, in a thread of the parent started once
they are forked (export_live's ``check``): the export is then returned only after it passed.
Another thread writes the output's pages back to disk while the workers write it
(privatefile.Writeback: the final fsync then has only the tail left to write).

Guarantees: workers open only the store file salvage reads (``mode=ro``, or
``immutable=1`` where salvage reads the source in place) and write only the caller's
output file; a worker failure stops the others and is raised in the caller (the output
temp file is then discarded by the caller). Memory stays flat in the store's size: each
worker holds one chunk, and the caller keeps at most four tasks per worker in flight.
"""

from __future__ import annotations

import io
import os
import sqlite3
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, BinaryIO

from ...errors import SteerableError
from ...privatefile import Writeback
from ...storage.checksum import register
from ..workers import Chunking, fork_pool, fork_workers, rowid_ranges
from ..readonly import lenient_text
from .output import Tally, merge_tally, write_live
from .spool import Spool
from .verdict import BesideCheck

CHUNKING = Chunking(min_rows_per_worker=50_000, chunk_rows=2_048)
"""salvage's export default: below 50,000 live rows per worker it runs in-process; 2,048 rows
per task, about 1.5 MB of JSONL for typical history rows (a worker holds one chunk).
Measured on 1M entries, 2 workers: 2,048 rows 5.9 s, 4,096 6.0 s, 8,192 6.4 s (smaller
chunks leave less idle time waiting for a turn and at the end)."""


def worker_count(rows: int, chunking: Chunking | None = None) -> int:
    """How many processes to export ``rows`` live rows with (1: in-process; see maintenance.workers)."""
    return fork_workers(rows, (chunking or CHUNKING).min_rows_per_worker)


def live_rows(spool: Spool, *, seeks: bool = False) -> int:
    """How many live rows the attached store's entity tables hold (what worker_count is given;
    ``seeks``: see Spool.rowid_span)."""
    return sum(spool.rowid_span(table, seeks=seeks)[2] for table in spool.live_tables)


class Unsound(Exception):
    """SQLite's check, run beside the export, did not pass: the export is to be thrown away."""


def export_live(spool: Spool, uri: str, fh: BinaryIO, progress: Callable[[int], None],
                chunking: Chunking | None = None, check: BesideCheck | None = None) -> Tally:
    """Write every live row of the attached store (``uri``: how workers open it) to ``fh``;
    return the tally. ``chunking``: how to split the rows (default CHUNKING).

    ``check``: SQLite's verdict on the store, not yet taken: it runs beside the workers
    (before the export when it stays in-process), and Unsound is raised when it fails, also
    when the export itself failed meanwhile (a damaged file's read error is then the check's
    to report); the export's own error is raised only after the check passed."""
    chunking = chunking or CHUNKING
    spans = {table: spool.rowid_span(table) for table in spool.live_tables}
    workers = worker_count(sum(count for _lo, _hi, count in spans.values()), chunking)
    tally: Tally = {}
    if check is not None and workers == 1 and not check.wait():
        raise Unsound()
    if workers == 1:
        for table in spool.live_tables:
            write_live(spool.conn, table, "src", fh, tally, progress, version=spool.version)
        return tally
    tasks = ((table, lo, hi) for table, (low, high, count) in spans.items() if count
             for lo, hi in rowid_ranges(low, high, count, chunking.chunk_rows))
    fh.flush()  # the workers write through the same open file, after what is already in it
    ctx = get_context("fork")
    turn = _Turn(ctx.Condition(), ctx.Value("q", 0, lock=False), ctx.Value("b", False, lock=False), os.getpid())
    pending: deque[Future[Tally]] = deque()  # in chunk order; at most 4 per worker, so memory stays flat
    done = 0
    beside = check if workers > 1 else None  # (workers == 1: the check has passed above)
    writeback = Writeback(fh.fileno())
    with fork_pool(workers, _start_worker, (uri, fh.fileno(), turn, spool.version)) as pool:
        try:
            for index, task in enumerate(tasks):
                pending.append(pool.submit(_export_range, index, task))
                if index == 0:  # the workers are forked at the first submit: threads may start now
                    writeback.start()
                    if beside is not None:
                        beside.start()
                while len(pending) >= 4 * workers or (pending and pending[0].done()):
                    merge_tally(tally, pending.popleft().result())
                    done += 1
                    progress(done)
                if beside is not None and beside.failed():
                    raise Unsound()
            while pending:
                merge_tally(tally, pending.popleft().result())
                done += 1
                progress(done)
            if beside is not None and not beside.wait():
                raise Unsound()
            writeback.stop()
        except Exception as exc:
            turn.fail()
            writeback.stop(check=False)
            if beside is not None and not isinstance(exc, Unsound) and not beside.wait():
                raise Unsound() from None  # a damaged file: the check's verdict, not the read error
            raise _cause(exc, pending) from None
        except BaseException:
            turn.fail()
            writeback.stop(check=False)
            if beside is not None:
                beside.stop()
            raise
    fh.seek(0, os.SEEK_END)
    return tally


class _Stopped(RuntimeError):
    """A worker gave up because another one failed (never the cause itself)."""


def _cause(exc: BaseException, pending: deque[Future[Tally]]) -> BaseException:
    """What to raise when the export failed with ``exc`` (the first chunk, in order, whose
    result failed): when that chunk only stopped because a later one failed, the later
    chunk's own error (a read error there is then handled as a read error, not as a bug);
    a worker that died outright (killed, out of memory) as a one-line SteerableError."""
    if isinstance(exc, _Stopped):
        for future in pending:
            cause = future.exception()
            if cause is not None and not isinstance(cause, _Stopped):
                exc = cause
                break
    if isinstance(exc, BrokenProcessPool):
        return SteerableError("salvage: an export worker process died (killed, or out of memory); nothing was"
                              " written", hint="re-run salvage; if it keeps happening, check the system log")
    return exc


class _Turn:
    """Whose chunk goes into the output next: ``next`` (a chunk index) under ``cond``;
    ``failed`` set by anyone who gives up, so nobody waits for a chunk that never comes."""

    def __init__(self, cond: Any, next_index: Any, failed: Any, parent: int) -> None:
        self.cond, self.next, self.failed, self.parent = cond, next_index, failed, parent

    def fail(self) -> None:
        with self.cond:
            self.failed.value = True
            self.cond.notify_all()

    def write(self, index: int, fd: int, chunk: memoryview) -> None:
        """Wait for chunk ``index``'s turn, append it at the file's (shared) offset, pass the turn."""
        with self.cond:
            while self.next.value != index:
                if self.failed.value or os.getppid() != self.parent:
                    raise _Stopped("salvage export stopped: another export worker failed")
                self.cond.wait(timeout=1.0)
            try:
                while chunk:
                    chunk = chunk[os.write(fd, chunk):]
            except BaseException:
                self.failed.value = True
                self.cond.notify_all()
                raise
            self.next.value = index + 1
            self.cond.notify_all()


_worker: dict[str, Any] = {}


def _start_worker(uri: str, fd: int, turn: _Turn, version: int) -> None:
    """Worker start: open the store read-only (after the fork: never share a connection);
    ``version``: the store's schema version (its checksum rule)."""
    conn = sqlite3.connect(uri, uri=True)
    conn.text_factory = lenient_text
    register(conn)
    _worker.update(conn=conn, fd=fd, turn=turn, version=version)


def _export_range(index: int, task: tuple[str, int, int]) -> Tally:
    """Worker: render rows ``lo..hi`` (rowids) of one table, write them in turn; the tally."""
    table, lo, hi = task
    turn: _Turn = _worker["turn"]
    tally: Tally = {}
    out = io.BytesIO()
    try:
        write_live(_worker["conn"], table, "main", out, tally, lambda _n: None, (lo, hi), version=_worker["version"])
    except BaseException:
        turn.fail()
        raise
    turn.write(index, _worker["fd"], out.getbuffer())
    return tally
