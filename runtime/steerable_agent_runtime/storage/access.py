"""Open steerable store files for a write job (compact, archive, restore).

The order is fixed and is the safety argument: read the header (:func:`probe`), refuse a
foreign or newer file, take the write lease, and only then let SQLite open the file. So a
refused job has changed nothing: not the db, not the ``-wal``, and it has created no
``-wal``/``-shm``. (Taking the lease creates the ``<stem>.lock`` file, 0600, as any opener does.)

A dry run holds the lease too (it answers "would the real run work?") but connects
read-only, and with ``immutable=1`` when there is no ``-wal`` content, so it cannot
checkpoint or otherwise change the db or ``-wal`` bytes.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from ..errors import SteerableError, UsageError
from .fileprobe import FileProbe, probe, refuse_foreign, refuse_newer_schema
from .lease import WriteLease, lock_path_for
from .markers import check_markers, has_wal_content, precheck_wal_markers, wal_path
from .repairmark import refuse_interrupted_repair


def is_store_file(path: str | os.PathLike[str], db: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the store at ``db`` or one of its files (-wal, -shm, -journal, the
    lease's lock file), by name or through a link: an output must never be written there."""
    store = Path(db).resolve()
    parts = {store, *(store.with_name(store.name + s) for s in ("-wal", "-shm", "-journal")), lock_path_for(store)}
    target = Path(path)
    if target.resolve() in parts:
        return True
    for part in parts:
        try:
            if os.path.samefile(target, part):
                return True
        except OSError:
            continue
    return False


def store_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of the db plus its ``-wal`` (0 for a file that does not exist)."""
    total = 0
    for p in (Path(path), wal_path(path)):
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def claim(path: str | os.PathLike[str], *, allow_missing: bool = False,
          write: bool = False) -> tuple[FileProbe, WriteLease]:
    """Probe ``path``, refuse a foreign or newer file (and, to ``write``, one this process
    may not write, or whose directory it may not write: SQLite creates -wal and -shm
    there), then take its write lease.

    Raises NotAStoreError, SchemaTooNewError, SteerableError (cannot write; all three
    before the lease), StoreAlreadyOwnedError naming the holder's pid, or
    RepairInterruptedError (a repair was interrupted mid-swap; the lease is released).
    """
    found = probe(path, allow_missing=allow_missing)
    refuse_foreign(found, path)
    refuse_newer_schema(found, path)
    if write:
        for target in ((Path(path),) if found.exists else ()) + (Path(path).resolve().parent,):
            if not os.access(target, os.W_OK):
                raise SteerableError(f"{path}: cannot write {target}: permission denied; nothing was changed",
                                     path=str(path), hint="run as the user that owns the store and its directory")
    lease = WriteLease(path).acquire()
    try:
        refuse_interrupted_repair(path)
    except BaseException:
        lease.release()
        raise
    return found, lease


def refuse_same_store(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> None:
    """Raise UsageError when two paths name one store (or share one lease file)."""
    a, b = Path(first).resolve(), Path(second).resolve()
    if a == b or lock_path_for(a) == lock_path_for(b):
        raise UsageError(f"{second}: is the same store as {first} (or shares its lease file {lock_path_for(b).name})",
                         hint="pass a different file, with a different name stem, as the destination")


def _uri(path: str | os.PathLike[str], *, readonly: bool) -> str:
    uri = "file:" + quote(str(Path(path).resolve()))
    if not readonly:
        return uri
    has_wal = has_wal_content(path)
    # immutable=1 ignores a -wal, so it is only exact when there is none; we hold the
    # lease, so no writer can create one while we read.
    return uri + ("?mode=ro" if has_wal else "?mode=ro&immutable=1")


def connect(path: str | os.PathLike[str], *, readonly: bool) -> sqlite3.Connection:
    """An autocommit connection to an already-claimed store; FULL sync, WAL for writers."""
    if not readonly:
        precheck_wal_markers(path)
    conn = sqlite3.connect(_uri(path, readonly=readonly), uri=True, isolation_level=None)
    try:
        check_markers(conn, "main", path)
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA temp_store = MEMORY")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def open_store(path: str | os.PathLike[str], *, readonly: bool = False) -> Iterator[sqlite3.Connection]:
    """Claim ``path`` (probe, refuse, lease) and yield a connection; release both on exit."""
    with held(path, write=not readonly), connection(path, readonly=readonly) as conn:
        yield conn


@contextmanager
def held(path: str | os.PathLike[str], *, write: bool) -> Iterator[FileProbe]:
    """Claim ``path`` (probe, refuse, lease; SQLite does not open it) until exit."""
    found, lease = claim(path, write=write)
    try:
        yield found
    finally:
        lease.release()


@contextmanager
def connection(path: str | os.PathLike[str], *, readonly: bool) -> Iterator[sqlite3.Connection]:
    """A connection to a store this process holds (see ``held``), closed on exit."""
    conn = connect(path, readonly=readonly)
    try:
        yield conn
    finally:
        conn.close()


def attach(conn: sqlite3.Connection, path: str | os.PathLike[str], alias: str, *, readonly: bool) -> None:
    """ATTACH an already-claimed store as ``alias`` and check its markers (FULL sync). A
    writer must have run precheck_wal_markers when it claimed it (archive does)."""
    conn.execute("ATTACH DATABASE ? AS " + alias, (_uri(path, readonly=readonly),))
    check_markers(conn, alias, path)
    if not readonly:
        conn.execute(f"PRAGMA {alias}.journal_mode = WAL")
        conn.execute(f"PRAGMA {alias}.synchronous = FULL")
