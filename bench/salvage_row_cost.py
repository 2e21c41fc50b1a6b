"""Instructions per row of salvage's healthy-store export loop (output.write_live), by table.

Deterministic where wall and CPU times are not (the machine is shared): the script runs
itself under ``valgrind --tool=callgrind`` twice per table, exporting the first ``--rows``
rows and then ``--rows`` more after the same start-up, and prints the difference divided
by the extra rows (start-up and imports cancel out). It reads the store read-only
(``immutable=1``) and writes to memory.

Usage (repository root; valgrind installed):
    .venv/bin/python bench/salvage_row_cost.py [--store bench/out/stores/store-200x500-s1-g3.db]
        [--rows 10000] [--tables history messages]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import io
import re
import sqlite3
import subprocess
import sys

DEFAULT_STORE = "bench/out/stores/store-200x500-s1-g3.db"


def _export(store: str, table: str, rows: int) -> None:
    """Export rowids 1..10 (warm-up), then 11..10+rows, of ``table`` to memory."""
    output = importlib.import_module("steerable_agent_runtime.maintenance.salvage.output")
    readonly = importlib.import_module("steerable_agent_runtime.maintenance.readonly")
    checksum = importlib.import_module("steerable_agent_runtime.storage.checksum")
    conn = sqlite3.connect(f"file:{store}?immutable=1", uri=True)
    conn.text_factory = readonly.lenient_text
    checksum.register(conn)
    out, tally = io.BytesIO(), {}
    # Commits before 8bc6da8 took the range as a WHERE clause (for a before/after comparison).
    ranged = "rowids" in inspect.signature(output.write_live).parameters

    def span(lo: int, hi: int) -> object:
        return (lo, hi) if ranged else f"WHERE rowid BETWEEN {lo} AND {hi}"

    output.write_live(conn, table, "main", out, tally, lambda _n: None, span(1, 10))
    if rows:
        output.write_live(conn, table, "main", out, tally, lambda _n: None, span(11, 10 + rows))


def _instructions(store: str, table: str, rows: int) -> int:
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
                          "--child", table, str(rows), "--store", store], capture_output=True, text=True, check=True)
    match = re.search(r"refs:\s+([\d,]+)", run.stderr)
    if match is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{run.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_STORE)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--tables", nargs="+", default=["history", "messages"])
    parser.add_argument("--child", nargs=2, metavar=("TABLE", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _export(args.store, args.child[0], int(args.child[1]))
        return
    for table in args.tables:
        base = _instructions(args.store, table, 2_000)
        more = _instructions(args.store, table, 2_000 + args.rows)
        print(f"{table}: {(more - base) / args.rows:,.0f} instructions per row (write_live, {args.rows} rows)")


if __name__ == "__main__":
    main()
