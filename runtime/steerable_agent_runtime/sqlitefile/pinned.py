"""Read a store's files in-process without dropping the SQLite locks this process holds.

SQLite locks a database (and its ``-shm``) with POSIX advisory locks (``fcntl``), and POSIX
ties those locks to the (process, file) pair, not to a descriptor: closing ANY descriptor of
the file drops ALL of this process's locks on it, including those an open sqlite3 connection
holds through its own descriptor. SQLite guards against that between its own connections
(it defers closing while the file is locked), but a plain ``open()``/``close()`` of the db
in the same process silently unlocks the live connection. Then another process may believe
it is alone: closing its last connection it checkpoints and deletes the ``-wal`` and ``-shm``
the live connection still writes to, whose acknowledged commits are then lost
(tests/storage/test_pinned.py shows it for every in-process job).

:func:`open_pinned` is the one way the library reads a store file's bytes (the header probe,
the ``-wal`` scans, private copies, salvage's page reader). Its descriptor is closed only
when no other descriptor of this process refers to the same file (Linux ``/proc/self/fd``,
macOS ``/dev/fd``): then no connection of this process has it open, so it holds no lock to
lose. Otherwise the descriptor is parked, reused by the next read of that file, and closed
by a later read once the connections are gone; so there is at most one parked descriptor
per file per concurrent reader, never one per read. Where descriptors cannot be listed it
stays parked for the process's life. Windows locks belong to the handle: closed at once.

The library's sqlite3 connections are created inside :func:`opening`, which excludes the
check-then-close step, so a connection created in another thread at that moment is seen
(SqlAlchemyStorage's aiosqlite pool included: storage/sqla_sqlite.py makes each connection
in aiosqlite's thread under it). One created elsewhere (a raw sqlite3 connection of the host
app) in another thread at that same instant is not: its first lock could be dropped then.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from io import BufferedReader, FileIO
from pathlib import Path

_Key = tuple[int, int]

_lock = threading.RLock()
_parked: dict[_Key, list[int]] = {}
_ours: set[int] = set()  # every descriptor this module owns, parked or in use


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.RLock()  # a thread of the parent may have held it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@contextmanager
def opening() -> Iterator[None]:
    """Hold this while creating a sqlite3 connection in the library, so that no pinned
    descriptor is closed between "no one else has this file open" and the close."""
    with _lock:
        yield


class PinnedFile(BufferedReader):
    """A buffered binary reader of one store file whose ``close()`` never drops a lock this
    process holds on that file (it parks or closes the descriptor, see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        fd = _acquire(Path(path))
        try:
            super().__init__(FileIO(fd, "rb", closefd=False))
        except BaseException:
            _release(fd)
            raise
        self._pinned_fd: int | None = fd

    def close(self) -> None:
        """Close the reader and hand the descriptor back (idempotent)."""
        fd, self._pinned_fd = getattr(self, "_pinned_fd", None), None
        if fd is None:
            return
        try:
            super().close()
        finally:
            _release(fd)


def open_pinned(path: str | os.PathLike[str]) -> PinnedFile:
    """What ``open(path, "rb")`` is, for a file SQLite may have open in this process: a
    reader from the file's start (use it with ``with`` or close it); closing it never drops
    a lock this process holds on the file. Raises what ``open(path, "rb")`` raises
    (FileNotFoundError, PermissionError, IsADirectoryError, another OSError)."""
    return PinnedFile(path)


def _acquire(path: Path) -> int:
    with _lock:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            free = _parked.get((st.st_dev, st.st_ino))
            if free:
                fd = free.pop()
                os.lseek(fd, 0, os.SEEK_SET)
                return fd
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)  # a directory: no SQLite lock can sit on it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        _ours.add(fd)
        return fd


def _release(fd: int) -> None:
    with _lock:
        st = os.fstat(fd)
        _parked.setdefault((st.st_dev, st.st_ino), []).append(fd)
        _sweep()


def _sweep() -> None:
    """Close every parked descriptor whose file no descriptor but ours refers to."""
    busy = _others()
    for key in list(_parked):
        if busy is not None and key not in busy:
            for fd in _parked.pop(key):
                _ours.discard(fd)
                os.close(fd)


def _others() -> set[_Key] | None:
    """The files that descriptors of this process not owned here refer to; None when that
    cannot be known (then nothing is closed); an empty set on Windows, where closing one
    handle leaves the locks of another alone."""
    if sys.platform == "win32":
        return set()
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(listing)
        except OSError:
            continue
        found: set[_Key] = set()
        for name in names:
            if not name.isdigit() or int(name) in _ours:
                continue
            try:
                st = os.fstat(int(name))
            except OSError:  # the listing's own descriptor, or one closed meanwhile
                continue
            found.add((st.st_dev, st.st_ino))
        return found
    return None


def parked(path: str | os.PathLike[str] | None = None) -> int:
    """How many descriptors are parked now (of the file at ``path``, or of all files)."""
    with _lock:
        if path is None:
            return sum(len(fds) for fds in _parked.values())
        st = os.stat(path)
        return len(_parked.get((st.st_dev, st.st_ino), ()))


def open_elsewhere(path: str | os.PathLike[str]) -> bool:
    """Whether a descriptor of this process that this module does not own refers to the file at
    ``path`` (a sqlite3 connection of this process has it open); True when that cannot be known.
    Only when it is False may a caller open and close a descriptor of its own on the file
    (holding :func:`opening` from this check to that close)."""
    with _lock:
        busy = _others()
        try:
            st = os.stat(path)
        except OSError:
            return True
        return busy is None or (st.st_dev, st.st_ino) in busy
