"""Shared pieces of the benchmark harness: result rows, run settings, interleaved timing.

Every figure is a ratio against a baseline measured in the same run on the same data:
repetitions of ours and of the baseline alternate (ours first on even repetitions, the
baseline first on odd ones) and the medians are compared, so drift on a shared machine
hits both sides alike.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import make_store


@dataclass
class Row:
    """One line of the table. ``ratio`` is ours/baseline (None when a figure did not run);
    ``met`` is "yes", "MISSED" or "not available: <reason>"."""

    figure: str
    ours: str = ""
    baseline: str = ""
    ratio: float | None = None
    target: str = ""
    met: str = ""
    note: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def unavailable(cls, figure: str, target: str, reason: str) -> "Row":
        return cls(figure=figure, target=target, met=f"not available: {reason}")


@dataclass
class Settings:
    """Sizes and repetition counts for one run (``--small`` or the full default)."""

    work: Path
    chats: int
    entries: int
    resume_prefix: int
    append_entries: dict[int, int]
    reps: int
    heavy_reps: int
    like_queries: int
    queries: int = 100
    profile: bool = False
    recover_shell: str | None = None
    repair_chats: int = 20
    repair_entries: int = 200

    @property
    def scratch(self) -> Path:
        path = self.work / "scratch"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def main_store(self) -> make_store.StoreInfo:
        return make_store.cached_store(self.work / "stores", self.chats, self.entries, progress=_progress)

    def small_store(self) -> make_store.StoreInfo:
        """A store an order of magnitude smaller than the main one (for the memory figure)."""
        return make_store.cached_store(self.work / "stores", max(1, self.chats // 10), self.entries,
                                       progress=_progress)


def _progress(done: int, total: int) -> None:
    if done == total or done % max(1, total // 10) == 0:
        log(f"  generating store: {done}/{total} chats")


def log(message: str) -> None:
    import sys
    print(message, file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took, and what it returned."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def interleave(reps: int, ours: Callable[[int], float], baseline: Callable[[int], float]) -> tuple[list[float], list[float]]:
    """Run ``reps`` repetitions of both sides, alternating which goes first.

    Each callable gets the repetition number and returns the seconds its measured part
    took (so per-repetition setup, such as copying a store, is not counted).
    """
    mine: list[float] = []
    base: list[float] = []
    for rep in range(reps):
        if rep % 2 == 0:
            mine.append(ours(rep))
            base.append(baseline(rep))
        else:
            base.append(baseline(rep))
            mine.append(ours(rep))
    return mine, base


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p50 of 100 values is the 50th smallest)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.4999)))
    return ordered[rank - 1]


def copy_store(src: str | Path, dst: Path) -> Path:
    """Copy a (checkpointed, closed) store file to ``dst``, removing leftovers of earlier runs."""
    for stale in (dst, Path(f"{dst}-wal"), Path(f"{dst}-shm")):
        stale.unlink(missing_ok=True)
    shutil.copyfile(src, dst)
    if Path(f"{src}-wal").exists():
        shutil.copyfile(f"{src}-wal", f"{dst}-wal")
    return dst


def remove_store(path: Path) -> None:
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), path.with_suffix(".lock")):
        stale.unlink(missing_ok=True)


def profiled(settings: Settings, name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` under cProfile when ``--profile`` is on; write the top of the profile
    (by cumulative time) to ``WORK/profile-<name>.txt``."""
    if not settings.profile:
        return fn()
    prof = cProfile.Profile()
    result = prof.runcall(fn)
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("cumulative")
    stats.print_stats(35)
    stats.sort_stats("tottime").print_stats(20)
    out = settings.work / f"profile-{name}.txt"
    out.write_text(buf.getvalue())
    log(f"  profile of {name} written to {out}")
    return result


def fmt_rate(per_second: float) -> str:
    return f"{per_second:,.0f}/s"


def fmt_seconds(seconds: float) -> str:
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def verdict(ok: bool) -> str:
    return "yes" if ok else "MISSED"


def trees_side_by_side(script: str, before: str | None, rounds: int, child_args: list[str]) -> dict[str, list[Any]]:
    """Run ``script --child RUNTIME *child_args`` once per tree per round, the order alternating
    round by round, and collect each child's JSON output by tree: "this tree" (this checkout's
    ``runtime``) and, with ``before`` (another checkout's ``runtime`` directory), "before" first."""
    import json
    import subprocess
    import sys

    trees = {"this tree": str(Path(__file__).resolve().parent.parent / "runtime")}
    if before:
        trees = {"before": str(Path(before).resolve()), **trees}
    results: dict[str, list[Any]] = {name: [] for name in trees}
    for round_ in range(rounds):
        order = list(trees.items()) if round_ % 2 == 0 else list(reversed(trees.items()))
        for name, runtime in order:
            out = subprocess.run([sys.executable, script, "--child", runtime, *child_args],
                                 capture_output=True, text=True, check=True)
            results[name].append(json.loads(out.stdout))
    return results
