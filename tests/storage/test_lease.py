"""The write lease across real processes: exclusive, named, released by death, never deleted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_agent_runtime import SqliteStorage, StoreAlreadyOwnedError
from steerable_agent_runtime.storage.lease import lease_holder, lock_path_for
from tests.helpers import run

ROOT = Path(__file__).resolve().parents[2]


def start_child(*args: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-m", "tests.storage.children", *args], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    assert line.startswith("ready"), child.stderr.read()
    return child


@pytest.fixture
def holder(tmp_path):
    db = tmp_path / "sessions.db"
    child = start_child("hold", str(db))
    yield db, child
    child.kill()
    child.wait()


def test_lock_path_is_the_sibling_stem_lock():
    assert lock_path_for("/data/sessions.db") == Path("/data/sessions.lock")
    assert lock_path_for("/data/store") == Path("/data/store.lock")


def test_second_process_is_refused_naming_the_holder_pid(holder):
    db, child = holder
    with pytest.raises(StoreAlreadyOwnedError) as err:
        SqliteStorage(db)
    assert err.value.holder_pid == child.pid
    assert f"pid {child.pid}" in str(err.value) and err.value.hint


def test_a_symlink_to_the_store_is_refused_while_the_store_is_held(holder, tmp_path):
    """The lease belongs to the file, not to the name: through a link (in another folder, under
    another name) the store is the same one, so its holder's lease refuses it."""
    db, child = holder
    elsewhere = tmp_path / "links"
    elsewhere.mkdir()
    link = elsewhere / "other-name.db"
    link.symlink_to(db)
    assert lock_path_for(link) == lock_path_for(db)
    with pytest.raises(StoreAlreadyOwnedError) as err:
        SqliteStorage(link)
    assert err.value.holder_pid == child.pid
    assert not (elsewhere / "other-name.lock").exists()


def test_lease_holder_is_found_without_taking_the_lock(holder):
    db, child = holder
    found = lease_holder(db)
    assert found is not None and found.pid == child.pid


def test_second_open_in_the_same_process_is_refused(tmp_path):
    db = tmp_path / "sessions.db"
    first = SqliteStorage(db)
    with pytest.raises(StoreAlreadyOwnedError, match="this process"):
        SqliteStorage(db)
    run(first.close())
    second = SqliteStorage(db)  # released by close()
    run(second.close())


def test_sigkill_releases_the_lease_and_the_lock_file_stays(holder):
    db, child = holder
    lock = lock_path_for(db)
    inode = lock.stat().st_ino
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert lease_holder(db) is None
    store = SqliteStorage(db)
    assert lease_holder(db).pid == os.getpid()
    run(store.close())
    assert lock.exists() and lock.stat().st_ino == inode  # never deleted, never renamed
    assert sorted(p.name for p in db.parent.iterdir() if p.suffix == ".lock") == ["sessions.lock"]


def test_lock_file_is_private(tmp_path):
    db = tmp_path / "sessions.db"
    run(SqliteStorage(db).close())
    assert lock_path_for(db).stat().st_mode & 0o777 == 0o600
    assert db.stat().st_mode & 0o777 == 0o600
