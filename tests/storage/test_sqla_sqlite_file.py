"""SqlAlchemyStorage on a SQLite file gets SqliteStorage's file protections, for every connection.

SqliteStorage opens its file once, after storage/access.py's probe (no FIFO, socket, device or
directory as the db or beside it), under sqlitefile/pinned.py's ``opening()``. SqlAlchemyStorage
on aiosqlite checks the same at open, but its pool opens new connections for its whole life
(pool growth, a new event loop): each one must still be to the regular file that was checked, or
nothing. Real files, real aiosqlite pools, real event loops (``asyncio.run`` per call makes a new
engine, so the next call opens a new connection), a real second process for the locks.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from steerable_agent_runtime import NotAStoreError, SqliteStorage
from steerable_agent_runtime.sqlitefile import pinned
from steerable_agent_runtime.storage.access import check_before_open
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

from tests.helpers import digest_files, message, run, session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, sockets and POSIX locks")


def _in_thread(fn, timeout: float = 20.0):
    """Run ``fn`` in a thread (a FIFO open would block the test forever); its result or error."""
    out: dict = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked: a FIFO or a device was opened"
    return out


def _store(tmp_path: Path, name: str = "s.db") -> Path:
    db = tmp_path / name
    store = SqliteStorage(db)
    run(store.upsert_session(session("s1")))
    run(store.close())
    return db


def _special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()


@pytest.mark.parametrize("where", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
def test_a_special_file_as_the_db_or_beside_it_is_refused_before_opening(tmp_path, kind, where):
    db = _store(tmp_path) if where else tmp_path / "s.db"
    _special(Path(f"{db}{where}"), kind)
    before, names = digest_files(tmp_path), sorted(os.listdir(tmp_path))
    out = _in_thread(lambda: run(SqlAlchemyStorage(f"sqlite:///{db}").open()))
    assert isinstance(out.get("error"), NotAStoreError), out
    assert "nothing was opened" in str(out["error"]) or "directory" in str(out["error"])
    assert digest_files(tmp_path) == before and sorted(os.listdir(tmp_path)) == names


def _opened(tmp_path: Path, url_path: Path) -> SqlAlchemyStorage:
    store = SqlAlchemyStorage(f"sqlite:///{url_path}")
    assert run(store.get_session("s1")) is not None  # opened, one connection made and pooled
    return store


def test_a_link_repointed_after_open_is_refused_not_followed(tmp_path):
    a, b = _store(tmp_path, "a.db"), _store(tmp_path, "b.db")
    link = tmp_path / "link.db"
    link.symlink_to(a)
    store = _opened(tmp_path, link)
    run(store.upsert_session(session("s2")))  # a new loop: a new connection, still a.db
    link.unlink()
    link.symlink_to(b)
    before = b.read_bytes()
    for call in (lambda: store.get_session("s2"), lambda: store.upsert_session(session("s3"))):
        with pytest.raises(NotAStoreError, match="no longer the file") as err:
            run(call())
        assert str(link) in str(err.value) and err.value.hint
    run(store.close())
    assert b.read_bytes() == before and not Path(f"{b}-wal").exists()  # nothing written through the new link
    check = SqliteStorage(a)
    assert run(check.get_session("s2")) is not None and run(check.get_session("s3")) is None
    run(check.close())


@pytest.mark.parametrize("change", ["replaced by another store", "deleted", "a fifo", "a directory", "fifo -journal"])
def test_a_file_changed_under_an_open_store_is_refused_and_nothing_is_created(tmp_path, change):
    db = _store(tmp_path)
    store = _opened(tmp_path, db)
    if change == "replaced by another store":
        os.replace(_store(tmp_path, "other.db"), db)
    elif change == "deleted":
        db.unlink()
    elif change == "fifo -journal":
        os.mkfifo(f"{db}-journal")
    else:
        db.unlink()
        _special(db, change.split()[-1])
    names = set(os.listdir(tmp_path))
    replacement = db.read_bytes() if change.startswith("replaced") else None
    # the next call runs in a new event loop: the pool of the old one is closed (its connections
    # finish with the file they opened) and a new connection is asked for
    out = _in_thread(lambda: run(store.upsert_session(session("s9"))))
    assert isinstance(out.get("error"), NotAStoreError), out
    assert str(db) in str(out["error"]) and "nothing was opened" in str(out["error"]) and out["error"].hint
    assert set(os.listdir(tmp_path)) <= names  # no file created (SQLite would have made an empty db)
    if replacement is not None:
        assert db.read_bytes() == replacement
        other = SqliteStorage(db)
        assert run(other.get_session("s9")) is None
        run(other.close())
    elif change != "deleted":
        assert not db.is_file() or Path(f"{db}-journal").is_fifo()
    _in_thread(lambda: run(store.close()))


def test_the_same_file_keeps_working_across_loops_pool_growth_and_a_chdir(tmp_path, monkeypatch):
    _store(tmp_path)
    monkeypatch.chdir(tmp_path)
    store = SqlAlchemyStorage("sqlite:///s.db")  # relative: resolved once, when the store opens
    assert run(store.get_session("s1")) is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    async def many() -> list:
        await asyncio.gather(*(store.append_message(message(f"m{i}")) for i in range(12)))
        return await store.list_messages("c1")

    assert len(run(many())) == 12  # a dozen concurrent calls: the pool grows past one connection
    assert run(store.get_session("s1")) is not None
    run(store.close())
    assert os.listdir(elsewhere) == []


def test_new_connections_are_made_under_pinned_opening(tmp_path):
    """A pool connection made while an in-process reader decides whether it may close its
    descriptor of the file could lose its first lock (sqlitefile/pinned.py): connections are
    made holding ``opening()``, so one cannot be made while another thread holds it."""
    db = _store(tmp_path)
    store = _opened(tmp_path, db)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with pinned.opening():
            held.set()
            release.wait(30)

    threading.Thread(target=holder, daemon=True).start()
    assert held.wait(10)
    result: dict = {}
    caller = threading.Thread(target=lambda: result.setdefault("s", run(store.get_session("s1"))), daemon=True)
    caller.start()  # a new loop in this thread: the store needs a new connection
    caller.join(0.5)
    blocked = caller.is_alive()
    release.set()
    caller.join(20)
    assert blocked, "a pool connection was made while opening() was held by another thread"
    assert result["s"] is not None
    run(store.close())


def test_an_in_process_probe_leaves_the_pools_sqlite_locks_alone(tmp_path):
    """An open pool, a probe of the same file in this process, then another process comes and
    goes: the -wal and -shm stay and the next commit is visible to another process."""
    db = _store(tmp_path)
    store = SqlAlchemyStorage(f"sqlite:///{db}")

    async def body() -> None:
        await store.append_message(message("m1"))
        check_before_open(db)
        count = "import sqlite3; c = sqlite3.connect({!r}); print(c.execute('SELECT count(*) FROM messages')" \
                ".fetchone()[0]); c.close()".format(str(db))
        assert subprocess.run([sys.executable, "-c", count], capture_output=True, text=True,
                              timeout=60).stdout.strip() == "1"
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists(), "a reader deleted the live -wal/-shm"
        await store.append_message(message("m2"))
        assert subprocess.run([sys.executable, "-c", count], capture_output=True, text=True,
                              timeout=60).stdout.strip() == "2"
        await store.close()

    run(body())
