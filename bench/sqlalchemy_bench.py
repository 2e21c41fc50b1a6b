"""SqlAlchemyStorage on PostgreSQL: append throughput against raw asyncpg, and 8 writers vs 1.

Starts its own throwaway cluster (tests/pgcluster.py; durable by default: fsync and
synchronous_commit on, like a production server; ``--fast`` turns both off).

1. append, batches of 50: ``SqlAlchemyStorage.append_history(record, 50 entries)`` (advisory
   lock, head read, prepare_append, executemany, commit) against raw asyncpg: one transaction
   with ``executemany`` of the same 50 prepared rows (same bytes, same table, a record of its
   own). Repetitions interleaved (ours first on even ones), medians compared; ratio =
   baseline rate / ours (target <= 2x).
2. writers: total entries/s of 8 writer processes appending batches of 50 at once (to 8
   records, and to one shared record) against one writer process alone, each writer doing
   the same number of batches; time from the first writer's start to the last one's end.

    .venv/bin/python bench/sqlalchemy_bench.py [--fast] [--reps 7] [--batches 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steerable_agent_runtime.history_append import prepare_append  # noqa: E402
from steerable_agent_runtime.storage.checksum import row_crc  # noqa: E402
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage  # noqa: E402

BATCH = 50
INSERT = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES ($1, $2, $3, $4, $5, $6, $7)"


def entries(tag: str, n: int = BATCH) -> list[dict]:
    return [{"type": "item", "message": {"role": "user" if i % 2 else "assistant",
                                         "content": f"{tag} entry {i} " + "lorem ipsum " * 12}} for i in range(n)]


async def append_figure(url: str, reps: int, batches: int) -> dict:
    """Median entries/s of ours and of raw asyncpg over ``reps`` interleaved repetitions."""
    import asyncpg

    store = SqlAlchemyStorage(url)
    await store.open()
    raw = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    ours, base = [], []
    try:
        for rep in range(reps):
            for side in (("ours", "raw") if rep % 2 == 0 else ("raw", "ours")):
                record = f"{side}-{rep}"
                if side == "ours":
                    t = time.perf_counter()
                    for b in range(batches):
                        await store.append_history(record, entries(f"{rep}.{b}"))
                    ours.append(batches * BATCH / (time.perf_counter() - t))
                else:
                    prepared = [prepare_append(record, entries(f"{rep}.{b}"), 1 + b * BATCH) for b in range(batches)]
                    rows = [[(record, p.seq, p.v, p.type, p.at, p.data, row_crc("history", (record, p.seq), p.data)) for p in batch]
                            for batch in prepared]
                    t = time.perf_counter()
                    for batch in rows:
                        async with raw.transaction():
                            await raw.executemany(INSERT, batch)
                    base.append(batches * BATCH / (time.perf_counter() - t))
    finally:
        await raw.close()
        await store.close()
    o, b = statistics.median(ours), statistics.median(base)
    return {"ours_entries_per_s": round(o), "raw_asyncpg_entries_per_s": round(b), "ratio": round(b / o, 2),
            "reps": reps, "batches_per_rep": batches, "batch": BATCH}


def run_writers(url: str, records: list[str], batches: int) -> float:
    """Start one writer process per record name, release them at once; total entries/s."""
    procs = [subprocess.Popen([sys.executable, __file__, "--writer", url, record, str(batches)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for record in records]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out
        spans.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    return len(records) * batches * BATCH / wall


async def writer(url: str, record: str, batches: int) -> None:
    store = SqlAlchemyStorage(url)
    await store.open()
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    for b in range(batches):
        await store.append_history(record, entries(f"{record}.{b}"))
    end = time.time()
    await store.close()
    print(json.dumps({"start": start, "end": end}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="fsync and synchronous_commit off")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", choices=["append", "writers"], help="run one figure")
    parser.add_argument("--writer", nargs=3, metavar=("URL", "RECORD", "BATCHES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        asyncio.run(writer(args.writer[0], args.writer[1], int(args.writer[2])))
        return
    from tests.pgcluster import start_postgres

    pg = start_postgres(durable=not args.fast)
    try:
        url = pg.url(pg.create_database())
        result = {"cluster": "fast (fsync off)" if args.fast else "durable (fsync on)"}
        if args.only != "writers":
            result["append_batches_of_50"] = asyncio.run(append_figure(url, args.reps, args.batches))
        if args.only == "append":
            return print(json.dumps(result, indent=2))
        one = [run_writers(url, [f"solo-{i}"], args.batches) for i in range(3)]
        many = [run_writers(url, [f"w{i}-{k}" for k in range(8)], args.batches) for i in range(3)]
        shared = [run_writers(url, [f"shared-{i}"] * 8, args.batches) for i in range(3)]
        result["writers"] = {
            "one_writer_entries_per_s": round(statistics.median(one)),
            "eight_writers_8_records_entries_per_s": round(statistics.median(many)),
            "eight_writers_1_record_entries_per_s": round(statistics.median(shared)),
            "speedup_8_records": round(statistics.median(many) / statistics.median(one), 2),
            "speedup_1_record": round(statistics.median(shared) / statistics.median(one), 2),
            "batches_per_writer": args.batches, "runs": 3,
        }
    finally:
        pg.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
