"""While a REAL child process holds a store's lease, compact/archive/restore exit 3, name the
holder's pid, and change nothing: the db and -wal bytes of both files stay identical."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.storage.lease import WriteLease
from steerable_maint.cli import main
from tests.maintenance.crashkit import REPO
from tests.maintenance.storemaker import NEW, NOW, ChatSpec, file_bytes, make_store

HOLDER = """
import asyncio, sys
from steerable_agent_runtime.models import ChatMessage
from steerable_agent_runtime.storage.sqlite import SqliteStorage
store = SqliteStorage(sys.argv[1])
asyncio.run(store.append_message(ChatMessage(id="held", chat_id="chat-0000", role="user", content="only in the wal",
                                             created_at="2020-01-01T00:00:00Z")))
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def files(tmp_path):
    """A store with idle and recent chats, and an archive already holding one chat."""
    store = make_store(tmp_path / "sessions.db", [ChatSpec(0), ChatSpec(1), ChatSpec(2, age=NEW)])
    archive(store, to=tmp_path / "archive.db", older_than=timedelta(days=30), now=NOW, batch_size=1)
    return store, tmp_path / "archive.db"


def _hold(path: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def _release(proc: subprocess.Popen) -> None:
    proc.communicate(input="", timeout=30)
    assert proc.returncode == 0


def _argv(job: str, store: Path, arc: Path) -> list[str]:
    return {"compact": ["compact", str(store), "--traces-older-than", "30d"],
            "compact-dry": ["compact", str(store), "--traces-older-than", "30d", "--dry-run"],
            "archive": ["archive", str(store), "--to", str(arc), "--older-than", "30d"],
            "archive-dry": ["archive", str(store), "--to", str(arc), "--older-than", "30d", "--dry-run"],
            "restore": ["restore", str(arc), "--to", str(store), "--chat", "chat-0000"]}[job]


CASES = [("compact", "store"), ("compact-dry", "store"), ("archive", "store"), ("archive", "archive"),
         ("archive-dry", "archive"), ("restore", "store"), ("restore", "archive")]


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("job, held", CASES)
def test_write_job_refuses_while_another_process_holds_a_lease(files, job, held, as_json):
    store, arc = files
    holder = _hold(store if held == "store" else arc)
    try:
        before = file_bytes(store), file_bytes(arc)
        assert before[0 if held == "store" else 1]["-wal"], "the holder's commit should sit in the -wal"
        result = CliRunner().invoke(main, _argv(job, store, arc) + (["--json"] if as_json else []))
        assert result.exit_code == 3, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
        assert f"pid {holder.pid}" in lines[0] and result.stdout == "" and "Traceback" not in result.output
        assert (file_bytes(store), file_bytes(arc)) == before
    finally:
        _release(holder)
    free = store if held == "archive" else arc  # the lease we did get was given back
    WriteLease(free).acquire().release()


def test_archive_refused_by_a_held_store_lease_creates_no_archive(files, tmp_path):
    store, _ = files
    holder = _hold(store)
    try:
        result = CliRunner().invoke(main, _argv("archive", store, tmp_path / "new-archive.db"))
        assert result.exit_code == 3 and f"pid {holder.pid}" in result.stderr
    finally:
        _release(holder)
    assert not (tmp_path / "new-archive.db").exists()


LEASE_ONLY = """
import sys
from steerable_agent_runtime.storage.lease import WriteLease
lease = WriteLease(sys.argv[1]).acquire()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("job", ["archive", "restore"])
def test_a_refused_destination_leaves_the_source_and_its_pending_wal_untouched(tmp_path, job):
    """The destination is claimed before the source is opened: opening and closing the source
    for writing would checkpoint its -wal into the db file (and delete the -wal)."""
    import shutil

    from tests.maintenance.conftest import FIXTURES

    source = tmp_path / "sessions.db"
    for suffix in ("", "-wal"):
        shutil.copyfile(FIXTURES / "wal-pending" / f"sessions.db{suffix}", f"{source}{suffix}")
    other = tmp_path / "other.db"
    make_store(other, [ChatSpec(0)])
    holder = subprocess.Popen([sys.executable, "-c", LEASE_ONLY, str(other)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()
        before = file_bytes(source)
        assert before["-wal"]
        argv = (["archive", str(source), "--to", str(other), "--older-than", "30d"] if job == "archive"
                else ["restore", str(source), "--to", str(other), "--chat", "chat-0000"])
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 3 and f"pid {holder.pid}" in result.stderr, result.output
        assert file_bytes(source) == before
    finally:
        _release(holder)
