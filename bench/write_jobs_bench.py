"""Write jobs side by side with plain SQL on one generated store, in one run.

- compact (prune half the traces, VACUUM) vs plain ``DELETE`` + ``VACUUM`` (target <= 1.3x)
- archive (move half the chats to a new archive) vs the same move in plain SQL: ATTACH,
  INSERT ... SELECT, DELETE, one transaction, FULL sync (target <= 2x)

Each repetition copies the generated store to a scratch directory (copy time not counted)
and runs ours and the baseline alternately; the table shows medians. Both sides must
produce the same result (traces pruned, chats moved), or the run fails.

    .venv/bin/python bench/write_jobs_bench.py [--chats 200] [--entries 500] [--reps 3] [--scratch DIR]
        [--trace-heavy CHATS]   # also: compact on CHATS chats x 20 traces (half old), many batches
        [--interleaved CHATS]   # also: archive on CHATS chats whose rows interleave in storage order
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import make_store  # bench/make_store.py: the deterministic generator shared by the benchmarks

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.maintenance.compact import compact
from steerable_agent_runtime.storage.schema import create_schema

OLDER_THAN = make_store.BASE_TIME - make_store.CUTOFF
_OLD_TRACES = "SELECT trace_id FROM main.traces WHERE started_at < ?"
_IDLE = ("CREATE TEMP TABLE idle AS SELECT chat_id FROM main.sessions GROUP BY chat_id"
         " HAVING max(is_active) = 0 AND max(updated_at) < ?")
_CHAT = "IN (SELECT chat_id FROM temp.idle)"
_TRACE = f"trace_id IN (SELECT trace_id FROM main.traces WHERE chat_id {_CHAT})"
_MOVES = (("sessions", f"chat_id {_CHAT}"), ("messages", f"chat_id {_CHAT}"), ("history", f"record_id {_CHAT}"),
          ("traces", f"chat_id {_CHAT}"), ("spans", _TRACE), ("events", _TRACE))


def _copy(src: Path, dst: Path) -> Path:
    _remove(dst)
    shutil.copyfile(src, dst)
    return dst


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), path.with_suffix(".lock")):
        p.unlink(missing_ok=True)


def _timed(fn) -> tuple[float, object]:
    began = time.perf_counter()
    result = fn()
    return time.perf_counter() - began, result


def ours_compact(work: Path) -> tuple[float, int]:
    seconds, report = _timed(lambda: compact(work, older_than=OLDER_THAN, now=make_store.BASE_TIME))
    return seconds, report.traces


def plain_compact(work: Path, cutoff: str) -> tuple[float, int]:
    conn = sqlite3.connect(work, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")

    def run() -> int:
        conn.execute("BEGIN IMMEDIATE")
        for table in ("events", "spans"):
            conn.execute(f"DELETE FROM main.{table} WHERE trace_id IN ({_OLD_TRACES})", (cutoff,))
        pruned = conn.execute("DELETE FROM main.traces WHERE started_at < ?", (cutoff,)).rowcount
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return pruned

    try:
        return _timed(run)
    finally:
        conn.close()


def ours_archive(src: Path, dst: Path) -> tuple[float, int]:
    seconds, report = _timed(lambda: archive(src, to=dst, older_than=OLDER_THAN, now=make_store.BASE_TIME))
    return seconds, report.chats_moved


def plain_archive(src: Path, dst: Path, cutoff: str) -> tuple[float, int]:
    def run() -> int:
        new = sqlite3.connect(dst, isolation_level=None)
        new.execute("PRAGMA journal_mode = WAL")
        create_schema(new)
        new.close()
        conn = sqlite3.connect(src, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("ATTACH DATABASE ? AS dst", (str(dst),))
            conn.execute("PRAGMA dst.synchronous = FULL")
            conn.execute(_IDLE, (cutoff,))
            conn.execute("BEGIN IMMEDIATE")
            for table, where in _MOVES:
                conn.execute(f"INSERT INTO dst.{table} SELECT * FROM main.{table} WHERE {where}")
            for table, where in reversed(_MOVES):
                conn.execute(f"DELETE FROM main.{table} WHERE {where}")
            conn.execute("COMMIT")
            return conn.execute("SELECT count(*) FROM temp.idle").fetchone()[0]
        finally:
            conn.close()

    return _timed(run)


def measure(store: Path, scratch: Path, reps: int, cutoff: str) -> dict[str, dict[str, list[float]]]:
    """Run every pair ``reps`` times, alternating ours and the baseline; check they agree."""
    times: dict[str, dict[str, list[float]]] = {"compact": {"ours": [], "plain": []},
                                                "archive": {"ours": [], "plain": []}}
    work, arc = scratch / "work.db", scratch / "archive.db"
    for _ in range(reps):
        a = ours_compact(_copy(store, work))
        b = plain_compact(_copy(store, work), cutoff)
        _agree("compact traces pruned", a[1], b[1])
        times["compact"]["ours"].append(a[0])
        times["compact"]["plain"].append(b[0])
        _remove(arc)
        a = ours_archive(_copy(store, work), arc)
        _remove(arc)
        b = plain_archive(_copy(store, work), arc, cutoff)
        _agree("archive chats moved", a[1], b[1])
        times["archive"]["ours"].append(a[0])
        times["archive"]["plain"].append(b[0])
    _remove(work)
    _remove(arc)
    return times


def _agree(what: str, ours: int, plain: int) -> None:
    if ours != plain or ours == 0:
        raise SystemExit(f"{what}: ours {ours}, plain SQL {plain}: the comparison would be meaningless")


def table(times: dict, info: make_store.StoreInfo) -> str:
    """The results as a markdown table."""
    targets = {"compact": 1.3, "archive": 2.0}
    lines = ["| job | ours (median) | plain SQL (median) | ratio | target | met |", "|---|---|---|---|---|---|"]
    for job, runs in times.items():
        ours, plain = statistics.median(runs["ours"]), statistics.median(runs["plain"])
        ratio = ours / plain
        lines.append(f"| {job} | {ours:.3f} s | {plain:.3f} s | {ratio:.2f}x | <= {targets[job]}x |"
                     f" {'yes' if ratio <= targets[job] else 'NO'} |")
    lines.append("")
    lines.append(f"store: {info.chats} chats x {info.entries} entries, {info.bytes / 2**20:.0f} MiB;"
                 f" {info.old_traces} of {info.traces} traces and {info.old_chats} of {info.chats} chats older than"
                 f" the cutoff; raw seconds: {times}")
    return "\n".join(lines)


def trace_heavy(scratch: Path, chats: int, traces: int, reps: int) -> str:
    """compact on a store with many traces per chat (many batches), half of them old."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.maintenance.storemaker import NEW, OLD, ChatSpec, make_store as make_small

    store = scratch / f"traces-{chats}x{traces}.db"
    if not store.exists():
        make_small(store, [ChatSpec(i, messages=2, entries=2, traces=traces, spans=4,
                                    trace_age=OLD if i % 2 == 0 else NEW) for i in range(chats)])
    cutoff = _cutoff_iso()
    work, ours, plain = scratch / "work.db", [], []
    for _ in range(reps):
        a = _timed(lambda: compact(_copy(store, work), older_than=timedelta(days=30)))
        b = plain_compact(_copy(store, work), cutoff)
        _agree("compact traces pruned", a[1].traces, b[1])
        ours.append(a[0])
        plain.append(b[0])
    _remove(work)
    o, p = statistics.median(ours), statistics.median(plain)
    return (f"| compact, trace-heavy ({chats * traces // 2} of {chats * traces} traces, {a[1].batches} batches)"
            f" | {o:.3f} s | {p:.3f} s | {o / p:.2f}x | <= 1.3x | {'yes' if o / p <= 1.3 else 'NO'} |")


def interleaved(scratch: Path, chats: int, rounds: int, reps: int) -> str:
    """archive on a store whose chats' rows interleave in storage order, as live traffic writes
    them (round r appends one message and one history entry to every chat); half the chats old."""
    store = scratch / f"interleaved-{chats}x{rounds}.db"
    if not store.exists():
        asyncio.run(_write_interleaved(store, chats, rounds))
    cutoff, work, arc = _cutoff_iso(), scratch / "work.db", scratch / "archive.db"
    ours, plain = [], []
    for _ in range(reps):
        _remove(arc)
        a = _timed(lambda: archive(_copy(store, work), to=arc, older_than=timedelta(days=30)))
        _remove(arc)
        b = plain_archive(_copy(store, work), arc, cutoff)
        _agree("archive chats moved", a[1].chats_moved, b[1])
        ours.append(a[0])
        plain.append(b[0])
    for path in (work, arc):
        _remove(path)
    o, p = statistics.median(ours), statistics.median(plain)
    return (f"| archive, interleaved rows ({chats // 2} of {chats} chats, {a[1].batches} batches) | {o:.3f} s"
            f" | {p:.3f} s | {o / p:.2f}x | <= 2x | {'yes' if o / p <= 2 else 'NO'} |")


async def _write_interleaved(path: Path, chats: int, rounds: int) -> None:
    from datetime import datetime, timezone

    from steerable_agent_runtime.models import AgentSession, ChatMessage
    from steerable_agent_runtime.storage.sqlite import SqliteStorage

    now = datetime.now(timezone.utc)
    when = [now - timedelta(days=200 if i % 2 == 0 else 1) for i in range(chats)]
    store = SqliteStorage(path, synchronous="NORMAL")
    try:
        for i in range(chats):
            t = when[i].isoformat()
            await store.upsert_session(AgentSession(session_id=f"s{i}", user_id="u", chat_id=f"c{i:06d}",
                                                    current_stage="x", is_active=False, created_at=t, updated_at=t))
        for r in range(rounds):
            for i in range(chats):
                t = (when[i] + timedelta(seconds=r)).isoformat()
                await store.append_message(ChatMessage(id=f"m{i}-{r}", chat_id=f"c{i:06d}", role="user",
                                                       content=f"round {r} words " * 20, created_at=t))
                await store.append_history(f"c{i:06d}", [{"type": "item", "at": t,
                                                          "message": {"role": "user", "content": f"round {r} " * 20}}])
    finally:
        await store.close()


def _cutoff_iso() -> str:
    from datetime import datetime, timezone

    from steerable_agent_runtime.models import normalize_timestamp

    return normalize_timestamp(datetime.now(timezone.utc) - timedelta(days=30))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--entries", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path("bench/out/write-jobs"))
    parser.add_argument("--trace-heavy", type=int, default=0, metavar="CHATS",
                        help="also compact a store of CHATS chats x 20 traces x 4 spans (many batches)")
    parser.add_argument("--interleaved", type=int, default=0, metavar="CHATS",
                        help="also archive a store of CHATS chats x 6 rounds whose rows interleave across chats")
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    info = make_store.cached_store(args.scratch / "stores", args.chats, args.entries)
    print(table(measure(Path(info.path), args.scratch, args.reps, info.cutoff), info))
    if args.trace_heavy or args.interleaved:
        print("\n| job | ours (median) | plain SQL (median) | ratio | target | met |\n|---|---|---|---|---|---|")
    if args.trace_heavy:
        print(trace_heavy(args.scratch, args.trace_heavy, 20, args.reps))
    if args.interleaved:
        print(interleaved(args.scratch, args.interleaved, 6, args.reps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
