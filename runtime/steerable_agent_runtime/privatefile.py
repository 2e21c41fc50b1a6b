"""Write a private output file atomically: temp beside the target, fsync, publish, fsync dir.

Used for every file that holds a user's conversations or runs (salvage JSONL, a rebuilt
store, a trace export) and for creating a new store.

Guarantees of :func:`atomic_output`:
- The temp file is created with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600 in the target's
  directory, so it is private from its first byte and never follows a symlink.
- On normal exit it is fsynced, then published: without ``force`` by ``link`` (an entry that
  appeared meanwhile is never replaced: OutputExistsError), with ``force`` by an atomic
  rename (a symlink at the target is replaced itself, never what it points to). Then the
  directory is fsynced.
- On any failure the temp file is removed and the target is untouched.

:class:`Writeback` writes a big output's pages back while it is still being written (same
bytes, same final fsync: it only leaves that fsync less to do).
"""

from __future__ import annotations

import errno
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import OutputExistsError, SteerableError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@contextmanager
def atomic_output(target: Path, *, force: bool) -> Iterator[tuple[Path, BinaryIO]]:
    """Yield (temp path, open binary file) beside ``target``; publish it on normal exit.

    Raises SteerableError when the temp file cannot be created (directory missing or not
    writable) or cannot be written (disk full, file too large, read-only or failing file
    system: WRITE_ERRNOS), OutputExistsError when the target appeared meanwhile and not ``force``.
    """
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise SteerableError(f"cannot write {target}: {exc.strerror}", path=str(target),
                             hint="check that the output directory exists and is writable") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield tmp, fh
            fh.flush()
            os.fsync(fh.fileno())
        publish(tmp, target, force=force)
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        raise SteerableError(f"cannot write {target}: {exc.strerror}; nothing was published", path=str(target),
                             hint="free space where the output goes, or write it elsewhere") from exc
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
"""Errors of writing a file (the disk, not the program): reported as one line, not as a bug."""


def publish(tmp: Path, target: Path, *, force: bool) -> None:
    """Move a finished temp file into place (see the module guarantees), fsync the directory.
    A target that is not a regular file or a symlink (a FIFO, a device such as /dev/null, a
    socket, a directory) is never replaced: OutputExistsError."""
    from .storage.specialfiles import refuse_special_output

    refuse_special_output(target)
    if force:
        os.replace(tmp, target)
    else:
        try:
            os.link(tmp, target, follow_symlinks=False)
        except FileExistsError:
            raise OutputExistsError(f"{target}: appeared while it was being written", path=str(target)) from None
        os.unlink(tmp)
    fsync_dir(target.parent)


def fsync_dir(directory: Path) -> None:
    """Make a new directory entry durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # Windows: the rename is still atomic
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Writeback:
    """Write a file's dirty pages to disk while it is still being written: a daemon thread
    calls ``fdatasync(fd)`` every ``interval`` seconds, from start() until stop().

    Why: Linux starts writing dirty pages back only past ``vm.dirty_background_ratio`` of
    memory (gigabytes on a big host) or after 30 s, so the final fsync of salvage's 1.5 GB
    export wrote all of it at the end, alone (0.7 s of a 10 s run); written back while the
    export runs (the disk's work, not the cores'), that fsync finds only the tail.

    Guarantees: nothing about the file changes (the caller still fsyncs it before publishing).
    An error of a background fdatasync is raised by stop() (Linux reports a failed writeback
    to one fsync of the file only, so the final fsync may not see it again: it must not be
    lost); after one, the thread stops. Where no thread can be started, nothing happens.
    Start it only where a thread may be started (salvage's export: after its workers are
    forked).
    """

    def __init__(self, fd: int, interval: float = 0.25) -> None:
        self.fd, self.interval = fd, interval
        self.error: OSError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name="writeback", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # "can't start new thread": the final fsync does it all
            return
        self._thread = thread

    def _run(self) -> None:
        sync = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)
        while not self._stop.wait(self.interval):
            try:
                sync(self.fd)
            except OSError as exc:
                self.error = exc
                return

    def stop(self, *, check: bool = True) -> None:
        """Stop the thread and wait for it; ``check``: raise the error of a background fdatasync."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if check and self.error is not None:
            raise self.error
