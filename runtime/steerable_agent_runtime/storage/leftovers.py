"""Remove a ``-wal`` or ``-shm`` that a job's own SQLite connections left beside a store.

A read-only connection (a dry run, the ``-wal`` marker check of a refused opener) to a store
whose ``-wal`` has frames creates the ``-shm`` when there is none, and cannot remove it when
it closes (only a connection that checkpoints does). A job's lease (storage/lease.py,
``release(discard=True)``) calls :func:`discard_new_siblings` with what was there when it
took the lease, so a refused job or a dry run leaves the folder as it found it.

Safety, SQLite's own rule: SQLite removes ``-wal`` and ``-shm`` only while it holds the
EXCLUSIVE lock on the db file, which it gets only when no other connection is open (every
connection to a WAL store holds a SHARED lock on the db file as long as it is open, and must
take it before it maps the ``-shm``). This module takes the same lock, as an open file
description lock (Linux ``F_OFD_SETLK``: it conflicts with every process's SQLite locks,
this process's too), and only when no other descriptor of this process refers to the db file
(sqlitefile/pinned.py: closing our descriptor would drop this process's own SQLite locks on
it). If anything holds a lock, or the platform has no such lock, the files stay. A ``-shm`` is removed whatever it
holds (it is an index SQLite rebuilds from the ``-wal``); a ``-wal`` only when it is empty.
Never raises: this is cleanup after the job's outcome is decided.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

from ..sqlitefile.pinned import open_elsewhere, opening

SUFFIXES = ("-wal", "-shm")
_SHARED_FIRST = 0x40000000 + 2  # SQLite's PENDING_BYTE + 2: the db file's SHARED range
_SHARED_SIZE = 510


def present_siblings(db: str | os.PathLike[str]) -> frozenset[str]:
    """The suffixes of the ``-wal`` / ``-shm`` files that exist beside ``db`` now."""
    return frozenset(s for s in SUFFIXES if os.path.lexists(f"{os.fspath(db)}{s}"))


def discard_new_siblings(db: str | os.PathLike[str], before: frozenset[str]) -> None:
    """Remove the ``-shm`` and empty ``-wal`` of ``db`` that were not there ``before``, when no
    connection anywhere has the store open (see the module doc); otherwise leave them."""
    new = [Path(f"{os.fspath(db)}{s}") for s in SUFFIXES if s not in before]
    new = [p for p in new if os.path.lexists(p)]
    if not new:
        return
    try:
        import fcntl

        ofd_setlk = fcntl.F_OFD_SETLK  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        return
    with opening():  # no library connection is made between the check and our close
        if not open_elsewhere(db):
            _remove_under_lock(db, new, ofd_setlk)


def _remove_under_lock(db: str | os.PathLike[str], new: list[Path], ofd_setlk: int) -> None:
    import fcntl

    try:
        fd = os.open(db, os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        fcntl.fcntl(fd, ofd_setlk, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, _SHARED_FIRST, _SHARED_SIZE, 0))
        for path in new:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and (path.name.endswith("-shm") or st.st_size == 0):
                os.unlink(path)
    except OSError:
        return  # another connection holds the store (or the file went): the files stay
    finally:
        os.close(fd)  # drops the lock
