"""CPU per batch of 50 of SqliteStorage.append_history vs executemany, for the runtime of any checkout.

    .venv/bin/python bench/append_cpu.py [TREE] [--batches 200]

TREE (default: this repository) is a checkout whose ``runtime/`` and ``bench/make_store.py`` are
imported, so two checkouts (e.g. a ``git worktree`` of an older commit) can be compared side by
side by alternating runs. The append figure's entries (bench/figures_core.py) are appended in
batches of 50 by ``append_history`` and, alternating batch by batch, the same rows (prepared and
checksummed before the clock starts) by BEGIN IMMEDIATE / executemany / COMMIT on a second store
with the same schema; ``synchronous=NORMAL``, so no commit waits for an fsync and only CPU is
compared (``time.process_time``). Prints the medians as JSON, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

INSERT = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path[:0] = [str(tree / "runtime"), str(tree / "bench")]
    import make_store
    import steerable_agent_runtime
    from steerable_agent_runtime import SqliteStorage
    try:
        from steerable_agent_runtime.history_append import prepare_append
    except ImportError:  # a checkout from before the append path had its own module
        from steerable_agent_runtime.history import prepare_append
    from steerable_agent_runtime.storage.checksum import row_crc
    from steerable_agent_runtime.storage.schema import create_schema

    if not Path(steerable_agent_runtime.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"imported {steerable_agent_runtime.__file__}, not the runtime of {tree}")
    text = make_store.TextSource(random.Random(50))
    batch = [{"type": "item", "at": "2026-05-01T00:00:00.000000Z",
              "message": {"role": ("user", "assistant")[i % 2], "content": text.text(text.length())}}
             for i in range(50)]
    work = Path(tempfile.mkdtemp(prefix="append-cpu-"))
    store = SqliteStorage(work / "ours.db", synchronous="NORMAL")
    base = sqlite3.connect(work / "base.db", isolation_level=None)
    base.execute("PRAGMA journal_mode = WAL")
    base.execute("PRAGMA synchronous = NORMAL")
    create_schema(base)
    loop = asyncio.new_event_loop()
    clock = time.process_time
    ours, theirs = [], []
    load = os.getloadavg()
    try:
        for rep in range(args.batches):
            record = f"r{rep % 20}"
            started = clock()
            loop.run_until_complete(store.append_history(record, batch))
            ours.append(clock() - started)
            rows = [(record, p.seq + 10**9 + rep * 50, p.v, p.type, p.at, p.data,
                     row_crc("history", (record, p.seq + 10**9 + rep * 50), p.data))
                    for p in prepare_append(record, batch, 1)]
            started = clock()
            base.execute("BEGIN IMMEDIATE")
            base.executemany(INSERT, rows)
            base.execute("COMMIT")
            theirs.append(clock() - started)
    finally:
        loop.close()
        store.close_sync()
        base.close()
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    mine, other = statistics.median(ours) * 1e6, statistics.median(theirs) * 1e6
    print(json.dumps({"tree": str(tree), "ours_us_per_batch": round(mine, 1), "baseline_us_per_batch": round(other, 1),
                      "ours_adds_us": round(mine - other, 1), "cpu_ratio": round(mine / other, 2),
                      "load_average": {"start": load, "end": os.getloadavg()}}))


if __name__ == "__main__":
    main()
