"""check's two performance targets, on a generated store, with baselines measured in the same run.

- ``check --quick`` vs ``PRAGMA quick_check`` (target: within 1.5x). Both read the same
  quiescent file the same way (``immutable=1``, what check uses when there is no -wal).
- full check, history rows per second (target: >= 150,000/s): history rows divided by the
  whole check's wall time (integrity_check and every other table included), and, to show
  where the time goes, the history row pass alone against the plain loop
  ``SELECT record_id, seq, CAST(data AS BLOB), crc FROM history`` + ``row_crc`` (the keyed CRC-32) + ``json.loads``.

Repetitions of ours and of the baseline alternate and medians are compared (the machine is
shared). Usage (repository root)::

    .venv/bin/python bench/check_bench.py [--chats 200 --entries 500] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time

from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_store  # noqa: E402

from steerable_agent_runtime.maintenance.check import check  # noqa: E402
from steerable_agent_runtime.storage.checksum import row_crc  # noqa: E402
from steerable_agent_runtime.maintenance.codes import FindingLog  # noqa: E402
from steerable_agent_runtime.maintenance.check.rows import RecordStats, scan_history  # noqa: E402


def _immutable(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.resolve().as_uri()}?immutable=1", uri=True)


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _pairs(reps: int, ours: Callable[[], Any], base: Callable[[], Any]) -> tuple[float, float]:
    """Median seconds of ours and of the baseline, alternating which goes first."""
    mine, theirs = [], []
    for rep in range(reps):
        order = (ours, base) if rep % 2 == 0 else (base, ours)
        times = [_timed(fn) for fn in order]
        mine.append(times[0] if rep % 2 == 0 else times[1])
        theirs.append(times[1] if rep % 2 == 0 else times[0])
    return statistics.median(mine), statistics.median(theirs)


def _quick_check(db: Path) -> None:
    conn = _immutable(db)
    try:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def _raw_history(db: Path) -> None:
    conn = _immutable(db)
    try:
        for record_id, seq, data, crc in conn.execute("SELECT record_id, seq, CAST(data AS BLOB), crc FROM history"):
            assert row_crc("history", (record_id, seq), data) == crc
            json.loads(data)
    finally:
        conn.close()


def _our_history_pass(db: Path) -> None:
    conn = _immutable(db)
    try:
        scan_history(conn, FindingLog(20), RecordStats(), lambda done: None)
    finally:
        conn.close()


def _clean(report: Any) -> Any:
    assert not report.has_errors, report.counts
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    info = make_store.cached_store(Path(__file__).parent / "out" / "stores", args.chats, args.entries)
    db, rows = Path(info.path), info.history_rows
    _clean(check(db))  # warm the OS cache; the generated store must be clean
    quick, pragma = _pairs(args.reps, lambda: _clean(check(db, quick=True)), lambda: _quick_check(db))
    full, raw = _pairs(args.reps, lambda: _clean(check(db)), lambda: _raw_history(db))
    ours_pass, _ = _pairs(args.reps, lambda: _our_history_pass(db), lambda: None)
    print(f"store: {info.chats} x {info.entries}, {rows:,} history rows, {info.bytes / 2**20:,.0f} MiB ({db})")
    print(f"check --quick {quick:.3f} s vs PRAGMA quick_check {pragma:.3f} s: {quick / pragma:.2f}x (target <= 1.5x)")
    print(f"full check {full:.3f} s: {rows / full:,.0f} history rows/s over the whole check (target >= 150,000/s)")
    print(f"history row pass alone {ours_pass:.3f} s: {rows / ours_pass:,.0f} rows/s;"
          f" plain crc32 + json.loads loop {raw:.3f} s: {rows / raw:,.0f} rows/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
