"""Figures of the issue-16 changes, each against its baseline measured in the same run.

- checksum: ``row_crc`` (schema 2: identity + data) vs ``zlib.crc32(data)`` (schema 1) per
  history row, over the rows of the generated store;
- upgrade: a schema-1 copy of the store upgraded on open (SqliteStorage), in history rows
  per second of the whole open, against ``PRAGMA quick_check`` of the same file (a full read);
- repair: ``repair`` of a copy with 3 zeroed pages vs ``salvage --rebuild`` alone of
  another copy (target: <= 1.5x).

Repetitions alternate (the machine is shared); medians are compared. Usage (repository root)::

    .venv/bin/python bench/harden_bench.py [--chats 100 --entries 500] [--reps 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import make_store  # noqa: E402
from harness import interleave, median  # noqa: E402

from steerable_agent_runtime.maintenance.repair import repair  # noqa: E402
from steerable_agent_runtime.maintenance.salvage import salvage  # noqa: E402
from steerable_agent_runtime.storage.checksum import row_crc  # noqa: E402
from steerable_agent_runtime.storage.sqlite import SqliteStorage  # noqa: E402
from tests.damage import zero_page  # noqa: E402
from tests.storage.legacy import to_schema_v1  # noqa: E402


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _crc_figures(db: Path, reps: int) -> tuple[float, float, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    rows = conn.execute("SELECT record_id, seq, CAST(data AS BLOB) FROM history").fetchall()
    conn.close()

    def keyed(_rep: int) -> float:
        began = time.perf_counter()
        for record_id, seq, data in rows:
            row_crc("history", (record_id, seq), data)
        return time.perf_counter() - began

    def plain(_rep: int) -> float:
        began = time.perf_counter()
        for _record_id, _seq, data in rows:
            zlib.crc32(data)
        return time.perf_counter() - began

    mine, theirs = interleave(reps, keyed, plain)
    return median(mine), median(theirs), len(rows)


def _upgrade_figures(db: Path, work: Path, reps: int) -> tuple[float, float]:
    legacy = _copy(db, work / "legacy.db")
    to_schema_v1(legacy)

    def upgrade(rep: int) -> float:
        target = _copy(legacy, work / f"up-{rep}.db")
        began = time.perf_counter()
        SqliteStorage(target).close_sync()
        took = time.perf_counter() - began
        target.unlink()
        return took

    def quick_check(_rep: int) -> float:
        conn = sqlite3.connect(f"file:{legacy}?mode=ro&immutable=1", uri=True)
        began = time.perf_counter()
        conn.execute("PRAGMA quick_check").fetchall()
        took = time.perf_counter() - began
        conn.close()
        return took

    mine, theirs = interleave(reps, upgrade, quick_check)
    return median(mine), median(theirs)


def _repair_figures(db: Path, work: Path, reps: int) -> tuple[float, float]:
    damaged = _copy(db, work / "damaged.db")
    for seed in (1, 2, 3):
        zero_page(damaged, random.Random(seed))

    def ours(rep: int) -> float:
        folder = work / f"repair-{rep}"
        folder.mkdir()
        target = _copy(damaged, folder / "sessions.db")
        began = time.perf_counter()
        repair(target)
        took = time.perf_counter() - began
        shutil.rmtree(folder)
        return took

    def baseline(rep: int) -> float:
        folder = work / f"salvage-{rep}"
        folder.mkdir()
        target = _copy(damaged, folder / "sessions.db")
        began = time.perf_counter()
        salvage(target, folder / "rows.jsonl", rebuild=folder / "new.db")
        took = time.perf_counter() - began
        shutil.rmtree(folder)
        return took

    mine, theirs = interleave(reps, ours, baseline)
    return median(mine), median(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    info = make_store.cached_store(Path(__file__).parent / "out" / "stores", args.chats, args.entries)
    db, rows = Path(info.path), info.history_rows
    print(f"store: {info.chats} x {info.entries}, {rows:,} history rows, {info.bytes / 2**20:,.0f} MiB")
    keyed, plain, n = _crc_figures(db, args.reps)
    print(f"checksum per history row: row_crc {keyed / n * 1e6:.2f} us vs zlib.crc32(data) {plain / n * 1e6:.2f} us"
          f" ({keyed / plain:.2f}x)")
    with tempfile.TemporaryDirectory(dir=Path(__file__).parent / "out") as tmp:
        up, qc = _upgrade_figures(db, Path(tmp), args.reps)
        print(f"upgrade v1 -> v2 on open: {up:.3f} s ({rows / up:,.0f} history rows/s); PRAGMA quick_check of the"
              f" same file {qc:.3f} s ({up / qc:.2f}x)")
        ours, base = _repair_figures(db, Path(tmp), args.reps)
        print(f"repair (3 zeroed pages) {ours:.3f} s vs salvage --rebuild alone {base:.3f} s: {ours / base:.2f}x"
              " (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
