"""salvage compared with SQLite's own `.recover`, on damaged stores and on a healthy one.

The baseline is a sqlite3 shell with `.recover` (it needs the dbpage virtual table, which
the SQLite Debian and Ubuntu ship lacks), built here from the amalgamation inside the npm
package `sqlite3` (`npm pack sqlite3` -> deps/sqlite-autoconf-*.tar.gz -> gcc with
-DSQLITE_ENABLE_DBPAGE_VTAB) into bench/out/ (gitignored). It is never a project dependency.

Figures:
1. Damage corpus: for every damage class of tests/damage.py and each seed, a store with
   random content is built and damaged; both tools recover from their own copy. Counted per
   class: original history entries recovered byte-exact (salvage: copies it marks verified;
   .recover: any row of its output holding the exact data text), and rows presented as good
   whose data is not an original entry (salvage: verified copies; .recover: every history-
   shaped row it outputs, since it has no notion of verified).
2. Healthy store (default: a million history entries): wall time of salvage (JSONL out)
   vs `.recover` (SQL out), and vs `.recover` + loading its SQL into a new database,
   repetitions interleaved, medians compared. Peak RSS of salvage in a child process on
   the healthy store and on one a tenth its size (flat memory: the two should be close).

Usage (repository root):
    .venv/bin/python bench/salvage_vs_recover.py [--seeds 5] [--reps 3] [--healthy PATH]
        [--healthy-entries 1000000] [--skip-healthy] [--only CLASS ...]
        [--json bench/out/salvage/results.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]

from steerable_agent_runtime.maintenance.salvage import salvage  # noqa: E402
from steerable_agent_runtime.storage.checksum import row_crc  # noqa: E402
from steerable_agent_runtime.storage.schema import create_schema  # noqa: E402
from tests.damage import DAMAGES, WAL_DAMAGES, build_store, copy_store  # noqa: E402

OUT = ROOT / "bench" / "out" / "salvage"


def build_shell(out: Path) -> Path:
    """The `.recover`-capable shell, built once from the npm package's amalgamation."""
    shell = out / "sqlite3-recover"
    if shell.exists():
        return shell
    work = out / "npm"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "pack", "sqlite3"], cwd=work, check=True, capture_output=True)
    with tarfile.open(next(work.glob("sqlite3-*.tgz"))) as tgz:
        tgz.extractall(work, filter="data")
    with tarfile.open(glob.glob(str(work / "package/deps/sqlite-autoconf-*.tar.gz"))[0]) as src:
        src.extractall(work, filter="data")
    amalgamation = Path(glob.glob(str(work / "sqlite-autoconf-*"))[0])
    subprocess.run(["gcc", "-O2", "-DSQLITE_ENABLE_DBPAGE_VTAB", "shell.c", "sqlite3.c", "-lpthread", "-ldl",
                    "-lm", "-o", str(shell)], cwd=amalgamation, check=True)
    return shell


# -- damage corpus ----------------------------------------------------------------------
def make_case(work: Path, damage: str, seed: int) -> tuple[Path, set[bytes]]:
    """A damaged store and the data bytes of its original history entries."""
    rows, owner = build_store(work / "live.db", seed=seed, chats=4, entries=60, big=2, keep_open=damage in WAL_DAMAGES)
    try:
        db = copy_store(work / "live.db", work / "case.db")
    finally:
        if owner is not None:
            owner.close_sync()
    DAMAGES[damage](db, random.Random(seed))
    return db, {r.data for r in rows if r.table == "history"}


def salvage_counts(db: Path, originals: set[bytes], work: Path) -> tuple[int, int, int]:
    """(original entries recovered verified, of those as the committed winning copy of
    their key, verified copies that are not originals)."""
    salvage(db, work / "salvage.jsonl", force=True)
    found, winners, wrong = set(), set(), 0
    with open(work / "salvage.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["table"] != "history" or not row["verified"]:
                continue
            data = row["data"].encode("utf-8")
            if data in originals:
                found.add(data)
                winners.add(data) if row["committed"] and not row["superseded"] else None
            wrong += data not in originals
    return len(found), len(winners), wrong


def recover_counts(shell: Path, db: Path, originals: set[bytes], work: Path) -> tuple[int, int]:
    """(original entries in .recover's output, history-shaped rows in it that are not originals)."""
    private = work / "recover"
    private.mkdir()
    copy_store(db, private / "case.db")
    sql = private / "out.sql"
    with open(sql, "wb") as fh:
        subprocess.run([str(shell), str(private / "case.db"), ".recover"], stdout=fh, stderr=subprocess.DEVNULL,
                       timeout=600)
    with open(sql, "rb") as fh:
        subprocess.run([str(shell), str(private / "fresh.db")], stdin=fh, capture_output=True, timeout=600)
    return _count_recovered(private / "fresh.db", originals)


def _count_recovered(fresh: Path, originals: set[bytes]) -> tuple[int, int]:
    found, wrong = set(), 0
    if not fresh.exists():
        return 0, 0
    conn = sqlite3.connect(fresh)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                texts = [v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v for v in row]
                hits = [t for t in texts if isinstance(t, bytes) and t in originals]
                found.update(hits)
                wrong += not hits and _history_shaped(table, texts)
    except sqlite3.DatabaseError:
        pass
    finally:
        conn.close()
    return len(found), wrong


def _history_shaped(table: str, values: list) -> bool:
    """A row that claims to be a history entry: in table history, or a lost_and_found row
    whose fields end like one (..., data text with "type", crc integer)."""
    if table == "history":
        return True
    tail = [v for v in values if v is not None][-2:]
    return (table.startswith("lost_and_found") and len(tail) == 2 and isinstance(tail[0], bytes)
            and b'"type"' in tail[0] and b'"seq"' in tail[0] and isinstance(tail[1], int))


def run_corpus(shell: Path, seeds: int, only: list[str]) -> dict[str, dict[str, int]]:
    """Per damage class: totals over the seeds."""
    results: dict[str, dict[str, int]] = {}
    for damage in only or sorted(DAMAGES):
        totals = dict(entries=0, salvage=0, salvage_committed=0, salvage_wrong=0, recover=0, recover_wrong=0,
                      salvage_more=0)
        for seed in range(seeds):
            with tempfile.TemporaryDirectory(dir=OUT) as tmp:
                db, originals = make_case(Path(tmp), damage, seed)
                s_found, s_committed, s_wrong = salvage_counts(db, originals, Path(tmp))
                r_found, r_wrong = recover_counts(shell, db, originals, Path(tmp))
            totals["entries"] += len(originals)
            totals["salvage"] += s_found
            totals["salvage_committed"] += s_committed
            totals["salvage_wrong"] += s_wrong
            totals["recover"] += r_found
            totals["recover_wrong"] += r_wrong
            totals["salvage_more"] += s_found > r_found
        results[damage] = totals
        print(damage, totals, flush=True)
    return results


# -- healthy store ----------------------------------------------------------------------
def make_healthy(path: Path, entries: int) -> Path:
    """A store with ``entries`` valid v2 history entries in 1,000 records (plain inserts)."""
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    create_schema(conn)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?)", _entries(entries))
    conn.execute("COMMIT")
    conn.close()
    tmp.rename(path)
    return path


def _entries(n: int):
    rng = random.Random(1)
    words = ("agent", "tool", "call", "result", "the", "a", "of", "summary", "plan", "step")
    for i in range(n):
        seq = i // 1000 + 1
        at = "2026-01-01T00:00:00.000000Z"
        text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 120)))
        data = json.dumps({"v": 2, "type": "item", "seq": seq, "at": at, "message": {"role": "user", "content": text}},
                          separators=(",", ":"))
        yield f"chat-{i % 1000}", seq, 2, "item", at, data, row_crc("history", (f"chat-{i % 1000}", seq), data)


def time_healthy(shell: Path, db: Path, reps: int) -> dict[str, object]:
    """Median wall seconds of salvage, .recover, and .recover + load; interleaved."""
    runs: dict[str, list[float]] = {"salvage": [], "recover": [], "recover_load": []}
    for _ in range(reps):
        with tempfile.TemporaryDirectory(dir=OUT) as tmp:
            t = time.perf_counter()
            salvage(db, Path(tmp) / "out.jsonl")
            runs["salvage"].append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory(dir=OUT) as tmp:
            copy = Path(tmp) / "copy.db"
            shutil.copyfile(db, copy)  # .recover opens with SQLite: never the original (copy not timed)
            t = time.perf_counter()
            with open(Path(tmp) / "out.sql", "wb") as fh:
                subprocess.run([str(shell), str(copy), ".recover"], stdout=fh, check=True)
            runs["recover"].append(time.perf_counter() - t)
            with open(Path(tmp) / "out.sql", "rb") as fh:
                subprocess.run([str(shell), str(Path(tmp) / "fresh.db")], stdin=fh, check=True, capture_output=True)
            runs["recover_load"].append(time.perf_counter() - t)
    medians = {k: statistics.median(v) for k, v in runs.items()}
    return {"raw": runs, "median": medians, "ratio_vs_recover": medians["salvage"] / medians["recover"],
            "ratio_vs_recover_load": medians["salvage"] / medians["recover_load"]}


def peak_rss_mib(db: Path) -> float:
    """Peak RSS of the largest process (salvage itself or one of its export workers) when a
    child process salvages ``db`` (MiB)."""
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        code = ("import sys; sys.path[:0] = sys.argv[3:]\n"
                "from steerable_agent_runtime.maintenance.salvage import salvage\n"
                "salvage(sys.argv[1], sys.argv[2])\n"
                "import resource\n"
                "print(max(resource.getrusage(w).ru_maxrss for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))")
        out = subprocess.run([sys.executable, "-c", code, str(db), str(Path(tmp) / "o.jsonl"), str(ROOT / "runtime")],
                             check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--healthy", type=Path, default=None)
    parser.add_argument("--healthy-entries", type=int, default=1_000_000)
    parser.add_argument("--skip-healthy", action="store_true")
    parser.add_argument("--only", nargs="*", default=[], choices=sorted(DAMAGES), help="damage classes to run")
    parser.add_argument("--json", type=Path, default=OUT / "results.json")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    shell = build_shell(OUT)
    results: dict[str, object] = {"corpus": run_corpus(shell, args.seeds, args.only), "seeds": args.seeds}
    if not args.skip_healthy:
        big = args.healthy or make_healthy(OUT / f"healthy-{args.healthy_entries}.db", args.healthy_entries)
        small = make_healthy(OUT / f"healthy-{args.healthy_entries // 10}.db", args.healthy_entries // 10)
        results["healthy"] = {"path": str(big), "bytes": big.stat().st_size, **time_healthy(shell, big, args.reps)}
        results["peak_rss_mib"] = {str(small.stat().st_size): peak_rss_mib(small), str(big.stat().st_size): peak_rss_mib(big)}
        print(json.dumps({k: results[k] for k in ("healthy", "peak_rss_mib")}, indent=1), flush=True)
    args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
