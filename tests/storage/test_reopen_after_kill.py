"""Reopening, in the same process, a store whose writer was SIGKILLed mid-commit, after an
in-process read-only job (``check``) read it: the crash test's sequence (tests/loop/test_crash.py).

The states are made exactly, with a real writer process: it opens the store (SQLite builds the
-wal index in -shm), the -shm is saved, it commits once, it is killed, and the files are put
back to what a kill at the chosen point leaves (-shm as before the commit; -wal cut to its
32-byte header, or kept whole). A readonly_shm reader cannot use such a -wal index (SQLite spins,
then answers SQLITE_PROTOCOL). Its failed connection used to be dropped without close(): a
sqlite3.Connection sits in a reference cycle, so it stayed open until the cyclic GC ran, and
while it was open this process's next SqliteStorage reused its read-only -shm mapping and got
a persistent SQLITE_PROTOCOL ("another program holds a SQLite lock") that a fresh process did
not: the 1-in-3 flake of the crash test under load."""

from __future__ import annotations

import gc
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.maintenance import check
from steerable_agent_runtime.maintenance.readonly import ReadOnlyConnection

from tests.helpers import message, run

WRITER = r"""
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("SELECT count(*) FROM messages").fetchone()  # -wal and -shm opened, the index built
print("READY", flush=True)
sys.stdin.readline()
c.execute("CREATE TABLE scratch (x)")  # one commit: the -wal header, the frames, the index
print("COMMITTED", flush=True)
sys.stdin.readline()
"""


def killed_mid_commit(db: Path, keep_frames: bool) -> None:
    """Leave ``db`` as a writer SIGKILLed inside its first commit leaves it: the -wal index
    (-shm) as before the commit, and the -wal cut to its header (``keep_frames`` False: killed
    between the header and the first frame) or whole (killed before it updated the index)."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        shm_before = Path(f"{db}-shm").read_bytes()
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "COMMITTED"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wal = Path(f"{db}-wal")
    if not keep_frames:
        with open(wal, "r+b") as fh:  # no connection of this process has the store open yet
            fh.truncate(32)
    with open(f"{db}-shm", "r+b") as fh:
        fh.write(shm_before)
        fh.truncate()


def open_readonly_connections() -> int:
    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, ReadOnlyConnection):
            try:
                obj.total_changes
            except sqlite3.ProgrammingError:  # closed
                continue
            count += 1
    return count


@pytest.mark.parametrize("keep_frames", [False, True], ids=["wal-header-only", "index-not-updated"])
def test_check_then_reopen_in_process_after_a_kill_mid_commit(tmp_path, keep_frames):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_message(message("m1")))
    run(store.close())  # the -wal is checkpointed and removed: the next commit starts a new one
    killed_mid_commit(db, keep_frames)
    gc.disable()  # a dropped connection stays open until the cyclic GC runs: make "never" certain
    try:
        report = check(db)
        assert not [f for f in report.findings if f.severity == "error"], report.findings
        assert open_readonly_connections() == 0, "a read-only job left a connection open"
        store = SqliteStorage(db)  # before the fix: StoreAlreadyOwnedError (SQLITE_PROTOCOL)
        try:
            assert [m.id for m in run(store.list_messages("c1"))] == ["m1"]
            run(store.append_message(message("m2")))
        finally:
            run(store.close())
    finally:
        gc.enable()
    assert check(db).exit_code == 0


def test_a_failed_shared_open_is_closed_at_once(tmp_path):
    """The root cause itself: the live files opened ``readonly_shm`` where SQLite answers
    SQLITE_PROTOCOL (a header-only -wal beside a stale index: SQLite spins ~10 s first). The
    failed connection must be closed then and there, not left to the cyclic GC: while it is
    open, a SqliteStorage of this process cannot open the store."""
    from steerable_agent_runtime.maintenance.readonly import _try_shared

    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_message(message("m1")))
    run(store.close())
    killed_mid_commit(db, keep_frames=False)
    gc.disable()  # the leak must not depend on when the cyclic GC happens to run
    try:
        assert _try_shared(db) is None
        assert open_readonly_connections() == 0, "the failed readonly_shm connection is still open"
        store = SqliteStorage(db)
        run(store.close())
    finally:
        gc.enable()
