"""salvage on crafted hostile files: work (pages read) and time as the file doubles, and the
WAL checksum's speed (four word pairs a step) against SQLite's one-pair-a-step loop.

    .venv/bin/python bench/salvage_hostile.py [--scales 40,80,160] [--work bench/out/hostile]

The crafted files are those of tests/maintenance/test_salvage_bounded.py: every history leaf of
a real store rewritten as copies of one row with a long overflow chain (``shared-chain``), or as
interior pages all pointing at each other (``tangle``). Linear work means pages_read / file
pages stays flat as the scale doubles. Figures go to stdout; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runtime"))

from steerable_agent_runtime.maintenance.salvage import salvage  # noqa: E402
from steerable_agent_runtime.sqlitefile.wal import wal_checksum  # noqa: E402
from tests.maintenance.test_salvage_bounded import _interior_tangle, _shared_chain  # noqa: E402
from tests.sqlitefile.test_reader import _checksum_one_pair_at_a_time as _one_pair_a_step  # noqa: E402


def hostile(work: Path, scales: list[int]) -> None:
    print("| file | scale | file pages | pages read | read/page | salvage s |")
    print("|---|---|---|---|---|---|")
    for name, craft in (("shared-chain", lambda db, n: _shared_chain(db, n, n)), ("tangle", _interior_tangle)):
        for n in scales:
            folder = work / f"{name}-{n}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            pages = craft(folder / "s.db", n)
            start = time.perf_counter()
            report = salvage(folder / "s.db", folder / "out.jsonl")
            took = time.perf_counter() - start
            print(f"| {name} | {n} | {pages} | {report.pages_read} | {report.pages_read / pages:.2f} | {took:.2f} |")


def checksum(frames: int) -> None:
    pages = [os.urandom(4096) for _ in range(64)]
    timings = {}
    for label, fn in (("one pair a step (wal.c's loop)", _one_pair_a_step), ("four pairs a step", wal_checksum)):
        start = time.perf_counter()
        s = (0, 0)
        for i in range(frames):
            s = fn(pages[i % 64], s[0], s[1], True)
        timings[label] = time.perf_counter() - start
    base = timings["one pair a step (wal.c's loop)"]
    for label, took in timings.items():
        print(f"WAL checksum, {frames} frames of 4 KiB, {label}: {took:.3f} s ({frames * 4 / 1024 / took:.1f} MiB/s,"
              f" {base / took:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="40,80,160")
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "hostile")
    args = parser.parse_args()
    hostile(args.work, [int(x) for x in args.scales.split(",")])
    checksum(args.frames)


if __name__ == "__main__":
    main()
