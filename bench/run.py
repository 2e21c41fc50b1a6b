"""Run every benchmark and print one table: figure, ours, baseline, ratio, target, met.

Each baseline is measured in the same run, on the same data, with repetitions interleaved
with ours; the table compares medians. Figures whose maintenance module is missing print
"not available: <reason>" instead of a number. Nothing here is a timed assertion: the
table reports, it does not fail the run (exit 0 even when a target is missed; exit 1 only
when a figure crashed).

Usage:
    python bench/run.py                      # full: 2,000 chats x 500 entries (a million)
    python bench/run.py --small              # smoke run: 50 x 400, a minute or two
    python bench/run.py --only append,resume --out results.json
    python bench/run.py --chats 400 --entries 500 --work /tmp/bench

Generated stores are cached under WORK/stores (default bench/out/stores) by size, seed
and generator version, so a second run skips generation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures_core  # noqa: E402
import figures_maint  # noqa: E402
import make_store  # noqa: E402
from harness import Row, Settings, log  # noqa: E402

FIGURES = {
    "append": figures_core.append_rows,
    "resume": figures_core.resume_rows,
    "search": figures_core.search_rows,
    "check": figures_maint.check_rows,
    "compact": figures_maint.compact_rows,
    "archive": figures_maint.archive_rows,
    "salvage": figures_maint.salvage_rows,
    "rss": figures_maint.rss_rows,
    "repair": figures_maint.repair_rows,
}
COLUMNS = ("figure", "ours", "baseline", "ratio", "target", "met")


def settings_from(args: argparse.Namespace) -> Settings:
    if args.small:
        base = Settings(work=args.work, chats=make_store.SMALL_CHATS, entries=make_store.SMALL_ENTRIES,
                        resume_prefix=20_000, append_entries={1: 100, 50: 1000}, reps=3, heavy_reps=1,
                        like_queries=100)
    else:
        base = Settings(work=args.work, chats=make_store.DEFAULT_CHATS, entries=make_store.DEFAULT_ENTRIES,
                        resume_prefix=1_000_000, append_entries={1: 300, 50: 5000}, reps=5, heavy_reps=3,
                        like_queries=20)
    base.chats = args.chats or base.chats
    base.entries = args.entries or base.entries
    base.resume_prefix = args.resume_prefix or base.resume_prefix
    base.reps = args.reps or base.reps
    base.heavy_reps = args.heavy_reps or base.heavy_reps
    base.like_queries = args.like_queries if args.like_queries is not None else base.like_queries
    base.profile = args.profile
    base.recover_shell = args.recover_shell
    if args.repair_store:
        base.repair_chats, base.repair_entries = (int(n) for n in args.repair_store.lower().split("x"))
    return base


def run(settings: Settings, only: list[str]) -> tuple[list[Row], bool]:
    rows: list[Row] = []
    crashed = False
    for name in only:
        log(f"[{time.strftime('%H:%M:%S')}] {name} ...")
        started = time.perf_counter()
        try:
            rows.extend(FIGURES[name](settings))
        except Exception as exc:  # one broken figure must not hide the others; it is reported
            crashed = True
            log(traceback.format_exc())
            rows.append(Row(figure=name, met=f"ERROR: {type(exc).__name__}: {str(exc)[:200]}"))
        log(f"[{time.strftime('%H:%M:%S')}] {name} done in {time.perf_counter() - started:.1f} s")
    return rows, crashed


def cells(row: Row) -> list[str]:
    ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
    return [row.figure, row.ours, row.baseline, ratio, row.target, row.met]


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (readable as plain text too)."""
    grid = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(COLUMNS))]
    fmt = lambda line: "| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |"  # noqa: E731
    out = [fmt(grid[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt(line) for line in grid[1:]]
    return "\n".join(out)


def notes(rows: list[Row]) -> str:
    return "\n".join(f"- {r.figure}: {r.note}" for r in rows if r.note)


def machine() -> dict[str, str]:
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"cores": str(os.cpu_count()), "cpu": cpu, "memory": mem, "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--only", help=f"comma-separated figures: {','.join(FIGURES)}")
    parser.add_argument("--out", type=Path, help="also write the rows and raw timings as JSON here")
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "out",
                        help="where stores are cached and scratch files go (default bench/out)")
    parser.add_argument("--chats", type=int, help="chats in the main store")
    parser.add_argument("--entries", type=int, help="history entries per chat")
    parser.add_argument("--resume-prefix", type=int, help="entries before the boundary in the resume record")
    parser.add_argument("--reps", type=int, help="repetitions of the cheap figures")
    parser.add_argument("--heavy-reps", type=int, help="repetitions of check/compact/archive/salvage/rss")
    parser.add_argument("--like-queries", type=int, help="how many of the queries the LIKE baseline runs")
    parser.add_argument("--recover-shell", help="a sqlite3 shell with a working .recover")
    parser.add_argument("--repair-store", help="CHATSxENTRIES of the repair figure's own store (default 20x200)")
    parser.add_argument("--profile", action="store_true", help="cProfile the first run of ours: WORK/profile-*.txt")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",")] if args.only else list(FIGURES)
    unknown = [name for name in only if name not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    settings = settings_from(args)
    settings.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows, crashed = run(settings, only)
    print(table(rows))
    print()
    print(notes(rows))
    if args.out:
        args.out.write_text(json.dumps({
            "command": " ".join([Path(sys.executable).name, *sys.argv]), "machine": machine(),
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
            "seconds": round(time.perf_counter() - started, 1), "rows": [asdict(r) for r in rows]}, indent=1))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
