"""CPU per row of check's row pass, table by table, on a bench store (fetch included).

A full check's row pass reads every table in rowid ranges (tablescan.py); this runs the same
batched scan (rows.py ``scan_history`` / ``scan_entities`` with ``batched=True``, on an
``immutable`` connection, as the workers read a quiescent store) over a whole table, in one
process, and reports CPU time per row, best of ``--reps``. The store is the generated
million-entry one by default (``--db`` for another; it must be clean).

``--before RUNTIME`` (the ``runtime`` directory of another checkout, e.g. a ``git worktree``
of an older main) measures that tree too: each round runs one child process per tree, in
alternating order, and the table gives each tree's best per table.

Usage (repository root)::

    .venv/bin/python bench/check_tables.py --work /work/benchcache [--rounds 2] [--reps 3] [--before /tmp/old/runtime]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

TABLES = ["sessions", "traces", "spans", "events", "messages", "history"]
LIMITS = {"messages": 200_000, "history": 200_000}
"""The big tables are read in part (rows 1-200,000 of their rowids): their per-row figure needs no more."""


def child(runtime: str, db: str, reps: int) -> dict[str, float]:
    """Best CPU microseconds per row of each table, with the check code of ``runtime``."""
    sys.path.insert(0, runtime)
    import sqlite3

    from steerable_agent_runtime.maintenance.check import rows
    from steerable_agent_runtime.maintenance.codes import FindingLog
    from steerable_agent_runtime.storage.schema import TABLES as SPECS

    conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?immutable=1", uri=True, isolation_level=None)
    best = {}
    for table in TABLES:
        where = f"WHERE rowid BETWEEN 1 AND {LIMITS[table]}" if table in LIMITS else ""
        times, count = [], 0
        for _ in range(reps):
            log = FindingLog(20)
            start = time.process_time()
            if table == "history":
                count = rows.scan_history(conn, log, rows.RecordStats(), lambda n: None, where, True)
            else:
                count = rows.scan_entities(conn, SPECS[table], log, lambda n: None, where, True)
            times.append(time.process_time() - start)
            if log.counts:
                raise SystemExit(f"{table}: the store has findings: {log.counts}")
        best[table] = min(times) / max(count, 1) * 1e6
        best[f"{table} rows"] = count
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(__file__).parent / "out",
                        help="where the generated stores are cached (WORK/stores)")
    parser.add_argument("--db", help="another clean store (default: the generated 2000 x 500 one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", help="the runtime directory of another checkout")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("child_db", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.child_db, args.reps)))
        return
    # (imported here, not at the top: a child must import only the runtime of its tree)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_store
    from harness import trees_side_by_side

    db = args.db or make_store.cached_store(args.work / "stores", 2000, 500).path
    results = trees_side_by_side(__file__, args.before, args.rounds, [str(db), "--reps", str(args.reps)])
    first = next(iter(results.values()))[0]
    print(f"store: {db}")
    print("| tree | " + " | ".join(f"{t} ({int(first[f'{t} rows']):,} rows)" for t in TABLES) + " |")
    print("|---|" + "---|" * len(TABLES))
    for name, runs in results.items():
        print(f"| {name}, us/row | " + " | ".join(f"{min(run[t] for run in runs):.2f}" for t in TABLES) + " |")


if __name__ == "__main__":
    main()
