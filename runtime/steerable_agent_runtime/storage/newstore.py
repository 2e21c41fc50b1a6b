"""Create a new, empty store atomically.

A store is built in ``.<name>.new`` beside the target, fsynced, then linked into place
(never replacing an existing file) and the directory fsynced: a kill at any point leaves
either no file at the target or a complete store, never a 0-byte file that every later
open would refuse as "empty".
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import NotAStoreError
from ..privatefile import fsync_dir
from .schema import create_schema


def create_store(path: str | os.PathLike[str]) -> None:
    """Create a new, empty, valid store at ``path`` (mode 0600, WAL, schema stamped).

    Atomic: the store is built in ``.<name>.new`` beside the target, fsynced, then linked
    into place (never replacing an existing file) and the directory fsynced. A kill at any
    point leaves either no ``path`` or a complete store, never a 0-byte file a re-run would
    refuse. The caller holds the lease of ``path``, so a leftover ``.new`` is stale and removed.
    Raises NotAStoreError when the directory is not writable.
    """
    target = Path(path)
    temp = target.with_name(f".{target.name}.new")
    for stale in (temp, Path(f"{temp}-wal"), Path(f"{temp}-shm")):
        stale.unlink(missing_ok=True)
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
        _build_schema(temp)
        os.link(temp, target)
    except OSError as exc:
        raise NotAStoreError(f"{target}: cannot create it: {exc.strerror}", path=str(target),
                             hint="check that the directory exists and is writable") from None
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(target.parent)


def _build_schema(path: Path) -> None:
    """Stamp the schema into the empty file ``path`` and leave it fsynced, WAL folded in."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        create_schema(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
