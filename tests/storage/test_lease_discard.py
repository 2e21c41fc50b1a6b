"""A job's lease removes what it created, and nothing else (storage/lease.py, leftovers.py).

``release(discard=True)`` removes the lock file only when this lease created it, is still
holding it, and the name still points at it; a lock file another process created or holds
stays. Removing it never lets two processes hold one lease (real processes race for it). A
``-shm`` or empty ``-wal`` that appeared while the lease was held is removed only when no
connection, in any process, has the store open."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_agent_runtime import StoreAlreadyOwnedError
from steerable_agent_runtime.storage.leftovers import discard_new_siblings, present_siblings
from steerable_agent_runtime.storage.lease import WriteLease, lease_holder, lock_path_for
from tests.helpers import wal_only_copy

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "fixtures" / "healthy" / "sessions.db"


def test_a_job_lease_removes_the_lock_file_it_created(tmp_path):
    db = tmp_path / "sessions.db"
    lease = WriteLease(db).acquire()
    assert lock_path_for(db).exists()
    lease.release(discard=True)
    assert not lock_path_for(db).exists()
    with WriteLease(db):  # a with block is a job
        assert lock_path_for(db).exists()
    assert not lock_path_for(db).exists()


def test_the_apps_lease_and_a_lock_file_found_there_stay(tmp_path):
    db = tmp_path / "sessions.db"
    WriteLease(db).acquire().release()  # release() without discard: the app's lease
    lock = lock_path_for(db)
    inode = lock.stat().st_ino
    lease = WriteLease(db).acquire()  # this one found the file: not its to remove
    lease.release(discard=True)
    assert lock.stat().st_ino == inode


def test_a_lock_file_replaced_under_the_holder_is_not_removed(tmp_path):
    db = tmp_path / "sessions.db"
    lock = lock_path_for(db)
    lease = WriteLease(db).acquire()
    os.rename(lock, tmp_path / "moved.lock")
    lock.write_bytes(b"")  # someone else's file under the name now
    inode = lock.stat().st_ino
    lease.release(discard=True)
    assert lock.stat().st_ino == inode and (tmp_path / "moved.lock").exists()


HOLD = ("import sys\nfrom steerable_agent_runtime.storage.lease import WriteLease\n"
        "lease = WriteLease(sys.argv[1]).acquire()\nprint('ready', flush=True)\nsys.stdin.read()\n"
        "lease.release(discard=True)\n")


def test_a_lock_file_another_process_created_and_holds_is_never_removed(tmp_path):
    db = tmp_path / "sessions.db"
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        inode = lock_path_for(db).stat().st_ino
        for _ in range(3):
            with pytest.raises(StoreAlreadyOwnedError):
                WriteLease(db).acquire()
            with pytest.raises(StoreAlreadyOwnedError), WriteLease(db):
                pass
        assert lock_path_for(db).stat().st_ino == inode
        assert lease_holder(db).pid == child.pid
    finally:
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    assert not lock_path_for(db).exists()  # its creator removed it when its job ended


RACE = """
import os, sys
from steerable_agent_runtime.errors import StoreAlreadyOwnedError
from steerable_agent_runtime.storage.lease import WriteLease
db, inside, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = 0
for _ in range(rounds):
    try:
        with WriteLease(db):
            fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another holder is inside
            os.close(fd)
            os.unlink(inside)
            held += 1
    except StoreAlreadyOwnedError:
        pass
print(held)
"""


def test_removing_lock_files_never_gives_two_processes_the_lease(tmp_path):
    db, inside = tmp_path / "sessions.db", tmp_path / "inside"
    children = [subprocess.Popen([sys.executable, "-c", RACE, str(db), str(inside), "400"], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(child.wait(timeout=120), *child.communicate()) for child in children]
    assert all(code == 0 for code, _out, _err in results), results  # a FileExistsError: two holders at once
    assert sum(int(out) for _code, out, _err in results) > 0


def test_a_lock_on_a_file_its_creator_removed_meanwhile_is_not_taken(tmp_path):
    # What a racing acquirer meets: it opened the lock file, then the job that created it
    # removed it and let go, and a third opener may already have made a new one.
    from steerable_agent_runtime.storage.lease import _lock, _lock_named

    lock = lock_path_for(tmp_path / "sessions.db")
    lock.write_bytes(b"")
    early = os.open(lock, os.O_RDWR)
    try:
        lock.unlink()
        lock.write_bytes(b"")
        assert _lock_named(early, lock) is False
        other = os.open(f"/proc/self/fd/{early}", os.O_RDWR)  # a second open of the removed file
        try:
            assert _lock(other)  # the lock on it was let go again
        finally:
            os.close(other)
        holder = WriteLease(tmp_path / "sessions.db").acquire()  # the file the name points at
        assert _lock_named(os.open(lock, os.O_RDWR), lock) is None
        holder.release()
    finally:
        os.close(early)


def _wal_store(folder: Path) -> Path:
    """A store whose -wal holds committed frames, with no -shm beside it (its writer died)."""
    return wal_only_copy(HEALTHY, folder / "sessions.db", "UPDATE sessions SET updated_at = updated_at")


def _read_only_look(db: Path) -> None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.execute("SELECT count(*) FROM sessions").fetchone()
    conn.close()


def test_a_shm_a_closed_read_only_connection_left_is_removed_and_the_wal_kept(tmp_path):
    db = _wal_store(tmp_path)
    before = present_siblings(db)
    wal = Path(f"{db}-wal").read_bytes()
    _read_only_look(db)
    assert Path(f"{db}-shm").exists()
    discard_new_siblings(db, before)
    assert not Path(f"{db}-shm").exists() and Path(f"{db}-wal").read_bytes() == wal
    _read_only_look(db)  # still readable, the -wal's frames included


READER = ("import sqlite3, sys\nconn = sqlite3.connect(sys.argv[1])\n"
          "conn.execute('SELECT count(*) FROM sessions').fetchone()\nprint('ready', flush=True)\nsys.stdin.read()\n")


def test_a_shm_another_process_has_open_is_never_removed(tmp_path):
    db = _wal_store(tmp_path)
    before = present_siblings(db)
    child = subprocess.Popen([sys.executable, "-c", READER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        inode = Path(f"{db}-shm").stat().st_ino
        discard_new_siblings(db, before)
        assert Path(f"{db}-shm").stat().st_ino == inode
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_a_shm_this_process_has_open_is_never_removed_nor_its_lock_dropped(tmp_path):
    db = _wal_store(tmp_path)
    before = present_siblings(db)
    conn = sqlite3.connect(db)
    try:
        conn.execute("SELECT count(*) FROM sessions").fetchone()
        inode = Path(f"{db}-shm").stat().st_ino
        discard_new_siblings(db, before)
        assert Path(f"{db}-shm").stat().st_ino == inode
        mine = [line for line in Path("/proc/locks").read_text().splitlines()
                if f":{os.stat(db).st_ino} " in line and f" {os.getpid()} " in line]
        assert mine  # this connection's SQLite lock on the db file is still there
    finally:
        conn.close()
