"""Instructions per batch of 50 (callgrind) of SqliteStorage.append_history vs the baseline's
BEGIN IMMEDIATE / executemany / COMMIT of the same rows, for the runtime of any checkout.

    .venv/bin/python bench/append_instructions.py [TREE ...] [--batches 100]

Each TREE (default: this repository) is a checkout whose ``runtime/`` and ``bench/make_store.py``
are imported (e.g. an unpacked ``git archive`` of an older commit), so before and after are
compared in one run. The append figure's entries (bench/figures_core.py: 50 items of the
generator's text) are appended ``--batches`` times to 20 records (``synchronous=NORMAL``, after 20
warm-up batches); the coroutine is driven directly (append_history never awaits), so no event
loop is counted. Only the measured loop is collected (``--toggle-collect`` on the C iterator that
drives it), so start-up and imports are not counted. Needs valgrind. Unlike CPU time, the counts
do not move with the machine's load.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

INSERT = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)"


def child(tree: Path, side: str, batches: int) -> None:
    sys.path[:0] = [str(tree / "runtime"), str(tree / "bench")]
    import make_store
    from steerable_agent_runtime import SqliteStorage
    from steerable_agent_runtime.history_append import prepare_append
    from steerable_agent_runtime.storage.checksum import row_crc
    from steerable_agent_runtime.storage.schema import create_schema

    text = make_store.TextSource(random.Random(50))
    batch = [{"type": "item", "at": "2026-05-01T00:00:00.000000Z",
              "message": {"role": ("user", "assistant")[i % 2], "content": text.text(text.length())}}
             for i in range(50)]
    work = Path(tempfile.mkdtemp(prefix="append-instr-"))
    if side == "ours":
        store = SqliteStorage(work / "ours.db", synchronous="NORMAL")
        records = [f"r{rep % 20}" for rep in range(batches + 20)]

        def one(rep: int) -> object:
            coro = store.append_history(records[rep], batch)
            try:
                coro.send(None)
            except StopIteration as stop:
                return stop.value
            raise RuntimeError("append_history awaited something")
    else:
        base = sqlite3.connect(work / "base.db", isolation_level=None)
        base.execute("PRAGMA journal_mode = WAL")
        base.execute("PRAGMA synchronous = NORMAL")
        create_schema(base)
        rows = []
        for rep in range(batches + 20):
            record, offset = f"r{rep % 20}", rep * 50
            rows.append([(record, p.seq + offset, p.v, p.type, p.at, p.data,
                          row_crc("history", (record, p.seq + offset), p.data)) for p in prepare_append(record, batch, 1)])

        def one(rep: int) -> object:
            base.execute("BEGIN IMMEDIATE")
            base.executemany(INSERT, rows[rep])
            return base.execute("COMMIT")
    for rep in range(batches, batches + 20):  # warm-up, not collected
        one(rep)
    collections.deque(itertools.starmap(one, [(rep,) for rep in range(batches)]), maxlen=0)


def per_batch(script: str, tree: Path, case: str, batches: int, env: dict[str, str] | None = None) -> int:
    """Instructions per batch of ``script --child TREE CASE BATCHES`` under callgrind, counted
    only inside the C iterator that drives its measured loop (``starmap_next``)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=starmap_next",
                           "--callgrind-out-file=/dev/null", sys.executable, script, "--child", str(tree), case,
                           str(batches)], capture_output=True, text=True, check=True, env=env)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no callgrind total in:\n{done.stderr[-2000:]}")
    return int(found.group(1)) // batches


def count(tree: Path, side: str, batches: int) -> int:
    return per_batch(__file__, tree, side, batches)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    base = count(args.trees[0].resolve(), "base", args.batches)
    print(f"baseline (BEGIN/executemany/COMMIT of the same rows): {base:,} instructions per batch of 50")
    for tree in args.trees:
        ours = count(tree.resolve(), "ours", args.batches)
        print(f"{tree}: append_history {ours:,} per batch of 50, adds {ours - base:,} ({ours / base:.2f}x)")


if __name__ == "__main__":
    main()
