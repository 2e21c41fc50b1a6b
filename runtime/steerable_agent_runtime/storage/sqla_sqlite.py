"""How SqlAlchemyStorage opens its SQLite file: once checked, then every pool connection to that file.

SqliteStorage opens its file once, after storage/access.py's checks, under
sqlitefile/pinned.py's ``opening()``. An aiosqlite pool opens connections for the store's whole
life (pool growth, a new engine for a new event loop), each by name, so without more a later
connection could open whatever the name means by then: a link re-pointed at another store, a
file replaced, moved or deleted (SQLite would create an empty one), a FIFO put in its place. So:

- :meth:`SqliteFile.check` (at ``open``) runs :func:`.access.check_before_open` (no FIFO, socket,
  device or directory as the db or beside it, no foreign or newer file), creates a missing store
  atomically, and remembers the file: its real path (links and a relative name resolved once, so
  a later ``chdir`` changes nothing) and its identity (device, inode).
- :meth:`SqliteFile.connect` (every pool connection, in aiosqlite's thread) holds
  ``pinned.opening()`` (an in-process reader deciding whether it may close its descriptor of the
  file sees this connection), refuses special files beside the real path (stat only), refuses
  when the name no longer leads to the remembered file, then connects to the real path with
  ``mode=rw`` (SQLite never creates a file) and checks the identity again.

A refusal is NotAStoreError naming the path, raised before anything is opened or created; the
pool's connections made before stay on the file they opened. Takes no lease (SQLite's locks
serialise writers).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path
from threading import Thread
from typing import Any

from ..errors import NotAStoreError
from ..sqlitefile.pinned import opening
from .access import check_before_open, create_store, store_uri
from .specialfiles import refuse_special_files

BUSY_TIMEOUT_S = 30
"""SQLite's busy timeout for pool connections: a writer waits this long for the write lock."""

_REOPEN_HINT = ("put the store back where this SqlAlchemyStorage opened it, or close it and open a new one on the"
                " file now at that path (a running store never switches files under its open connections)")


class SqliteFile:
    """The SQLite file of one SqlAlchemyStorage: checked at open, the same for every connection."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.named = self.path  # the name made absolute at open (a later chdir changes nothing)
        self.real: Path | None = None
        self.identity: tuple[int, int] | None = None

    def check(self, *, create: bool) -> None:
        """Check the file as SqliteStorage does (see the module docstring) and remember it; create
        a missing store when ``create``. Raises NotAStoreError (also for a missing file without
        ``create``), StoreAccessError, SchemaTooNewError, DatabaseDamagedError,
        RepairInterruptedError; nothing is created then."""
        if not check_before_open(self.path, allow_missing=True).exists:
            if not create:
                raise NotAStoreError(f"{self.path}: no such file", path=str(self.path),
                                     hint="pass an existing store, or open with create=True")
            create_store(self.path)
        named, real = Path(os.path.abspath(self.path)), Path(os.path.realpath(self.path))
        if real != named:
            refuse_special_files(real)  # SQLite keeps -wal and -shm beside the real file
        identity = _regular_identity(real)
        if identity is None:
            raise NotAStoreError(f"{self.path}: not a regular file; nothing was opened", path=str(self.path),
                                 hint="pass the path of the database file")
        self.named, self.real, self.identity = named, real, identity

    def connect(self) -> sqlite3.Connection:
        """A new sqlite3 connection to the remembered file (called in aiosqlite's thread).

        Raises NotAStoreError, before opening anything, when :meth:`check` has not run, when a
        special file sits beside the file, or when the store's path no longer leads to it
        (re-linked, replaced, moved, deleted)."""
        with opening():
            self.refuse_changed()
            conn = sqlite3.connect(store_uri(self.real, "mode=rw"), uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                self._refuse_changed()  # replaced between the check and SQLite's open
            except BaseException:
                conn.close()
                raise
        return conn

    async def aiosqlite_connection(self) -> Any:
        """An aiosqlite connection made by :meth:`connect` (SQLAlchemy's ``async_creator``).

        A file that already changed is refused here, before aiosqlite starts a thread; the
        check under ``opening()`` in :meth:`connect` then closes the race."""
        import aiosqlite

        self.refuse_changed()
        conn = aiosqlite.Connection(self.connect, 64)
        worker = conn if isinstance(conn, Thread) else conn._thread  # a Thread itself before aiosqlite 0.22
        worker.daemon = True  # as SQLAlchemy's own aiosqlite connect does: never hold up interpreter exit
        try:
            return await conn
        except BaseException:
            # aiosqlite stops its thread with a future of this loop: let the thread finish while
            # the loop still runs (asyncio.run closing it first leaves the thread an exception)
            await asyncio.to_thread(worker.join, 5)
            raise

    def refuse_changed(self) -> None:
        """NotAStoreError when a special file sits beside the file or the store's path no longer
        leads to it (stat only; see :meth:`connect`)."""
        if self.real is None:
            raise NotAStoreError(f"{self.path}: the store was not opened", path=str(self.path),
                                 hint="await store.open() first")
        refuse_special_files(self.real)
        self._refuse_changed()

    def _refuse_changed(self) -> None:
        for name in dict.fromkeys((self.named, self.real)):
            now = _regular_identity(name)
            if now == self.identity:
                continue
            if now is None and not os.path.lexists(name):
                why = "the file this store opened is gone (moved or deleted since)"
            else:
                why = "is no longer the file this store opened (re-linked, replaced or moved since)"
            raise NotAStoreError(f"{self.path}: {why}; nothing was opened or created", path=str(self.path),
                                 hint=_REOPEN_HINT)


def _regular_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the regular file ``path`` leads to; None for anything else or nothing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
