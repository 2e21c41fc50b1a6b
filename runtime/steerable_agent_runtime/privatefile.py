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
"""

from __future__ import annotations

import errno
import os
import secrets
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
