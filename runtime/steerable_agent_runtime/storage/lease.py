"""The write lease: an exclusive lock on the sibling ``<stem>.lock`` file.

``sessions.db`` -> ``sessions.lock``. POSIX uses ``flock(LOCK_EX | LOCK_NB)``; Windows uses
``msvcrt.locking`` on one byte far past the pid text, behind the same interface.

Guarantees:
- One holder at a time, across processes and within one process (flock locks belong to
  the open file description, so a second open in the same process is refused too).
- Process death releases the lease (the kernel drops the lock); there is no TTL steal.
- The lock file is created 0600 and never renamed. The holder writes its pid into it so a
  refused opener can name the holder. The app's lock file is never deleted; a job's lease
  (``release(discard=True)``: a maintenance job, or an opener that refused the store) removes
  the lock file only if this very lease created it, and only while still holding it and only
  if the name still points at the file it locked (``fstat`` of its descriptor against
  ``lstat`` of the name). So a lock file another process created, or holds, is never removed.
- Removing is safe because every acquirer checks, after locking, that the name still points at
  the file it locked, and otherwise starts over: whoever opened the file before it was removed
  and locks it afterwards holds an unnamed file, notices, and opens the name again.
- :func:`lease_holder` finds the holder without taking the lock, so inspecting never makes
  a concurrent opener fail.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass
from typing import NoReturn
from pathlib import Path

from ..errors import NotAStoreError, StoreAlreadyOwnedError
from .leftovers import discard_new_siblings, present_siblings
from .specialfiles import kind_of

_WINDOWS_LOCK_OFFSET = 1 << 30


def lock_path_for(db_path: str | os.PathLike[str]) -> Path:
    """The lease file of a database: same directory, same stem, suffix ``.lock``, of the file
    itself: symlinks are resolved first (as SQLite resolves them for its ``-wal``), so a link
    and its target, whatever their names, are one store with one lease."""
    path = Path(os.path.realpath(db_path))
    return path.with_name(path.stem + ".lock")


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease: the pid, and how it was found (``procfs`` or ``pid-file``)."""

    pid: int | None
    method: str


def _lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def _read_pid(lock_path: Path) -> int | None:
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if kind_of(os.fstat(fd).st_mode) is not None:
            return None  # a FIFO or device where the lock file goes holds no pid
        text = os.read(fd, 64).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdigit() else None


class WriteLease:
    """The exclusive write lease of one database file.

    ``acquire()`` raises StoreAlreadyOwnedError naming the holder's pid when another opener
    holds it, NotAStoreError when the lock file cannot be created or opened (read-only
    directory) or is not a regular file. ``release()`` is idempotent.
    """

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.db_path = Path(db_path)
        self.lock_path = lock_path_for(db_path)
        self._fd: int | None = None
        self._created = False
        self._siblings: frozenset[str] = frozenset()

    @property
    def held(self) -> bool:
        """Whether this object holds the lease now."""
        return self._fd is not None

    def acquire(self) -> "WriteLease":
        """Take the lease or raise; on success the lock file holds this pid."""
        for _attempt in range(_REOPEN_ATTEMPTS):
            fd, created = self._open_lock_file()
            locked = _lock_named(fd, self.lock_path)
            if locked:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                self._fd, self._created = fd, created
                self._siblings = present_siblings(self.db_path)
                return self
            os.close(fd)
            if locked is None:  # even if this open created it: another process holds it now
                self._refuse()
        self._refuse()

    def _refuse(self) -> NoReturn:
        holder = lease_holder(self.db_path)
        pid = holder.pid if holder else _read_pid(self.lock_path)
        who = "this process" if pid == os.getpid() else f"pid {pid}" if pid else "another process"
        raise StoreAlreadyOwnedError(
            f"{self.db_path}: the write lease {self.lock_path.name} is held by {who}",
            path=str(self.db_path), holder_pid=pid,
        )

    def _open_or_create(self, flags: int) -> tuple[int, bool]:
        for _attempt in range(_REOPEN_ATTEMPTS):
            try:
                return os.open(self.lock_path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
            except FileExistsError:
                pass
            try:
                return os.open(self.lock_path, flags), False
            except FileNotFoundError:  # its creator removed it between the two opens
                continue
        raise OSError(errno.EAGAIN, "it keeps being created and removed")

    def _open_lock_file(self) -> tuple[int, bool]:
        """The lock file's descriptor and whether this call created the file."""
        # O_NONBLOCK: a FIFO put where the lock file goes must not block the open.
        flags = os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd, created = self._open_or_create(flags)
        except OSError as exc:
            raise NotAStoreError(
                f"{self.db_path}: cannot create or open the lease file {self.lock_path.name}: {exc.strerror}",
                path=str(self.db_path),
                hint="writing needs a writable directory; read-only jobs (check, inspect, salvage) work without it",
            ) from None
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            os.close(fd)
            raise NotAStoreError(f"{self.db_path}: its lease file {self.lock_path.name} is {kind}, not a regular file",
                                 path=str(self.db_path),
                                 hint=f"move {self.lock_path.name} out of the way (it is not part of the store),"
                                      " then run the command again")
        os.set_blocking(fd, True)
        return fd, created

    def release(self, *, discard: bool = False) -> None:
        """Give the lease up. Idempotent. The lock file stays, unless ``discard`` (a job's lease)
        and this lease created it: then it is removed first, while still held, if the name
        still points at it. ``discard`` also removes a ``-shm`` or empty ``-wal`` that appeared
        while the lease was held, when no connection has the store open (storage/leftovers.py)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if discard:
                discard_new_siblings(self.db_path, self._siblings)
            if discard and self._created and sys.platform != "win32" and _names(fd, self.lock_path):
                # (Windows cannot remove an open file; there the lock file stays.)
                os.unlink(self.lock_path)
            _unlock(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> "WriteLease":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        """A ``with`` block is a job: the lock file it created is removed (``discard``)."""
        self.release(discard=True)


def _lock_named(fd: int, path: Path) -> bool | None:
    """Lock ``fd``: True when locked and ``path`` still names that file; None when another
    holder has it; False (lock dropped again) when its creator removed the file meanwhile,
    so the caller opens the name again rather than hold a file nobody else can find."""
    if not _lock(fd):
        return None
    if _names(fd, path):
        return True
    _unlock(fd)
    return False


def _names(fd: int, path: Path) -> bool:
    """Whether ``path`` is (still) the file open as ``fd``: the same device and inode."""
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


_REOPEN_ATTEMPTS = 100


def _procfs_holder(lock_path: Path) -> LeaseHolder | None:
    """Find a flock on ``lock_path`` in /proc/locks (Linux) without taking it."""
    try:
        st = os.stat(lock_path)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        parts = line.split()
        if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            found = (int(major, 16), int(minor, 16), int(inode))
            pid = int(parts[4])
        except ValueError:
            continue
        if found == want:
            return LeaseHolder(pid=pid if pid > 0 else _read_pid(lock_path), method="procfs")
    return LeaseHolder(pid=None, method="procfs-free")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lease_holder(db_path: str | os.PathLike[str]) -> LeaseHolder | None:
    """Who holds the lease of ``db_path`` now, or None when nobody does.

    Never takes the lock. On Linux it reads /proc/locks; elsewhere it falls back to the
    pid written in the lock file and whether that process is alive (``pid-file``, a
    best guess: a reused pid can look like a holder).
    """
    lock_path = lock_path_for(db_path)
    if not lock_path.exists():
        return None
    found = _procfs_holder(lock_path)
    if found is not None:
        return found if found.method == "procfs" else None
    pid = _read_pid(lock_path)
    if pid is not None and _pid_alive(pid):
        return LeaseHolder(pid=pid, method="pid-file")
    return None
