"""In-process reads of a live store's files must not drop the SQLite locks this process holds.

POSIX: closing ANY descriptor of a file drops ALL of this process's fcntl locks on it, the ones
an open sqlite3 connection holds through its own descriptor included. A job run in the same
process as an open SqliteStorage (check, inspect, salvage, a refused second opener: each reads
the db's header or pages with a descriptor of its own) used to unlock the live writer; another
process closing its last connection then believed it was alone, checkpointed and DELETED the
-wal and -shm the writer still used, and the writer's next acknowledged commit went to an
unlinked file: invisible to every other process, lost at a crash (sqlitefile/pinned.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.errors import StoreAlreadyOwnedError
from steerable_agent_runtime.maintenance import check, history, inspect_store, salvage, search
from steerable_agent_runtime.maintenance.readonly import read_store
from steerable_agent_runtime.sqlitefile import pinned
from steerable_agent_runtime.storage.access import check_before_open, probe
from steerable_agent_runtime.storage.snapshot import Snapshot

from tests.helpers import message, run, session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX lock semantics (Windows locks are per handle)")


def other_process(code: str, db: Path) -> str:
    """Run ``code`` with ``c`` a fresh sqlite3 connection to ``db`` in another interpreter."""
    done = subprocess.run([sys.executable, "-c", f"import sqlite3\nc = sqlite3.connect({str(db)!r}, timeout=0)\n"
                           f"{code}\nc.close()"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def second_opener(db: Path, tmp: Path) -> None:
    with pytest.raises(StoreAlreadyOwnedError):
        SqliteStorage(db)


def private_copy(db: Path, tmp: Path) -> None:
    into = tmp / "copy"
    into.mkdir()
    Snapshot.private_copy(db, into)


IN_PROCESS = {
    "check": lambda db, tmp: check(db),
    "inspect": lambda db, tmp: inspect_store(db),
    "history": lambda db, tmp: history(db, "c1"),
    "search": lambda db, tmp: search(db, "hello"),
    "read_store": lambda db, tmp: read_store(db, lambda conn: conn.execute("SELECT 1").fetchone()),
    "salvage": lambda db, tmp: salvage(db, tmp / "rows.jsonl"),
    "probe": lambda db, tmp: probe(db),
    "check_before_open": lambda db, tmp: check_before_open(db),
    "refused second SqliteStorage": second_opener,
    "private copy": private_copy,
}


@pytest.mark.parametrize("job", list(IN_PROCESS))
def test_an_in_process_job_leaves_the_open_writer_locked(tmp_path, job):
    """An open SqliteStorage, a job on the same store in this process, then a reader process
    comes and goes: the -wal and -shm must stay, and a commit acknowledged afterwards must be
    visible to another process (before the fix: the reader's close deleted both files and the
    commit landed in the unlinked -wal)."""
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    try:
        run(store.upsert_session(session("s1", chat="c1")))
        run(store.append_message(message("m1")))
        IN_PROCESS[job](db, tmp_path)
        assert other_process("print(c.execute('SELECT count(*) FROM messages').fetchone()[0])", db) == "1"
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists(), "a reader deleted the live -wal/-shm"
        run(store.append_message(message("m2")))
        seen = other_process("print(c.execute('SELECT count(*) FROM messages').fetchone()[0])", db)
        assert seen == "2", "the commit acknowledged after the job is invisible to other processes"
    finally:
        run(store.close())


def test_open_pinned_keeps_a_connections_lock_and_plain_open_does_not(tmp_path):
    """The mechanism, on a rollback-journal db: a read transaction holds a SHARED lock, so
    another process cannot take an exclusive one. Reading the file through open_pinned
    leaves the lock held; a plain open()/close() (the control) drops it."""
    db = tmp_path / "plain.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("BEGIN")
    conn.execute("SELECT * FROM t").fetchall()  # SHARED lock until COMMIT
    grab = ("try:\n    c.execute('BEGIN EXCLUSIVE')\n    print('taken')\nexcept sqlite3.OperationalError as e:\n"
            "    print('refused', e)")
    try:
        with pinned.open_pinned(db) as fh:
            assert fh.read(16) == b"SQLite format 3\x00"
        assert other_process(grab, db).startswith("refused"), "open_pinned dropped the connection's lock"
        assert pinned.parked(db) == 1  # kept open: closing it would have unlocked the connection
        with open(db, "rb") as fh:  # the pitfall itself, so this test can tell the difference
            fh.read(16)
        assert other_process(grab, db) == "taken"
    finally:
        conn.execute("COMMIT")
        conn.close()


def test_a_parked_descriptor_is_closed_once_the_connection_is_gone(tmp_path):
    """No descriptor leaks: with no connection left on the file, the next pinned read closes
    the parked descriptors (so thousands of stores probed in one process use no more fds)."""
    db = tmp_path / "one.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    with pinned.open_pinned(db) as fh:
        fh.read(1)
    assert pinned.parked(db) == 1
    conn.close()
    other = tmp_path / "other.db"
    other.write_bytes(b"x" * 10)
    with pinned.open_pinned(other) as fh:
        assert fh.read() == b"x" * 10
    assert pinned.parked(db) == 0
