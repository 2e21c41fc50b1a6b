"""check's two performance targets, on a generated store, with baselines measured in the same run.

- ``check --quick`` vs ``PRAGMA quick_check`` (target: within 1.5x). Both read the same
  quiescent file the same way (``immutable=1``, what check uses when there is no -wal).
- full check, history rows per second (target: >= 150,000/s): history rows divided by the
  whole check's wall time (integrity_check and every other table included), and, to show
  where the time goes, the history row pass alone against the plain loop
  ``SELECT record_id, seq, CAST(data AS BLOB), crc FROM history`` + ``row_crc`` (the keyed CRC-32) + ``json.loads``.

Repetitions of ours and of the baseline alternate and medians are compared (the machine is
shared). Usage (repository root)::

    .venv/bin/python bench/check_bench.py [--chats 200 --entries 500] [--reps 5] [--work bench/out]

``--before RUNTIME`` (the ``runtime`` directory of another checkout, e.g. a ``git worktree``
of main) measures only ``check --quick``, before and after side by side: rounds of one child
process per tree, in alternating order, each running ``check(db, quick=True)`` and
``PRAGMA quick_check`` alternately ``--reps`` times; it prints each tree's median wall time
and process CPU time (user + system, all threads) of both, and the CPU check adds::

    .venv/bin/python bench/check_bench.py --before /tmp/before/runtime --rounds 6 --reps 7 --work bench/out
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
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


_CHILD = r"""
import importlib, json, os, sqlite3, statistics, sys, time
db, reps, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
job = importlib.import_module("steerable_agent_runtime.maintenance.check.job")
assert job.__file__.startswith(root), (job.__file__, root)
def base():
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
def ours():
    assert not job.check(db, quick=True).has_errors
ours(); base()
times = {"ours": [], "base": []}
for rep in range(reps):
    for name, fn in ((("ours", ours), ("base", base)) if rep % 2 == 0 else (("base", base), ("ours", ours))):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
print(json.dumps({k: [statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)] for k, v in times.items()}))
"""


def _side_by_side(db: Path, trees: dict[str, str], rounds: int, reps: int) -> None:
    """check --quick of each tree vs PRAGMA quick_check, child processes alternating (see the docstring)."""
    runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name in trees}
    for round_ in range(rounds):
        for name in (list(trees) if round_ % 2 == 0 else list(reversed(trees))):
            env = {**os.environ, "PYTHONPATH": trees[name]}
            child = subprocess.run([sys.executable, "-c", _CHILD, str(db), str(reps), trees[name]], env=env,
                                   capture_output=True, text=True, check=True)
            runs[name].append(json.loads(child.stdout))
    for name, results in runs.items():
        ours_wall, ours_cpu, base_wall, base_cpu = (statistics.median(r[who][i] for r in results)
                                                    for who in ("ours", "base") for i in (0, 1))
        print(f"{name}: check --quick {ours_wall * 1000:.0f} ms wall, {ours_cpu * 1000:.0f} ms CPU;"
              f" PRAGMA quick_check {base_wall * 1000:.0f} ms wall, {base_cpu * 1000:.0f} ms CPU;"
              f" {ours_wall / base_wall:.2f}x wall, +{(ours_cpu - base_cpu) * 1000:.0f} ms CPU ({trees[name]})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path(__file__).parent / "out",
                        help="where the generated stores are cached (WORK/stores)")
    parser.add_argument("--before", help="another checkout's runtime directory: check --quick before/after only")
    parser.add_argument("--rounds", type=int, default=6, help="child processes per tree with --before")
    args = parser.parse_args(argv)
    info = make_store.cached_store(args.work / "stores", args.chats, args.entries)
    db, rows = Path(info.path), info.history_rows
    if args.before:
        after = str(Path(__file__).resolve().parents[1] / "runtime")
        _side_by_side(db, {"before": str(Path(args.before).resolve()), "after": after}, args.rounds, args.reps)
        return 0
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
