"""Where SqliteStorage.append_history's CPU goes, step by step, beside raw executemany (issue 16 item 9).

    .venv/bin/python bench/append_steps.py [--batches 300] [--synchronous NORMAL]

The append figure's entries (bench/figures_core.py: 50 items of the generator's text a batch) go
through the steps of ``SqliteStorage.append_history`` one by one (the write transaction's BEGIN, the
head read, ``sqlite_append.plain_rows``: the rows' text, checksums and the returned dicts, then
``sqlite_append.insert_plain`` (multi-row INSERTs) and COMMIT),
and the same rows through the baseline's BEGIN IMMEDIATE / executemany / COMMIT on a second store
with the same schema and pragmas, alternating batch by batch. Process CPU time per step
(``time.process_time_ns``), medians in microseconds. ``synchronous=NORMAL`` by default, so the
commit waits for no fsync and only CPU is compared.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime"))
sys.path.insert(0, str(ROOT / "bench"))

import make_store  # noqa: E402

from steerable_agent_runtime import SqliteStorage  # noqa: E402
from steerable_agent_runtime.history import RECORD_FORMAT_VERSION  # noqa: E402
from steerable_agent_runtime.storage.sqlite_append import insert_plain, plain_rows  # noqa: E402
from steerable_agent_runtime.storage.schema import create_schema  # noqa: E402

INSERT = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)"


def entries(count: int = 50, seed: int = 50) -> list[dict]:
    text = make_store.TextSource(random.Random(seed))
    return [{"type": "item", "at": "2026-05-01T00:00:00.000000Z",
             "message": {"role": ("user", "assistant")[i % 2], "content": text.text(text.length())}}
            for i in range(count)]


def measure(batches: int, synchronous: str) -> dict[str, float]:
    batch = entries()
    work = Path(tempfile.mkdtemp(prefix="append-steps-"))
    store = SqliteStorage(work / "ours.db", synchronous=synchronous)  # type: ignore[arg-type]
    base = sqlite3.connect(work / "base.db", isolation_level=None)
    base.execute("PRAGMA journal_mode = WAL")
    base.execute(f"PRAGMA synchronous = {synchronous}")
    create_schema(base)
    clock = time.process_time_ns
    steps: dict[str, list[int]] = {}
    try:
        for rep in range(batches):
            record = f"r{rep % 20}"
            t0 = clock()
            txn = store._write()  # the transaction append_history opens (lock, damage mapping, BEGIN)
            conn = txn.__enter__()
            t1 = clock()
            head = conn.execute("SELECT max(seq) FROM history WHERE record_id = ?", (record,)).fetchone()[0]
            t2 = clock()
            rows, _ = plain_rows(record, batch, (head or 0) + 1)  # type: ignore[misc]
            t3 = clock()
            insert_plain(conn, rows)  # multi-row INSERTs; v and type are their constants
            t4 = clock()
            txn.__exit__(None, None, None)
            t5 = clock()
            theirs = [(record, row[1] + 10**9, RECORD_FORMAT_VERSION, "item", *row[2:])  # built before its clock starts
                      for row in rows]
            b0 = clock()
            base.execute("BEGIN IMMEDIATE")
            b1 = clock()
            base.executemany(INSERT, theirs)
            b2 = clock()
            base.execute("COMMIT")
            b3 = clock()
            for name, start, end in (("ours: begin", t0, t1), ("ours: head read", t1, t2),
                                     ("ours: plain_rows (text, CRCs, dicts)", t2, t3), ("ours: insert_plain", t3, t4),
                                     ("ours: commit", t4, t5),
                                     ("baseline: begin", b0, b1), ("baseline: executemany", b1, b2),
                                     ("baseline: commit", b2, b3)):
                steps.setdefault(name, []).append(end - start)
    finally:
        store.close_sync()
        base.close()
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    return {name: statistics.median(values) / 1000 for name, values in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--synchronous", choices=("NORMAL", "FULL"), default="NORMAL")
    args = parser.parse_args()
    load = os.getloadavg()
    result = measure(args.batches, args.synchronous)
    ours = sum(v for k, v in result.items() if k.startswith("ours"))
    theirs = sum(v for k, v in result.items() if k.startswith("baseline"))
    for name, value in result.items():
        print(f"{name:<38} {value:>8.1f} us")
    print(f"{'ours, all steps':<38} {ours:>8.1f} us\n{'baseline, all steps':<38} {theirs:>8.1f} us"
          f"\n{'ours adds':<38} {ours - theirs:>8.1f} us per batch of 50 ({ours / theirs:.2f}x the baseline's CPU)")
    print("load average at start: {:.2f} {:.2f} {:.2f}, end: {:.2f} {:.2f} {:.2f}".format(*load, *os.getloadavg()))


if __name__ == "__main__":
    main()
