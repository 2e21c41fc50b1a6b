"""Maintenance figures: check, compact, archive, salvage and peak memory.

They call the maintenance library (steerable_agent_runtime.maintenance.check.check,
.compact.compact, .archive.archive, .salvage.salvage) rather than re-implementing any of
it; a module that is missing or fails to import gives a "not available: <reason>" row,
never a number. The compact and archive pairs (ours and the plain-SQL baseline) are the
functions of bench/write_jobs_bench.py, written by the author of those jobs. Write jobs run
on fresh copies of the generated store, one per repetition, and the copy is not timed.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

from pathlib import Path
from typing import Any, Callable

import make_store
from steerable_agent_runtime.storage.checksum import row_crc
from harness import (Row, Settings, copy_store, fmt_bytes, fmt_rate, fmt_seconds, interleave, median, profiled,
                     remove_store, timed, verdict)

CHECK_QUICK_TARGET = 1.2
CHECK_ROWS_TARGET = 250_000
COMPACT_TARGET = 1.3
ARCHIVE_TARGET = 2.0
SALVAGE_TARGET = 0.5
RSS_TARGET = 1.25
REPAIR_TARGET = 1.5
OLDER_THAN = make_store.BASE_TIME - make_store.CUTOFF  # with now=BASE_TIME: cutoff = CUTOFF


def _job(name: str) -> tuple[Callable[..., Any] | None, str]:
    """The maintenance function ``name`` (module of the same name), or None and why not."""
    try:
        module = importlib.import_module(f"steerable_agent_runtime.maintenance.{name}")
    except Exception as exc:  # a missing or half-written module must not stop the other figures
        return None, f"steerable_agent_runtime.maintenance.{name} does not import ({type(exc).__name__}: {exc})"
    fn = getattr(module, name, None)
    if fn is None:
        return None, f"steerable_agent_runtime.maintenance.{name} has no {name}()"
    return fn, ""


def _ro(path: str | Path) -> sqlite3.Connection:
    """A baseline connection read the way check reads a quiescent store: plain ``mode=ro``
    would leave an empty -wal and a -shm beside the bench store (DESIGN.md, read-only facts)."""
    wal = Path(f"{path}-wal")
    quiescent = not wal.exists() or wal.stat().st_size == 0
    return sqlite3.connect(f"file:{path}?mode=ro" + ("&immutable=1" if quiescent else ""), uri=True)


# check -------------------------------------------------------------------------------
def check_rows(settings: Settings) -> list[Row]:
    check, why = _job("check")
    if check is None:
        return [Row.unavailable("check --quick vs PRAGMA quick_check", f"<= {CHECK_QUICK_TARGET:g}x", why),
                Row.unavailable("full check, history rows/s", f">= {CHECK_ROWS_TARGET:,}/s", why)]
    info = settings.main_store()
    small = settings.small_store()
    return [_check_quick(settings, check, info), _check_quick(settings, check, small, suffix=" (store 10x smaller)"),
            _check_full(settings, check, info), _check_floor(info)]


def _check_quick(settings: Settings, check: Callable[..., Any], info: make_store.StoreInfo,
                 suffix: str = "") -> Row:
    reports = []

    def ours(rep: int) -> float:
        seconds, report = timed(lambda: profiled(settings, "check-quick", lambda: check(info.path, quick=True))
                                if rep == 0 else check(info.path, quick=True))
        reports.append(report)
        return seconds

    def baseline(rep: int) -> float:
        conn = _ro(info.path)
        try:
            seconds, result = timed(lambda: conn.execute("PRAGMA quick_check").fetchall())
        finally:
            conn.close()
        if result != [("ok",)]:
            raise RuntimeError(f"PRAGMA quick_check of the generated store: {result[:3]}")
        return seconds

    reps = settings.heavy_reps if not suffix else max(7, settings.heavy_reps)  # the small store is quick
    mine, theirs = interleave(reps, ours, baseline)
    ratio = median(mine) / median(theirs)
    return Row(figure="check --quick vs PRAGMA quick_check" + suffix, ours=fmt_seconds(median(mine)),
               baseline=fmt_seconds(median(theirs)), ratio=ratio, target=f"<= {CHECK_QUICK_TARGET:g}x",
               met=verdict(ratio <= CHECK_QUICK_TARGET), note=_errors_note(reports[-1]) + _size_note(info),
               raw={"ours_s": mine, "baseline_s": theirs})


def _check_full(settings: Settings, check: Callable[..., Any], info: make_store.StoreInfo) -> Row:
    reports = []

    def ours(rep: int) -> float:
        seconds, report = timed(lambda: profiled(settings, "check-full", lambda: check(info.path))
                                if rep == 0 else check(info.path))
        reports.append(report)
        return seconds

    def baseline(rep: int) -> float:
        return _raw_history_scan(info.path)

    mine, theirs = interleave(settings.heavy_reps, ours, baseline)
    ours_rate, base_rate = info.history_rows / median(mine), info.history_rows / median(theirs)
    return Row(figure="full check, history rows/s", ours=fmt_rate(ours_rate),
               baseline=fmt_rate(base_rate) + " raw scan", ratio=base_rate / ours_rate,
               target=f">= {CHECK_ROWS_TARGET:,}/s", met=verdict(ours_rate >= CHECK_ROWS_TARGET),
               note=(f"rows/s = {info.history_rows:,} history rows / whole check time (all tables); baseline: "
                     "SELECT record_id, seq, data, crc FROM history + keyed crc32 (row_crc) + json.loads per row; ratio = baseline rate / ours. ")
               + _errors_note(reports[-1]),
               raw={"ours_s": mine, "baseline_s": theirs})


def _check_floor(info: make_store.StoreInfo) -> Row:
    """What SQLite alone must do in a full check, nothing verified: ``PRAGMA integrity_check``
    and one fetch of every row of every table into Python (the columns check reads), in CPU
    seconds of this process. The rows/s it allows assumes both cores busy the whole time
    (half the CPU seconds as wall time): an upper bound for any full check that runs
    integrity_check and reads each row once in Python, before any checksum or JSON work."""
    conn = _ro(info.path)
    parts: dict[str, float] = {}
    try:
        start = time.process_time()
        if conn.execute("PRAGMA integrity_check").fetchall() != [("ok",)]:
            raise RuntimeError("PRAGMA integrity_check of the generated store failed")
        parts["integrity_check"] = time.process_time() - start
        for (table,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%crc%'"
                                     " ORDER BY name").fetchall():
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            select = ", ".join("CAST(data AS BLOB)" if c == "data" else c for c in columns)
            start = time.process_time()
            for _ in conn.execute(f"SELECT {select} FROM {table}"):
                pass
            parts[f"fetch {table}"] = time.process_time() - start
    finally:
        conn.close()
    cpu = sum(parts.values())
    bound = info.history_rows / (cpu / 2)
    return Row(figure="full check floor: integrity_check + every row fetched once, nothing verified",
               ours=f"{cpu:.2f} s CPU", baseline="", ratio=None,
               target=f"(context for >= {CHECK_ROWS_TARGET:,}/s)", met="n/a",
               note=(f"at most {bound:,.0f} history rows/s even with 2 cores fully used; CPU s: "
                     + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()) + ". "),
               raw={"cpu_s": parts, "bound_rows_per_s": bound})


def _raw_history_scan(path: str) -> float:
    conn = _ro(path)
    try:
        def scan() -> None:
            for record_id, seq, data, crc in conn.execute(
                    "SELECT record_id, seq, CAST(data AS BLOB), crc FROM history"):
                if row_crc("history", (record_id, seq), data) != crc:
                    raise RuntimeError("checksum mismatch in the generated store")
                json.loads(data)
        seconds, _ = timed(scan)
    finally:
        conn.close()
    return seconds


def _errors_note(report: Any) -> str:
    errors = getattr(report, "has_errors", None)
    counts = getattr(report, "counts", {})
    return f"report: {'ERRORS ' + str(counts) if errors else 'clean'}. "


def _size_note(info: make_store.StoreInfo) -> str:
    return f"{info.chats}x{info.entries} store, {info.bytes / 2**20:,.0f} MiB. "


# compact and archive ---------------------------------------------------------------
# Both sides come from bench/write_jobs_bench.py (the compact/archive author's benchmark):
# ours_compact/plain_compact and ours_archive/plain_archive; here they are interleaved on
# fresh copies of the shared store and put in the table.
def _write_jobs() -> tuple[Any, str]:
    try:
        return importlib.import_module("write_jobs_bench"), ""
    except Exception as exc:
        return None, f"bench/write_jobs_bench.py does not import ({type(exc).__name__}: {exc})"


def compact_rows(settings: Settings) -> list[Row]:
    figure = "compact (half the traces) vs DELETE+VACUUM"
    jobs, why = _write_jobs()
    if jobs is None:
        return [Row.unavailable(figure, f"<= {COMPACT_TARGET:g}x", why)]
    info = settings.main_store()
    work = settings.scratch / "compact.db"
    pruned: dict[str, set[int]] = {"ours": set(), "plain": set()}

    def side(name: str, fn: Callable[[Path], tuple[float, int]]) -> Callable[[int], float]:
        def run(rep: int) -> float:
            copy_store(info.path, work)
            try:
                seconds, count = profiled(settings, "compact", lambda: fn(work)) if rep == 0 and name == "ours" \
                    else fn(work)
            finally:
                remove_store(work)
            pruned[name].add(count)
            return seconds
        return run

    mine, theirs = interleave(settings.heavy_reps, side("ours", jobs.ours_compact),
                              side("plain", lambda w: jobs.plain_compact(w, info.cutoff)))
    if pruned != {"ours": {info.old_traces}, "plain": {info.old_traces}}:
        raise RuntimeError(f"traces pruned {pruned}, expected {info.old_traces} on both sides")
    ratio = median(mine) / median(theirs)
    return [Row(figure=figure, ours=fmt_seconds(median(mine)), baseline=fmt_seconds(median(theirs)), ratio=ratio,
                target=f"<= {COMPACT_TARGET:g}x", met=verdict(ratio <= COMPACT_TARGET),
                note=f"{info.old_traces:,} of {info.traces:,} traces pruned, with VACUUM. " + _size_note(info),
                raw={"ours_s": mine, "baseline_s": theirs})]


def archive_rows(settings: Settings) -> list[Row]:
    figure = "archive (half the chats) vs plain SQL move"
    jobs, why = _write_jobs()
    if jobs is None:
        return [Row.unavailable(figure, f"<= {ARCHIVE_TARGET:g}x", why)]
    info = settings.main_store()
    src, dst = settings.scratch / "archive-src.db", settings.scratch / "archive-dst.db"
    moved: dict[str, set[int]] = {"ours": set(), "plain": set()}

    def side(name: str, fn: Callable[[Path, Path], tuple[float, int]]) -> Callable[[int], float]:
        def run(rep: int) -> float:
            copy_store(info.path, src)
            remove_store(dst)
            try:
                seconds, count = profiled(settings, "archive", lambda: fn(src, dst)) if rep == 0 and name == "ours" \
                    else fn(src, dst)
            finally:
                remove_store(src)
                remove_store(dst)
            moved[name].add(count)
            return seconds
        return run

    mine, theirs = interleave(settings.heavy_reps, side("ours", jobs.ours_archive),
                              side("plain", lambda a, b: jobs.plain_archive(a, b, info.cutoff)))
    if moved != {"ours": {info.old_chats}, "plain": {info.old_chats}}:
        raise RuntimeError(f"chats moved {moved}, expected {info.old_chats} on both sides")
    ratio = median(mine) / median(theirs)
    return [Row(figure=figure, ours=fmt_seconds(median(mine)), baseline=fmt_seconds(median(theirs)), ratio=ratio,
                target=f"<= {ARCHIVE_TARGET:g}x", met=verdict(ratio <= ARCHIVE_TARGET),
                note=f"{info.old_chats:,} of {info.chats:,} chats moved to a new archive. " + _size_note(info),
                raw={"ours_s": mine, "baseline_s": theirs})]


# salvage -----------------------------------------------------------------------------
def recover_shell(settings: Settings) -> tuple[str | None, str]:
    """A sqlite3 shell whose ``.recover`` works (the dbpage table compiled in), or why not.

    Looks at ``--recover-shell``, then executables named sqlite3* under WORK (where the
    salvage benchmark builds one, as DEVELOPERS.md says)."""
    candidates = [settings.recover_shell] if settings.recover_shell else sorted(
        str(p) for p in settings.work.rglob("sqlite3*") if p.is_file() and os.access(p, os.X_OK))
    for shell in candidates:
        if _recover_works(shell):
            return shell, ""
    looked = settings.recover_shell or f"{settings.work}/**/sqlite3*"
    return None, f"no sqlite3 shell with a working .recover at {looked} (DEVELOPERS.md says how to build one)"


def _recover_works(shell: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "t.db"
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE t(x)")
        conn.execute("INSERT INTO t VALUES ('probe')")
        conn.commit()
        conn.close()
        try:
            done = subprocess.run([shell, str(db), ".recover"], capture_output=True, text=True, timeout=30)
        except OSError:
            return False
        return done.returncode == 0 and "probe" in done.stdout


def salvage_rows(settings: Settings) -> list[Row]:
    figure = "salvage of a healthy store vs .recover"
    salvage, why = _job("salvage")
    if salvage is None:
        return [Row.unavailable(figure, f"<= {SALVAGE_TARGET:g}x", why)]
    shell, why = recover_shell(settings)
    if shell is None:
        return [Row.unavailable(figure, f"<= {SALVAGE_TARGET:g}x", why)]
    info = settings.main_store()
    out = settings.scratch / "salvage.jsonl"
    written = []

    def ours(rep: int) -> float:
        out.unlink(missing_ok=True)
        run = lambda: salvage(info.path, out)  # noqa: E731
        seconds, report = timed(lambda: profiled(settings, "salvage", run) if rep == 0 else run())
        written.append(report.rows_written)
        out.unlink(missing_ok=True)
        return seconds

    def baseline(rep: int) -> float:
        with open(out, "wb") as fh:
            seconds, done = timed(lambda: subprocess.run([shell, "-readonly", info.path, ".recover"], stdout=fh,
                                                         stderr=subprocess.PIPE))
        out.unlink(missing_ok=True)
        if done.returncode != 0:
            raise RuntimeError(f".recover failed: {done.stderr[:300]!r}")
        return seconds

    mine, theirs = interleave(settings.heavy_reps, ours, baseline)
    ratio = median(mine) / median(theirs)
    return [Row(figure=figure, ours=fmt_seconds(median(mine)), baseline=fmt_seconds(median(theirs)), ratio=ratio,
                target=f"<= {SALVAGE_TARGET:g}x", met=verdict(ratio <= SALVAGE_TARGET),
                note=f"{written[-1]:,} rows to JSONL; .recover to an SQL file with {shell}. " + _size_note(info),
                raw={"ours_s": mine, "baseline_s": theirs})]


# repair ------------------------------------------------------------------------------
def repair_rows(settings: Settings) -> list[Row]:
    """repair of a store with 3 zeroed pages vs ``salvage --rebuild`` alone of another copy
    of the same damaged file (what repair runs inside: the rest is its backup copy, check
    of the rebuilt store and the swap). Its own store (``settings.repair_chats`` x
    ``repair_entries``): a damaged store goes through salvage's pure-Python page reader, so
    the million-entry store would take hours per repetition."""
    figure = "repair (3 zeroed pages) vs salvage --rebuild alone"
    try:
        from steerable_agent_runtime.maintenance.repair import repair
        from steerable_agent_runtime.maintenance.salvage import salvage
    except Exception as exc:
        return [Row.unavailable(figure, f"<= {REPAIR_TARGET:g}x", f"{type(exc).__name__}: {exc}")]
    import random
    import shutil
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.damage import zero_page

    info = make_store.cached_store(settings.work / "stores", settings.repair_chats, settings.repair_entries)
    damaged = settings.scratch / "repair-damaged.db"
    remove_store(damaged)
    shutil.copyfile(info.path, damaged)
    for seed in (1, 2, 3):
        zero_page(damaged, random.Random(seed))
    exits: dict[str, set[int]] = {"repair": set(), "salvage": set()}

    def side(name: str) -> Callable[[int], float]:
        def run(rep: int) -> float:
            folder = settings.scratch / f"{name}-{rep}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            target = folder / "sessions.db"
            shutil.copyfile(damaged, target)
            try:
                if name == "repair":
                    seconds, report = timed(lambda: repair(target))
                else:
                    seconds, report = timed(lambda: salvage(target, folder / "rows.jsonl", rebuild=folder / "new.db"))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            exits[name].add(report.exit_code)
            return seconds
        return run

    try:
        mine, theirs = interleave(settings.heavy_reps, side("repair"), side("salvage"))
    finally:
        remove_store(damaged)
    ratio = median(mine) / median(theirs)
    return [Row(figure=figure, ours=fmt_seconds(median(mine)), baseline=fmt_seconds(median(theirs)), ratio=ratio,
                target=f"<= {REPAIR_TARGET:g}x", met=verdict(ratio <= REPAIR_TARGET),
                note=(f"{info.chats}x{info.entries} store ({info.history_rows:,} history rows, "
                      f"{info.bytes / 2**20:,.0f} MiB), pages zeroed by tests.damage.zero_page seeds 1-3; exit codes "
                      f"repair {sorted(exits['repair'])}, salvage {sorted(exits['salvage'])}"),
                raw={"ours_s": mine, "baseline_s": theirs})]


# peak memory -------------------------------------------------------------------------
_CHILD = """
import sys
from pathlib import Path
job, db, out = sys.argv[1], sys.argv[2], sys.argv[3]
if job == "check":
    from steerable_agent_runtime.maintenance.check import check
    check(db)
else:
    from steerable_agent_runtime.maintenance.salvage import salvage
    salvage(db, out)
    Path(out).unlink()
print(next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM")))
"""
_LAUNCHER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
if done.returncode:
    sys.exit(done.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss(job: str, db: str, out: Path) -> tuple[int, int]:
    """Peak resident set of one child process running ``job`` on ``db``, in bytes, as
    (ru_maxrss, VmHWM).

    A child's ru_maxrss starts at the RSS of the process that forked it (Linux copies the
    parent's high-water mark at fork), so a fat parent would hide the figure. Each
    measurement therefore goes through a fresh, small launcher process that runs the job
    as its only child and reports getrusage(RUSAGE_CHILDREN).ru_maxrss; the job also
    prints its own VmHWM from /proc as a cross-check.
    """
    with tempfile.TemporaryFile() as err:
        done = subprocess.run([sys.executable, "-c", _LAUNCHER, sys.executable, "-c", _CHILD, job, db, str(out)],
                              stdout=subprocess.PIPE, stderr=err, text=True)
        if done.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{job} child exited {done.returncode}: {err.read().decode(errors='replace')[-500:]}")
    hwm_kib, maxrss_kib = (int(x) for x in done.stdout.split()[-2:])
    return maxrss_kib * 1024, hwm_kib * 1024  # Linux reports KiB


def rss_rows(settings: Settings) -> list[Row]:
    rows = []
    for job in ("check", "salvage"):
        figure = f"peak RSS of {job}, store 10x larger"
        fn, why = _job(job)
        if fn is None:
            rows.append(Row.unavailable(figure, f"<= {RSS_TARGET:g}x (flat)", why))
            continue
        small, large = settings.small_store(), settings.main_store()
        out = settings.scratch / f"rss-{job}.jsonl"
        sizes: dict[str, list[int]] = {"small": [], "large": []}
        hwm: dict[str, list[int]] = {"small": [], "large": []}
        for rep in range(max(1, settings.heavy_reps)):
            order = (("small", small), ("large", large)) if rep % 2 == 0 else (("large", large), ("small", small))
            for name, info in order:
                maxrss, vmhwm = peak_rss(job, info.path, out)
                sizes[name].append(maxrss)
                hwm[name].append(vmhwm)
        s, big = median(sizes["small"]), median(sizes["large"])
        ratio = big / s
        rows.append(Row(figure=figure, ours=f"{fmt_bytes(big)} at {large.chats}x{large.entries}",
                        baseline=f"{fmt_bytes(s)} at {small.chats}x{small.entries}", ratio=ratio,
                        target=f"<= {RSS_TARGET:g}x (flat)", met=verdict(ratio <= RSS_TARGET),
                        note=(f"ru_maxrss of one child process per run (via a launcher), median of "
                              f"{len(sizes['large'])}; VmHWM {fmt_bytes(median(hwm['small']))} -> "
                              f"{fmt_bytes(median(hwm['large']))}; stores {small.bytes / 2**20:,.0f} and "
                              f"{large.bytes / 2**20:,.0f} MiB"),
                        raw={"ru_maxrss": sizes, "vmhwm": hwm}))
    return rows
