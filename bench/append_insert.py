"""CPU of inserting a batch of plain history rows: executemany of INSERT_PLAIN vs insert_plain.

``sqlite_append.insert_plain`` (what SqliteStorage.append_history runs for a batch of plain
items) inserts up to 64 rows with one multi-row ``VALUES`` statement; this measures it beside
``executemany(INSERT_PLAIN, rows)`` (what it replaced) on the same rows: batches of 50, 10, 3
and 1 of the append figure's entries (plain_rows' rows, built before the clock starts), each
variant on its own store with the same schema, alternating batch by batch inside one write
transaction each, ``synchronous=NORMAL`` (no fsync wait: CPU only). Prints the median CPU
microseconds of the insert per batch size.

Usage (repository root)::

    .venv/bin/python bench/append_insert.py [--batches 600]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime"))
sys.path.insert(0, str(ROOT / "bench"))

import make_store  # noqa: E402

from figures_core import baseline_conn  # noqa: E402
from steerable_agent_runtime.storage import sqlite_append  # noqa: E402

SIZES = (50, 10, 3, 1)


def measure(batches: int) -> dict[int, dict[str, float]]:
    text = make_store.TextSource(random.Random(50))
    variants = {"executemany": lambda conn, rows: conn.executemany(sqlite_append.INSERT_PLAIN, rows),
                "insert_plain": sqlite_append.insert_plain}
    clock = time.process_time_ns
    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="append-insert-") as work:
        for size in SIZES:
            batch = [{"type": "item", "at": "2026-05-01T00:00:00.000000Z",
                      "message": {"role": ("user", "assistant")[i % 2], "content": text.text(text.length())}}
                     for i in range(size)]
            stores = {name: baseline_conn(Path(work) / f"{name}-{size}.db", "NORMAL") for name in variants}
            times: dict[str, list[int]] = {name: [] for name in variants}
            try:
                for rep in range(batches):
                    found = sqlite_append.plain_rows(f"r{rep}", batch, 1)
                    assert found is not None
                    for name, insert in variants.items():
                        conn = stores[name]
                        conn.execute("BEGIN IMMEDIATE")
                        start = clock()
                        insert(conn, found[0])
                        times[name].append(clock() - start)
                        conn.execute("COMMIT")
                counts = {name: conn.execute("SELECT count(*) FROM history").fetchone()[0] for name, conn in stores.items()}
                assert set(counts.values()) == {size * batches}, counts
            finally:
                for conn in stores.values():
                    conn.close()
            out[size] = {name: statistics.median(values) / 1000 for name, values in times.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=600)
    args = parser.parse_args()
    print("| rows a batch | executemany, us | insert_plain, us | ratio |")
    print("|---|---|---|---|")
    for size, result in measure(args.batches).items():
        print(f"| {size} | {result['executemany']:.1f} | {result['insert_plain']:.1f} |"
              f" {result['insert_plain'] / result['executemany']:.2f}x |")


if __name__ == "__main__":
    main()
