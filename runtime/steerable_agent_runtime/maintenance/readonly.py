"""Open a store for reading without taking its lease and without touching a byte of it.

:func:`read_store` (and the lower-level :func:`open_readonly`) is how every read-only job
(check, inspect, history, search) reads a store, including while the app owns it and has
committed rows only in the ``-wal``.

Strategy, and why (SQLite facts, https://www.sqlite.org/wal.html section 5 and the URI
parameters page):

- ``mode=ro`` alone is not enough: it writes read marks into ``-shm`` and creates
  ``-wal``/``-shm`` when they are missing. ``immutable=1`` ignores the ``-wal`` (committed
  rows would be invisible). A 0-byte db beside a ``-wal`` makes even ``mode=ro`` delete the
  ``-wal`` (access.probe refuses an empty file before we get there).
- ``shared``: when the ``-wal`` holds frames and a ``-shm`` exists (the app is running, or
  it crashed), open ``file:DB?mode=ro&readonly_shm=1``. SQLite then maps ``-shm`` read-only, never writes a
  read mark, never recovers or checkpoints, and when the ``-shm`` is stale (a writer
  crashed) it rebuilds the wal-index in private heap memory. Nothing is created. Committed
  ``-wal`` frames are visible; the owner keeps writing (WAL readers never block writers).
- ``immutable``: when there is no ``-wal`` or one without a complete frame (empty, or a header
  and at most part of a frame: a writer killed inside its first commit; with or without
  ``-shm``), every committed row is in the db file, so ``immutable=1`` reads all of it with no lock and no file
  created, at full speed and without copying gigabytes. ``immutable`` takes no lock, so a
  writer that starts meanwhile could checkpoint into the db file under us: the db file's
  identity, size and times are taken before the open and compared after the job, and
  :func:`read_store` runs the job again when they moved (the second time the live files
  are read ``shared``, the third time from a private copy).
- ``copy``: when there are ``-wal`` frames but no ``-shm`` (files copied without it, like
  the wal-pending fixture), when the ``-wal`` header is damaged (a ``readonly_shm`` reader
  would spin ~10 s before SQLITE_PROTOCOL), or when the shared open fails, copy the db and
  its ``-wal`` into a private directory (``tempfile.mkdtemp``: mode 0700, never the db's directory) and open the
  copy. The copy is taken between two stats of the source and retried when the source
  changed in between. The private directory is removed on exit.

Guarantees: never takes the lease, never checkpoints, creates no file next to the db and
changes no byte of db, ``-wal`` or ``-shm`` when no connection in *this* process has the
store open (SQLite shares one ``-shm`` mapping per process, so an in-process owner's
writable mapping would be reused). Raises NotAStoreError (missing, directory, unreadable,
empty, not SQLite, another application's database, no steerable tables),
DatabaseDamagedError (SQLite refuses the file) and, unless ``allow_newer_schema``,
SchemaTooNewError. The connection is ``PRAGMA query_only`` and inside one read
transaction, so every query of a job sees the same snapshot.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..errors import DatabaseDamagedError, NotAStoreError, StoreAccessError
from ..storage.access import probe, refuse_foreign, refuse_newer_schema, sibling_path
from ..sqlitefile.pinned import open_pinned, opening
from ..storage.schema import APPLICATION_ID
from ..sqlitefile.wal import FRAME_HEADER_SIZE, WAL_HEADER_SIZE, WAL_MAGIC_BE, WAL_MAGIC_LE, valid_page_size, wal_checksum
from ..storage.snapshot import Snapshot, SourceMoved, fingerprint, private_temp_base

_COPY_ATTEMPTS = 3


class ReadOnlyConnection(sqlite3.Connection):
    """A sqlite3 connection that knows how it was opened.

    ``strategy`` is ``shared`` (the live files, ``readonly_shm``), ``immutable`` (the db
    file alone, nothing in a -wal) or ``copy`` (a private copy); ``source`` is the store's
    path; ``user_version`` and ``application_id`` are what
    SQLite reports (the ``-wal`` may be newer than the file header).
    """

    strategy: str = ""
    source: Path = Path()
    user_version: int = 0
    application_id: int = 0
    snapshot: Snapshot | None = None

    uri: str = ""

    def sibling(self) -> "ReadOnlyConnection":
        """A second connection to the same files opened the same way (for a parallel read).

        Its snapshot is its own; use it for what does not need the first one's (integrity).
        """
        with opening():
            conn = sqlite3.connect(self.uri, uri=True, factory=ReadOnlyConnection, isolation_level=None,
                                   check_same_thread=False)
        conn.strategy, conn.source, conn.uri = self.strategy, self.source, self.uri
        conn.text_factory = lenient_text
        try:
            conn.execute("PRAGMA query_only = 1")
        except BaseException:
            conn.close()  # never left to the cyclic GC (see _try_shared)
            raise
        return conn

    def overtaken(self) -> bool:
        """Whether the db or -wal changed since an ``immutable`` open (the read may be torn)."""
        return self.strategy == "immutable" and self.snapshot is not None and self.snapshot.overtaken()


T = TypeVar("T")


def read_store(path: str | os.PathLike[str], job: Callable[[ReadOnlyConnection], T], *,
               allow_newer_schema: bool = False) -> T:
    """Run ``job(conn)`` on one consistent read-only snapshot of the store and return its result.

    An ``immutable`` read overtaken by a writer's checkpoint is thrown away and the job runs
    again (then on a private copy); so ``job`` must only read, and build its result afresh.
    A part SQLite cannot read (``sqlite3.DatabaseError`` out of ``job``) is raised as
    DatabaseDamagedError with the salvage hint; jobs that tolerate damage catch it themselves.
    """
    for attempt in range(3):
        with open_readonly(path, allow_newer_schema=allow_newer_schema, force_copy=attempt == 2) as conn:
            try:
                result = job(conn)
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # the latter: a garbled error message
                raise DatabaseDamagedError(f"{path}: SQLite cannot read part of it: {exc}", path=str(path)) from exc
            if not conn.overtaken():
                return result
    raise AssertionError("unreachable: a private copy is never overtaken")  # pragma: no cover


@contextmanager
def open_readonly(path: str | os.PathLike[str], *, allow_newer_schema: bool = False,
                  force_copy: bool = False) -> Iterator[ReadOnlyConnection]:
    """Yield a read-only connection to the store at ``path`` (see the module docstring).

    With an ``immutable`` connection the caller must check ``conn.overtaken()`` after its
    reads (:func:`read_store` does).
    """
    source = Path(path)
    refuse_foreign(probe(source), source)
    conn, private_dir = _open(source, force_copy)
    try:
        _adopt(conn, source, allow_newer_schema)
        yield conn
    finally:
        conn.close()
        if private_dir is not None:
            shutil.rmtree(private_dir, ignore_errors=True)


def _open(source: Path, force_copy: bool) -> tuple[ReadOnlyConnection, Path | None]:
    for _ in range(_COPY_ATTEMPTS):
        wal, shm = fingerprint(sibling_path(source, "-wal")), fingerprint(sibling_path(source, "-shm"))
        if (wal is None or _frameless(source, wal[1])) and not force_copy:  # nothing in the -wal
            return _immutable(source), None
        if shm is not None and not force_copy and _wal_header_ok(source):
            conn = _try_shared(source)
            if conn is not None:
                return conn, None
        private_dir = _private_copy(source)
        if private_dir is not None:
            return _connect(private_dir / source.name, "copy", source), private_dir
    raise DatabaseDamagedError(
        f"{source}: the store kept changing while it was being copied for a read-only open",
        path=str(source), hint="re-run the command; if it keeps failing, stop the app for a moment")


def _frameless(source: Path, size: int) -> bool:
    """Whether the -wal of ``size`` bytes holds no complete frame (empty, only its header, or
    a header and part of the first frame: a writer killed inside its first commit), so SQLite
    reads nothing from it. A ``readonly_shm`` reader of a header-only -wal beside a stale
    index spins about ten seconds, then answers SQLITE_PROTOCOL."""
    if size <= WAL_HEADER_SIZE:
        return True
    header = _wal_header(source)
    if header is None or not _header_valid(header):
        return False  # a damaged header: read from a private copy (see _wal_header_ok)
    return size < WAL_HEADER_SIZE + FRAME_HEADER_SIZE + struct.unpack(">I", header[8:12])[0]


def _wal_header(source: Path) -> bytes | None:
    try:
        with open_pinned(sibling_path(source, "-wal")) as fh:
            return fh.read(WAL_HEADER_SIZE)
    except OSError:
        return None


def _header_valid(header: bytes) -> bool:
    if len(header) < WAL_HEADER_SIZE:
        return False
    magic, _, page_size, _, _, _, c0, c1 = struct.unpack(">8I", header)
    if magic not in (WAL_MAGIC_LE, WAL_MAGIC_BE) or not valid_page_size(page_size):
        return False
    return wal_checksum(header[:24], 0, 0, magic == WAL_MAGIC_BE) == (c0, c1)


def _wal_header_ok(source: Path) -> bool:
    """Whether the -wal is empty or starts with a header SQLite accepts (magic, checksum).

    With a damaged header a ``readonly_shm`` reader cannot run WAL recovery and SQLite
    retries for about ten seconds before SQLITE_PROTOCOL; a private copy reads at once
    (and, like SQLite, ignores a WAL whose header is invalid).
    """
    header = _wal_header(source)
    return header is not None and (not header or _header_valid(header))


def _try_shared(source: Path) -> ReadOnlyConnection | None:
    """Open the live files with readonly_shm; None when SQLite cannot (e.g. -shm vanished, or
    SQLITE_PROTOCOL on the -wal index of a writer killed mid-commit).

    A connection that failed is closed here, at once: a sqlite3.Connection is part of a
    reference cycle (its statement cache), so dropping it leaves it open until the cyclic GC
    runs, and while this process keeps a readonly_shm connection, SQLite reuses its read-only
    ``-shm`` mapping for every later connection of the process to the store: a SqliteStorage
    opened then fails with SQLITE_PROTOCOL (a fresh process would not)."""
    conn: ReadOnlyConnection | None = None
    try:
        conn = _connect(source, "shared", source, "&readonly_shm=1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        _close(conn)
        return None
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        _close(conn)
        raise DatabaseDamagedError(f"{source}: SQLite cannot read it: {exc}", path=str(source)) from exc
    except BaseException:
        _close(conn)
        raise
    return conn


def _close(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        conn.close()


def _immutable(source: Path) -> ReadOnlyConnection:
    """Open the db file alone: nothing is in a -wal, so nothing is missed."""
    snapshot = Snapshot.in_place(source)
    conn = _connect(source, "immutable", source, "&immutable=1")
    conn.snapshot = snapshot
    return conn


def _connect(db: Path, strategy: str, source: Path, extra: str = "") -> ReadOnlyConnection:
    uri = f"{db.resolve().as_uri()}?mode=ro{extra}"
    with opening():
        conn = sqlite3.connect(uri, uri=True, factory=ReadOnlyConnection, isolation_level=None,
                               check_same_thread=False)
    conn.strategy, conn.source, conn.uri = strategy, source, uri
    conn.text_factory = lenient_text
    return conn


def lenient_text(raw: bytes) -> str:
    """TEXT as str; damaged UTF-8 shows as U+FFFD instead of failing the whole read.

    (Row data is read as BLOB and checked against its CRC-32, so nothing is hidden: a key
    column that decodes with U+FFFD no longer matches its data and is reported.)
    """
    return raw.decode("utf-8", "replace")


def _private_copy(source: Path) -> Path | None:
    """Copy db and -wal into a fresh 0700 directory (snapshot.Snapshot.private_copy); None if
    the source changed meanwhile."""
    private_dir = Path(tempfile.mkdtemp(prefix="steerable-ro-", dir=private_temp_base(source)))
    try:
        Snapshot.private_copy(source, private_dir)
    except SourceMoved:
        shutil.rmtree(private_dir, ignore_errors=True)
        return None
    except OSError as exc:
        shutil.rmtree(private_dir, ignore_errors=True)
        raise StoreAccessError(f"{source}: cannot read it: {exc.strerror}", path=str(source),
                               hint="run as the user that owns the file") from exc
    return private_dir


def _adopt(conn: ReadOnlyConnection, source: Path, allow_newer_schema: bool) -> None:
    """Read the markers SQLite sees and refuse what is not a readable steerable store."""
    try:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("BEGIN")  # one read snapshot for every query of the job
        conn.user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise DatabaseDamagedError(f"{source}: SQLite cannot read it: {exc}", path=str(source)) from exc
    if not tables and (fingerprint(sibling_path(source, "-wal")) or (0, 0))[1] > 0:
        raise DatabaseDamagedError(
            f"{source}: the db file holds no tables and SQLite cannot use its -wal (damaged WAL header)",
            path=str(source), hint="run `steerable-maint salvage DB --out rows.jsonl`: it reads -wal frames directly")
    if conn.application_id != APPLICATION_ID or not tables:
        raise NotAStoreError(f"{source}: a SQLite database that is not a steerable store", path=str(source),
                             hint="pass the app's sessions database (it carries application_id 0x53544552)")
    if not allow_newer_schema:
        refuse_newer_schema(conn.user_version, source)
