"""When salvage's export starts, its wall time and the CPU of the salvage process and of its
export workers: one run of ``salvage(STORE, OUT)`` (OUT is removed after).

    .venv/bin/python bench/salvage_phases.py STORE [--out /tmp/salvage-phases.jsonl] [--label after]

The start of the export is the time of the first ``export`` progress step (before it: the
page reader's look at the file, attaching it to SQLite and, unless it runs beside the export,
``quick_check``). CPU from ``os.times()`` after the run: ``user + system`` of this process
(the parent, with its threads) and of its waited-for children (the export workers).
Run it alternately with ``PYTHONPATH=<git archive COMMIT>/runtime`` for a before/after pair
(the package is imported as installed, so PYTHONPATH picks the build).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from steerable_agent_runtime.maintenance.salvage import salvage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--out", default="/tmp/salvage-phases.jsonl")
    parser.add_argument("--label", default="run")
    args = parser.parse_args()
    out = Path(args.out)
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    marks: dict[str, float] = {}

    def step(name: str, _done: int, _total: int | None) -> None:
        marks.setdefault(name, time.perf_counter() - start)

    report = salvage(args.store, out, progress=step)
    wall = time.perf_counter() - start
    t = os.times()
    out.unlink(missing_ok=True)
    print(f"{args.label}: {report.rows_written:,} rows ({report.method}), export starts at {marks['export']:.2f} s,"
          f" wall {wall:.2f} s, CPU parent {t.user + t.system:.2f} s, workers {t.children_user + t.children_system:.2f} s"
          f" (user {t.children_user:.2f} s)")


if __name__ == "__main__":
    main()
