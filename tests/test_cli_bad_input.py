"""Bad input to steerable-maint: the exit code, exactly one Error: line and one Hint: line,
no traceback, and nothing modified or created."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from steerable_maint.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HEALTHY = FIXTURES / "healthy" / "sessions.db"
NOBODY = 65534

READ_COMMANDS = {
    "check": lambda db: ["check", db],
    "inspect": lambda db: ["inspect", db],
    "history": lambda db: ["history", db, "chat-alpha"],
    "search": lambda db: ["search", db, "invoice"],
}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.iterdir())}


def assert_refused(result, code: int) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("Error: ") and lines[1].startswith("Hint: ") and len(lines[1]) > len("Hint: ")
    assert "Traceback" not in result.output and result.stdout == ""


def _missing(d: Path) -> Path:
    return d / "nope.db"


def _directory(d: Path) -> Path:
    (d / "adir").mkdir()
    return d / "adir"


def _empty(d: Path) -> Path:
    (d / "empty.db").write_bytes(b"")
    return d / "empty.db"


def _text(d: Path) -> Path:
    (d / "notes.db").write_text("these are my notes, not a database\n" * 10)
    return d / "notes.db"


def _foreign_sqlite(d: Path) -> Path:
    conn = sqlite3.connect(d / "other.db")
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    return d / "other.db"


def _other_application(d: Path) -> Path:
    conn = sqlite3.connect(d / "app.db")
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    return d / "app.db"


BAD_PATHS = {"missing path": _missing, "directory": _directory, "empty file": _empty, "text file": _text,
             "sqlite db that is not a store": _foreign_sqlite, "another application's db": _other_application}


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
@pytest.mark.parametrize("bad", sorted(BAD_PATHS))
def test_bad_path_cannot_run_exit_3_and_nothing_changes(tmp_path, command, bad):
    target = BAD_PATHS[bad](tmp_path)
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, [str(a) for a in READ_COMMANDS[command](target)])
    assert_refused(result, 3)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_bad_path_json_mode_still_prints_error_and_hint_only(tmp_path, command):
    result = CliRunner().invoke(main, [*map(str, READ_COMMANDS[command](_text(tmp_path))), "--json"])
    assert_refused(result, 3)


def _invoke_as_nobody(args: list[str]) -> dict:
    """Run the CLI in a forked child that dropped root (root reads any file, whatever its mode)."""
    CliRunner().invoke(main, [str(a) for a in READ_COMMANDS["check"](HEALTHY)])  # import lazily loaded modules
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = CliRunner().invoke(main, args)
            out = {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}
        except BaseException as exc:
            out = {"exit_code": -1, "stdout": "", "stderr": repr(exc)}
        os.write(write_fd, json.dumps(out).encode())
        os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    with os.fdopen(read_fd, "rb") as pipe:
        return json.loads(pipe.read())


class _Result:
    def __init__(self, out: dict) -> None:
        self.exit_code, self.stdout, self.stderr = out["exit_code"], out["stdout"], out["stderr"]
        self.output = self.stdout + self.stderr


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_unreadable_file_cannot_run_exit_3_and_nothing_changes(command):
    base = Path(tempfile.mkdtemp(prefix="steerable-unreadable-"))
    try:
        base.chmod(0o755)
        db = base / "sessions.db"
        shutil.copyfile(HEALTHY, db)
        db.chmod(0o600)  # owned by root: uid 65534 may not read it
        before = snapshot(base)
        result = _Result(_invoke_as_nobody([str(a) for a in READ_COMMANDS[command](db)]))
        assert_refused(result, 3)
        assert "cannot read" in result.stderr
        assert snapshot(base) == before
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("command", [
    lambda db, base: ["salvage", db, "--out", base / "out.jsonl"],
    lambda db, base: ["traces", db, "--out", base / "out.json"],
    lambda db, base: ["compact", db, "--traces-older-than", "30d"],
    lambda db, base: ["archive", db, "--to", base / "archive.db", "--older-than", "30d"],
], ids=["salvage", "traces", "compact", "archive"])
def test_unreadable_file_other_jobs_cannot_run_exit_3_and_nothing_changes(command):
    base = Path(tempfile.mkdtemp(prefix="steerable-unreadable-"))
    try:
        base.chmod(0o777)  # outputs could be written: only the source is unreadable
        db = base / "sessions.db"
        shutil.copyfile(HEALTHY, db)
        db.chmod(0o600)  # owned by root: uid 65534 may not read it
        before = snapshot(base)
        result = _Result(_invoke_as_nobody([str(a) for a in command(db, base)]))
        assert_refused(result, 3)
        assert "cannot read" in result.stderr
        assert snapshot(base) == before
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("command", [
    lambda db, base: ["compact", db, "--traces-older-than", "30d"],
    lambda db, base: ["archive", db, "--to", base / "archive.db", "--older-than", "30d"],
], ids=["compact", "archive"])
def test_a_store_that_cannot_be_written_is_exit_3_and_nothing_appears(command):
    base = Path(tempfile.mkdtemp(prefix="steerable-readonly-"))
    try:
        base.chmod(0o777)  # the directory is open: only the db file is read-only for uid 65534
        db = base / "sessions.db"
        shutil.copyfile(HEALTHY, db)
        db.chmod(0o644)
        before = snapshot(base)
        result = _Result(_invoke_as_nobody([str(a) for a in command(db, base)]))
        assert_refused(result, 3)
        assert "cannot write" in result.stderr
        assert snapshot(base) == before  # no -wal, -shm, lock file or archive appeared
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("args", [
    ["check", str(HEALTHY), "--max-per-code", "-1"],
    ["check", str(HEALTHY), "--wal-threshold", "lots"],
    ["check", str(HEALTHY), "--no-such-option"],
    ["check"],
    ["inspect"],
    ["history", str(HEALTHY)],
    ["search", str(HEALTHY)],
    ["search", str(HEALTHY), "invoice", "--limit", "0"],
    ["search", str(HEALTHY), "invoice", "--limit", "many"],
    ["search", str(HEALTHY), '"unterminated'],
    ["history", str(HEALTHY), "chat-does-not-exist"],
    ["no-such-command"],
], ids=lambda a: " ".join(Path(x).name if "/" in x else x for x in a))
def test_bad_arguments_are_usage_errors_exit_2(args):
    before = snapshot(HEALTHY.parent)
    result = CliRunner().invoke(main, args)
    assert_refused(result, 2)
    assert snapshot(HEALTHY.parent) == before


@pytest.mark.parametrize("args", [
    ["compact", "{db}", "--traces-older-than", "3 parsecs"],
    ["compact", "{db}", "--traces-older-than", "-5d"],
    ["archive", "{db}", "--to", "{dir}/archive.db", "--older-than", "soon"],
], ids=["compact-parsecs", "compact-negative", "archive-soon"])
def test_bad_duration_is_a_usage_error_and_nothing_changes(tmp_path, args):
    shutil.copyfile(HEALTHY, tmp_path / "sessions.db")
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, [a.format(db=tmp_path / "sessions.db", dir=tmp_path) for a in args])
    assert_refused(result, 2)
    assert snapshot(tmp_path) == before


def test_archive_target_that_exists_and_is_not_a_store_cannot_run(tmp_path):
    shutil.copyfile(HEALTHY, tmp_path / "sessions.db")
    (tmp_path / "archive.db").write_text("my shopping list\n")
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, ["archive", str(tmp_path / "sessions.db"), "--to", str(tmp_path / "archive.db"),
                                       "--older-than", "90d"])
    assert_refused(result, 3)
    after = snapshot(tmp_path)
    after.pop("sessions.lock", None)  # taking a lease creates its lock file, as any opener does
    assert after == before


@pytest.mark.parametrize("command", [
    lambda db, out: ["salvage", str(db), "--out", str(out)],
    lambda db, out: ["traces", str(db), "--out", str(out)],
], ids=["salvage", "traces"])
def test_a_full_disk_is_a_one_line_error_and_nothing_is_published(command, tmp_path):
    """A real child process whose files may not grow past 512 bytes (RLIMIT_FSIZE, as a full
    disk: EFBIG where ENOSPC would be) runs the command: exit 3, Error/Hint, no traceback,
    no output, the store unchanged."""
    import resource
    import signal
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(HEALTHY, src / "sessions.db")
    before = snapshot(src)

    def small_files() -> None:  # in the child, before exec
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    done = subprocess.run([sys.executable, "-m", "steerable_agent_runtime.maintenance",
                           *command(src / "sessions.db", tmp_path / "out")],
                          preexec_fn=small_files, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("Error: ") and "Hint: " in done.stderr and "Traceback" not in done.stderr
    assert "internal error" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"] and snapshot(src) == before
