"""Run steerable-maint as a real child process, with a timeout.

Every run has a timeout, so a job that blocks (opening a FIFO, say) fails its test instead
of hanging the suite.

- :func:`cli` executes the installed console script (a fresh interpreter: argv decoding,
  pipes and exit codes exactly as an operator gets them). About a second of start-up each.
- :func:`forked_many` runs a large table of cases as forked children of this process, each
  calling the console script's entry point (``steerable_maint.cli:main``, the function the
  script calls) with its own argv, environment, and stdout/stderr files: a separate process
  per case, minus the interpreter start-up, so a table of hundreds of cases stays fast.
  Children are forked from the main thread only, at most a few at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CLI = Path(sys.executable).with_name("steerable-maint")
TIMEOUT_S = 60.0


@dataclass
class Ran:
    """One finished (or timed-out) run: the exit code (None: killed at the timeout)."""

    args: list
    code: int | None
    stdout: bytes
    stderr: bytes

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def describe(self) -> str:
        return f"args={self.args!r} exit={self.code}\nstdout={self.out[:2000]!r}\nstderr={self.err[:2000]!r}"


def cli(args: Sequence[str | bytes | os.PathLike], *, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT_S, cwd: str | os.PathLike | None = None) -> Ran:
    """Run ``steerable-maint ARGS``; a run still going after ``timeout`` is killed (code None)."""
    argv = [str(CLI), *(a if isinstance(a, bytes) else os.fspath(a) for a in args)]
    full_env = {k: v for k, v in os.environ.items() if k != "STEERABLE_DEBUG"}
    full_env.update({"COLUMNS": "200", **(env or {})})
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, env=full_env, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return Ran(list(args), None, exc.stdout or b"", exc.stderr or b"")
    return Ran(list(args), done.returncode, done.stdout, done.stderr)


def forked_many(cases: dict[str, list], *, timeout: float = 30.0, workers: int = 4,
                env: dict[str, str] | None = None) -> dict[str, Ran]:
    """Run ``steerable-maint ARGV`` for each case in a forked child (see the module doc)."""
    import tempfile
    import time

    from steerable_maint.cli import main as entry  # what the console script calls

    pending = list(cases.items())
    running: dict[int, tuple[str, list, Path, float]] = {}
    results: dict[str, Ran] = {}
    scratch = Path(tempfile.mkdtemp(prefix="cliproc-"))
    try:
        while pending or running:
            while pending and len(running) < workers:
                name, argv = pending.pop(0)
                out = scratch / f"{len(results) + len(running)}-{os.getpid()}"
                pid = _fork_case(entry, argv, out, env)
                running[pid] = (name, argv, out, time.monotonic())
            for pid, (name, argv, out, started) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done == 0 and time.monotonic() - started < timeout:
                    continue
                if done == 0:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    code = None
                else:
                    code = os.waitstatus_to_exitcode(status)
                results[name] = Ran(argv, code, (out.with_suffix(".out")).read_bytes(),
                                    (out.with_suffix(".err")).read_bytes())
                del running[pid]
            time.sleep(0.005)
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _fork_case(entry: Callable[[], object], argv: list, out: Path, env: dict[str, str] | None) -> int:
    stdout = os.open(out.with_suffix(".out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stderr = os.open(out.with_suffix(".err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid:
        os.close(stdout)
        os.close(stderr)
        return pid
    code = 4  # pragma: no cover - the child reports through its exit code and files
    try:  # pragma: no cover
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        for key in [k for k in os.environ if k == "STEERABLE_DEBUG"]:
            del os.environ[key]
        os.environ.update({"COLUMNS": "200", **(env or {})})
        sys.argv = [str(CLI), *(os.fsdecode(a) if isinstance(a, bytes) else os.fspath(a) for a in argv)]
        try:
            entry()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # pragma: no cover
        import traceback

        traceback.print_exc()
    finally:  # pragma: no cover
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        os._exit(code)


def run_many(jobs: dict[str, Callable[[], Ran]], workers: int = 4) -> dict[str, Ran]:
    """Run each job (a closure calling :func:`cli`) in a small thread pool; results by name."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def assert_refused(ran: Ran, *codes: int) -> None:
    """Exit with one of ``codes``; stderr exactly one ``Error:`` line and one ``Hint:`` line;
    no traceback; nothing on stdout."""
    assert ran.code is not None, "timed out (blocked?): " + ran.describe()
    assert ran.code in codes, ran.describe()
    lines = ran.err.splitlines()
    assert len(lines) == 2, ran.describe()
    assert lines[0].startswith("Error: ") and len(lines[0]) > len("Error: "), ran.describe()
    assert lines[1].startswith("Hint: ") and len(lines[1]) > len("Hint: "), ran.describe()
    assert "Traceback" not in ran.err and "internal error" not in ran.err, ran.describe()
    assert ran.stdout == b"", ran.describe()


def listing(folder: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``folder`` (recursively) with its kind and, for files, its size."""
    out: dict[str, tuple[str, int]] = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        kind = ("dir" if p.is_dir() and not p.is_symlink() else "link" if p.is_symlink() else
                "file" if p.is_file() else "fifo" if p.is_fifo() else "socket" if p.is_socket() else
                "char" if p.is_char_device() else "other")
        out[str(p.relative_to(folder))] = (kind, st.st_size if kind == "file" else 0)
    return out
