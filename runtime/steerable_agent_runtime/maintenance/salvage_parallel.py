"""Export a sound store's live rows with several worker processes (the fast path, sped up).

The private copy salvage made is a static file nobody writes, so the rows of a big table
can be split into rowid ranges, each read, validated and formatted by its own process into
its own part file; the parts are then appended to the output in range order, so the JSONL
is byte-identical to a single-process export. Small stores (or one CPU) stay in-process:
starting workers costs more than it saves.

Guarantees: workers open only the private copy (``mode=ro``), write only their part files
in salvage's private temp directory, and return their tallies; any worker failure is
raised in the caller (the output temp file is then discarded by the caller).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import BinaryIO

from ..storage.schema import row_checksum
from .salvage_output import Tally, merge_tally, write_live
from .salvage_spool import Spool

MIN_ROWS_PER_WORKER = 50_000
"""Below this many live rows per worker, the export runs in-process."""


def worker_count(rows: int) -> int:
    """How many processes to export ``rows`` live rows with (1: in-process).

    Workers are forked, and only from a single-threaded process: forking copies one thread
    safely, and unlike ``spawn`` it does not re-import the caller's ``__main__`` (a script
    calling salvage() without a main guard). Elsewhere the export stays in-process."""
    if "fork" not in get_all_start_methods() or threading.active_count() > 1:
        return 1
    return max(1, min(os.cpu_count() or 1, rows // MIN_ROWS_PER_WORKER))


def export_live(spool: Spool, db: Path, fh: BinaryIO, tmp: Path, progress: Callable[[int], None]) -> Tally:
    """Write every live row of the attached copy ``db`` to ``fh``; return the tally."""
    spans = {table: spool.rowid_span(table) for table in spool.live_tables}
    workers = worker_count(sum(count for _lo, _hi, count in spans.values()))
    tally: Tally = {}
    if workers == 1:
        for table in spool.live_tables:
            write_live(spool.conn, table, "src", fh, tally, progress)
        return tally
    tasks = [(str(db), table, lo, hi, str(tmp / f"part-{i}-{table}.jsonl"))
             for table, (low, high, count) in spans.items() if count
             for i, (lo, hi) in enumerate(_ranges(low, high, workers * 4 if count > MIN_ROWS_PER_WORKER else 1))]
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        for done, ((*_, part), part_tally) in enumerate(zip(tasks, pool.map(_export_range, tasks)), 1):
            merge_tally(tally, part_tally)
            with open(part, "rb") as src:
                shutil.copyfileobj(src, fh, 1 << 20)
            os.unlink(part)
            progress(done)
    return tally


def _ranges(low: int, high: int, parts: int) -> list[tuple[int, int]]:
    step = max(1, (high - low + parts) // parts)
    return [(lo, min(high, lo + step - 1)) for lo in range(low, high + 1, step)]


def _export_range(task: tuple[str, str, int, int, str]) -> Tally:
    """Worker: export rows ``lo..hi`` (rowids) of one table of the private copy to a part file."""
    db, table, lo, hi, part = task
    conn = sqlite3.connect(Path(db).as_uri() + "?mode=ro", uri=True)
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    conn.create_function("row_crc", 1, row_checksum, deterministic=True)
    tally: Tally = {}
    try:
        with open(part, "wb") as fh:
            write_live(conn, table, "main", fh, tally, lambda _n: None, f"WHERE rowid BETWEEN {lo} AND {hi}")
    finally:
        conn.close()
    return tally
