"""Read a store's version markers through SQLite before writing to it.

The file header (storage/fileprobe.py) is the truth only while the ``-wal`` is empty: a
newer ``user_version`` can sit in uncheckpointed ``-wal`` frames. A writable connection
refused afterwards would checkpoint that ``-wal`` into the db when it closes, changing the
bytes of a file we refused to touch; a read-only connection cannot. So every writer
(SqliteStorage, compact, archive, restore) calls :func:`precheck_wal_markers` first.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from ..errors import DatabaseDamagedError, NotAStoreError
from .fileprobe import refuse_newer_schema
from .schema import APPLICATION_ID


def wal_path(path: str | os.PathLike[str]) -> Path:
    """The ``-wal`` file SQLite keeps beside ``path``."""
    return Path(f"{os.fspath(path)}-wal")


def has_wal_content(path: str | os.PathLike[str]) -> bool:
    """Whether a non-empty ``-wal`` sits beside ``path``."""
    wal = wal_path(path)
    return wal.exists() and wal.stat().st_size > 0


def check_markers(conn: sqlite3.Connection, schema: str, path: str | os.PathLike[str]) -> None:
    """Refuse a schema newer than this build, or a file without our application id.

    Reads the markers through SQLite, which sees a newer header still in the ``-wal``.
    """
    try:
        version = conn.execute(f"PRAGMA {schema}.user_version").fetchone()[0]
        app_id = conn.execute(f"PRAGMA {schema}.application_id").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise DatabaseDamagedError(f"{path}: SQLite cannot read it: {exc}", path=str(path)) from exc
    refuse_newer_schema(version, path)
    if app_id != APPLICATION_ID:
        raise NotAStoreError(f"{path}: a SQLite database that is not a steerable store", path=str(path),
                             hint="pass a steerable store (the app's sessions database or an archive made by this tool)")


def precheck_wal_markers(path: str | os.PathLike[str]) -> None:
    """Refuse markers that only the ``-wal`` carries, through a read-only connection.

    A writable connection refused afterwards would checkpoint the ``-wal`` into the db when
    it closes, changing the bytes of a file we refused to touch; a read-only one cannot.
    Without ``-wal`` content the header that :func:`claim` read is the truth.
    """
    if not has_wal_content(path):
        return
    uri = "file:" + quote(str(Path(path).resolve())) + "?mode=ro"
    for attempt in range(_PROTOCOL_RETRIES):
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            check_markers(conn, "main", path)
            return
        except DatabaseDamagedError as exc:
            # Right after a writer died (kill -9), a read-only connection cannot rebuild the
            # -wal index and SQLite answers SQLITE_PROTOCOL ("locking protocol"): the store is
            # sound, the index is stale. Retry briefly, then read the markers from a private
            # copy of db + -wal, which is always safe (DESIGN.md, read-only jobs).
            if getattr(exc.__cause__, "sqlite_errorname", None) != "SQLITE_PROTOCOL":
                raise
        finally:
            conn.close()
        time.sleep(0.02 * (attempt + 1))
    _check_markers_on_copy(path)


_PROTOCOL_RETRIES = 5


def _check_markers_on_copy(path: str | os.PathLike[str]) -> None:
    """check_markers on a private copy of the db and its -wal (the originals are not touched)."""
    with tempfile.TemporaryDirectory(prefix="steerable-markers-") as tmp:
        copy = Path(tmp) / "store.db"
        shutil.copyfile(path, copy)
        if wal_path(path).exists():
            shutil.copyfile(wal_path(path), wal_path(copy))
        conn = sqlite3.connect(copy, isolation_level=None)
        try:
            check_markers(conn, "main", path)
        finally:
            conn.close()
