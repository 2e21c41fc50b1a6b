"""A consistent snapshot of a live store, for the read-only jobs, salvage and the write
openers' marker check after a crash (storage/access.py): one policy.

A reader that takes no lease may race a writer. Two ways stay exact and change nothing:

- **in place**: the db file alone, when no ``-wal`` holds content (nothing is missed), opened
  ``mode=ro&immutable=1``. A writer may still checkpoint into the file meanwhile, so the
  db's and ``-wal``'s :func:`fingerprints` are taken before and compared after the read
  (:meth:`Snapshot.unchanged`); an overtaken read is thrown away and done again from a copy.
- **private copy**: db and ``-wal`` copied into a private directory (0600 files) and read
  there; a copy during which either file moved is thrown away (:class:`SourceMoved`).

``-shm`` is not part of a fingerprint: readers write their marks into it, and a copy of db
and ``-wal`` is consistent whatever it holds.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreAccessError
from .access import wal_path
from ..sqlitefile.pinned import open_pinned


class SourceMoved(Exception):
    """The store changed under an in-place read or a copy (a writer was active)."""


def fingerprint(path: Path) -> tuple[int, ...] | None:
    """Identity, size and times of a file (None when absent): what a write would move."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def fingerprints(source: Path) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The fingerprints of the db and its ``-wal``."""
    return fingerprint(source), fingerprint(wal_path(source))


@dataclass(frozen=True)
class Snapshot:
    """What a job reads: ``db`` (and ``wal``) and SQLite's read-only ``uri`` for it.

    ``strategy`` is ``immutable`` (the source itself) or ``copy``; ``before`` holds the
    source's fingerprints for an in-place read (None for a copy, which cannot move)."""

    source: Path
    db: Path
    wal: Path | None
    uri: str
    strategy: str
    before: tuple[object, ...] | None = None

    @classmethod
    def in_place(cls, source: Path) -> Snapshot:
        """The source itself, read with ``immutable=1`` (no lock, no file created, nothing written)."""
        return cls(source, source, None, source.absolute().as_uri() + "?mode=ro&immutable=1", "immutable",
                   fingerprints(source))

    @classmethod
    def private_copy(cls, source: Path, into: Path, *, name: str | None = None) -> Snapshot:
        """Copy db and ``-wal`` (if there is one) into the private directory ``into``.

        Raises SourceMoved when either file changed or vanished during the copy; an OSError
        reading or writing propagates (the caller says which it was)."""
        before = fingerprints(source)
        db = into / (name or source.name)
        wal = wal_path(db) if wal_path(source).is_file() else None
        try:
            copy_private(source, db)
            if wal is not None:
                copy_private(wal_path(source), wal)
        except FileNotFoundError:  # the app closed and removed its -wal meanwhile
            raise SourceMoved() from None
        if fingerprints(source) != before:
            raise SourceMoved()
        return cls(source, db, wal, db.absolute().as_uri() + "?mode=ro", "copy")

    def overtaken(self) -> bool:
        """Whether an in-place read may have been overtaken by a writer (always False for a copy)."""
        return self.before is not None and fingerprints(self.source) != self.before

    def unchanged(self) -> None:
        """Raise SourceMoved when :meth:`overtaken`."""
        if self.overtaken():
            raise SourceMoved()


def copy_private(src: Path, dst: Path) -> None:
    """Copy ``src`` to a new file ``dst`` (mode 0600, never an existing one), in the kernel
    where it can (``copy_file_range``), else through a buffer. ``src`` is read through
    sqlitefile/pinned.py: it may be a live store's file that SQLite has open in this process."""
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open_pinned(src) as fin, os.fdopen(fd, "wb") as fout:
        try:
            while os.copy_file_range(fin.fileno(), fout.fileno(), 1 << 30):
                pass
            in_kernel = os.fstat(fout.fileno()).st_size == os.fstat(fin.fileno()).st_size
        except (AttributeError, OSError):  # no such call here, or not between these files
            in_kernel = False
        if not in_kernel:  # (some file systems answer 0 bytes copied instead of failing)
            fin.seek(0)
            fout.seek(0)
            fout.truncate()
            shutil.copyfileobj(fin, fout, 1 << 20)


def private_temp_base(source: Path) -> str | None:
    """The system temp dir, unless it is the db's own directory (then another one)."""
    home = source.resolve().parent
    for base in (tempfile.gettempdir(), "/dev/shm", "/var/tmp", str(Path.home())):
        if os.path.isdir(base) and Path(base).resolve() != home and os.access(base, os.W_OK):
            return base
    raise StoreAccessError(f"{source}: no private temp directory outside the database's directory",
                           path=str(source), hint="set TMPDIR to a writable directory elsewhere")
