"""Worker processes for a job that reads a static snapshot in rowid ranges.

Used by salvage's export and check's row pass. Workers are forked, and only from a
single-threaded process: forking copies one thread safely, and unlike ``spawn`` it does not
re-import the caller's ``__main__`` (a script calling the job without a main guard). Where
fork is missing, or the caller already runs threads, the job stays in-process (1 worker).
A worker never uses a connection of the parent: each opens its own in its initializer.
How a job splits its rows is a :class:`Chunking` value the job takes as a parameter (each
job's module holds its measured default), not a module global the code reads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_all_start_methods, get_context
from typing import Any


@dataclass(frozen=True)
class Chunking:
    """How a job splits a static snapshot among forked workers: below ``min_rows_per_worker``
    rows per worker it stays in-process; each task reads about ``chunk_rows`` rows."""

    min_rows_per_worker: int
    chunk_rows: int

    def __post_init__(self) -> None:
        if self.min_rows_per_worker < 1 or self.chunk_rows < 1:
            raise ValueError(f"chunk sizes must be positive: {self}")


def fork_workers(rows: int, min_rows_per_worker: int) -> int:
    """How many processes should read ``rows`` rows (1: stay in-process)."""
    if "fork" not in get_all_start_methods() or threading.active_count() > 1:
        return 1
    return max(1, min(os.cpu_count() or 1, rows // min_rows_per_worker))


def fork_pool(workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...]) -> ProcessPoolExecutor:
    """A pool of ``workers`` forked processes (all forked at the first submit, before the
    pool starts its own thread)."""
    return ProcessPoolExecutor(workers, mp_context=get_context("fork"), initializer=initializer, initargs=initargs)


def rowid_bounds_sql(table: str, *, count: bool = False) -> str:
    """The statement giving ``table``'s (min rowid, max rowid[, row count]) by seeks: each
    aggregate its own subquery, because SQLite answers a lone ``min(rowid)`` or ``max(rowid)``
    with one seek but ``SELECT min(rowid), max(rowid) FROM t`` with a scan of the whole table
    (0.1 s a million rows). ``table`` is a (schema-qualified) name of this build's schema.
    (check's row pass uses it. salvage's span query, spool.span_sql, keeps its one statement:
    that scan reads the whole covering index, and a damaged one there sends salvage to the page
    reader; a parallel export with the check beside it is split by this statement's values and
    runs that scan in the check, salvage.verdict.)"""
    parts = [f"(SELECT min(rowid) FROM {table})", f"(SELECT max(rowid) FROM {table})"]
    if count:
        parts.append(f"(SELECT count(*) FROM {table})")
    return "SELECT " + ", ".join(parts)


MAX_RANGES = 8192
"""At most this many ranges per table: their number stays bounded whatever ``rows`` says (check
estimates it from the rowid bounds, which one row at rowid 2**62 or a damaged b-tree makes
astronomical; the list of ranges once took all the memory). 8,192 ranges of check's 25,000 or
salvage's 2,048 rows are 200M and 16M rows; above that a range holds more rows."""


def rowid_ranges(low: int, high: int, rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    """Split rowids ``low..high`` (``rows`` rows) into consecutive ranges of ~``chunk_rows`` rows,
    at most MAX_RANGES of them; together they cover ``low..high`` exactly, in order."""
    parts = min(MAX_RANGES, max(1, -(-rows // chunk_rows)))
    step = max(1, (high - low + parts) // parts)
    return [(lo, min(high, lo + step - 1)) for lo in range(low, high + 1, step)]
