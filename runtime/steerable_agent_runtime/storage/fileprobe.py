"""Look at a database path before anything opens it with SQLite.

:func:`probe` reads at most the first 100 bytes (the SQLite header) with a plain read-only
open, so it creates, locks and changes nothing. Every job that takes a path calls it first,
and so refuses a missing path, a directory, an unreadable, empty or non-SQLite file, or a
schema newer than this build, with one clear error and the file untouched.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import NotAStoreError, SchemaTooNewError
from .schema import APPLICATION_ID, SCHEMA_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class FileProbe:
    """What the header of a database file says (``exists`` False: nothing there yet)."""

    path: Path
    exists: bool
    size: int = 0
    page_size: int = 0
    user_version: int = 0
    application_id: int = 0

    @property
    def is_ours(self) -> bool:
        """Whether the header carries the steerable application id."""
        return self.application_id == APPLICATION_ID


def probe(path: str | os.PathLike[str], *, allow_missing: bool = False) -> FileProbe:
    """Read the header of ``path``.

    Raises NotAStoreError for a missing path (unless ``allow_missing``), a directory, a
    non-regular file, an unreadable, empty or non-SQLite file.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if allow_missing:
            if not p.parent.is_dir():
                raise NotAStoreError(f"{p}: directory {p.parent} does not exist", path=str(p),
                                     hint="create the directory first, or check the path") from None
            return FileProbe(path=p, exists=False)
        raise NotAStoreError(f"{p}: no such file", path=str(p), hint="check the path (is the app's data directory mounted?)") from None
    except OSError as exc:
        raise NotAStoreError(f"{p}: cannot access: {exc.strerror}", path=str(p),
                             hint="run as the user that owns the file, or copy it somewhere readable") from None
    if stat.S_ISDIR(st.st_mode):
        raise NotAStoreError(f"{p}: is a directory, not a database file", path=str(p),
                             hint="pass the database file inside it (for example sessions.db)")
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"{p}: not a regular file", path=str(p), hint="pass the path of the database file")
    try:
        with open(p, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise NotAStoreError(f"{p}: cannot read: {exc.strerror}", path=str(p),
                             hint="run as the user that owns the file, or copy it somewhere readable") from None
    if not header:
        raise NotAStoreError(f"{p}: empty file (0 bytes), not a database", path=str(p),
                             hint="if a -wal file sits beside it, run `steerable-maint salvage` on it; otherwise pass the right path")
    if not header.startswith(SQLITE_MAGIC) or len(header) < 100:
        raise NotAStoreError(f"{p}: not a SQLite database (no SQLite header)", path=str(p),
                             hint="pass the app's database file; if it is a damaged store, run `steerable-maint salvage`")
    raw_page = int.from_bytes(header[16:18], "big")
    return FileProbe(
        path=p, exists=True, size=st.st_size,
        page_size=65536 if raw_page == 1 else raw_page,
        user_version=int.from_bytes(header[60:64], "big"),
        application_id=int.from_bytes(header[68:72], "big"),
    )


def refuse_newer_schema(found: FileProbe | int, path: str | os.PathLike[str]) -> None:
    """Raise SchemaTooNewError when the schema version is above this build's."""
    version = found.user_version if isinstance(found, FileProbe) else found
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"{path}: schema version {version} was written by a newer build (this build reads up to"
            f" {SCHEMA_VERSION}); the file was not modified",
            path=str(path), version=version,
        )


def refuse_foreign(found: FileProbe, path: str | os.PathLike[str]) -> None:
    """Raise NotAStoreError when the header marks another application's database."""
    if found.exists and found.application_id not in (0, APPLICATION_ID):
        raise NotAStoreError(
            f"{path}: a SQLite database of another application (application_id {found.application_id:#x}),"
            " not a steerable store", path=str(path),
            hint="pass the steerable store (the app's sessions database)",
        )
