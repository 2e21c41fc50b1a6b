"""The floor under salvage's healthy-store export: what any export that reads and checks every row costs.

    .venv/bin/python bench/salvage_floor.py STORE [--reps 3] [--recover bench/out/salvage/sqlite3-recover]

Issue 16 item 9 asks for salvage of a healthy store in <= 0.5x the time of SQLite's ``.recover``.
This script times, side by side and interleaved, on the same store (read with ``immutable=1``):

- ``recover``: the ``.recover`` shell (SQL to a file), the baseline;
- ``salvage``: ``steerable-maint salvage STORE --out FILE`` as a user runs it;
- ``floor``: the least a verifying export does, in as many forked processes as salvage's export
  uses (one per core): ``PRAGMA quick_check`` in the parent (SQLite's verdict, which salvage needs
  before it trusts SQLite's reading), beside it each worker reading its half of every table with
  the export's own SELECT (output.live_rows_sql: SQLite renders the line head), parsing each
  ``data`` once (``pydantic_core.from_json``), taking one CRC-32 of it (``zlib.crc32``) and writing
  the line to memory. No validity test, no timestamp check, no key in the checksum, no escaping,
  no output file, no Python start-up: less than a correct export does;
- ``fetch``: the same without the parse and the CRC (the rows into Python and nothing else).

Wall times in seconds, medians of ``--reps``; the ratios are against ``recover``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime"))

from pydantic_core import from_json  # noqa: E402

from steerable_agent_runtime.maintenance.salvage.spool import live_rows_sql  # noqa: E402
from steerable_agent_runtime.storage.schema import TABLES  # noqa: E402

TAIL = b'","source":"btree","page":null,"frame":null,"committed":true,"verified":true,"valid":true,"superseded":false}\n'


def _worker(uri: str, parts: list[tuple[str, int, int]], parse: bool) -> None:
    conn = sqlite3.connect(uri, uri=True)
    out = io.BytesIO()
    write = out.write
    for table, lo, hi in parts:
        for row in conn.execute(live_rows_sql(table, "main", lo - 1, hi)):
            data = row[1]
            if parse:
                from_json(data)
                zlib.crc32(data)
            write(row[0] + data + TAIL)
            if out.tell() > 1 << 24:
                out.seek(0)
                out.truncate()
    os._exit(0)


def floor(store: str, parse: bool, workers: int) -> float:
    """Wall time of quick_check beside ``workers`` forked readers of every row."""
    uri = f"file:{store}?immutable=1"
    probe = sqlite3.connect(uri, uri=True)
    spans = {t: probe.execute(f"SELECT min(rowid), max(rowid) FROM {t}").fetchone() for t in TABLES}
    probe.close()
    shares: list[list[tuple[str, int, int]]] = [[] for _ in range(workers)]
    for table, (low, high) in spans.items():
        if low is None:
            continue
        step = -(-(high - low + 1) // workers)
        for i in range(workers):
            lo = low + i * step
            if lo <= high:
                shares[i].append((table, lo, min(high, lo + step - 1)))
    started = time.perf_counter()
    pids = []
    for share in shares:
        pid = os.fork()
        if pid == 0:
            _worker(uri, share, parse)
        pids.append(pid)
    conn = sqlite3.connect(uri, uri=True)
    verdict = conn.execute("PRAGMA quick_check").fetchall()
    conn.close()
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if status:
            raise SystemExit(f"a reader failed: status {status}")
    elapsed = time.perf_counter() - started
    if verdict != [("ok",)]:
        raise SystemExit(f"quick_check: {verdict[:3]}")
    return elapsed


def timed(cmd: list[str], stdout: str) -> float:
    started = time.perf_counter()
    with open(stdout, "wb") as fh:
        subprocess.run(cmd, stdout=fh, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--recover", default=str(ROOT / "bench/out/salvage/sqlite3-recover"))
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    workers = max(1, os.cpu_count() or 1)
    work = Path(tempfile.mkdtemp(prefix="salvage-floor-"))
    maint = str(Path(sys.executable).with_name("steerable-maint"))
    samples: dict[str, list[float]] = {"recover": [], "salvage": [], "floor": [], "fetch": []}
    try:
        for _ in range(args.reps):
            copy = work / "recover.db"
            shutil.copyfile(args.store, copy)  # .recover opens the file with SQLite: a copy (not timed)
            samples["recover"].append(timed([args.recover, "-readonly", str(copy), ".recover"], str(work / "r.sql")))
            copy.unlink()
            out = work / "s.jsonl"
            out.unlink(missing_ok=True)
            samples["salvage"].append(timed([maint, "salvage", args.store, "--out", str(out)], os.devnull))
            out.unlink()
            samples["floor"].append(floor(args.store, True, workers))
            samples["fetch"].append(floor(args.store, False, workers))
    finally:
        shutil.rmtree(work)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    result = {"store": args.store, "workers": workers, "reps": args.reps, "load": os.getloadavg()[0],
              "seconds": medians, "samples": samples,
              "ratio_vs_recover": {k: medians[k] / medians["recover"] for k in medians}}
    for name, seconds in medians.items():
        print(f"{name:8s} {seconds:7.2f} s  {result['ratio_vs_recover'][name]:.2f}x of .recover")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
