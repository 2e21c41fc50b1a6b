"""The one way a store file is opened: names, URIs, probe, refuse, lease, markers, pragmas.

Every opener follows one order, and the order is the safety argument:

1. :func:`probe` reads the header (at most 100 bytes, a plain read-only open: it creates,
   locks and changes nothing) and refuses a missing path, a directory, an unreadable, empty
   or non-SQLite file (:func:`refuse_foreign`: another application's; :func:`refuse_newer_schema`:
   a newer build's);
2. a writer checks it may write the file and its directory (SQLite creates -wal and -shm there);
3. it takes the write lease (storage/lease.py: the sibling ``<stem>.lock``) and refuses a
   store whose repair was interrupted mid-swap (storage/repairmark.py);
4. :func:`precheck_wal_markers`: a newer ``user_version`` can sit in uncheckpointed ``-wal``
   frames, and a writable connection refused afterwards would checkpoint that ``-wal`` into the
   db when it closes, changing a file we refused to touch; a read-only connection cannot
   (right after a writer was killed it may answer SQLITE_PROTOCOL: retried, then the markers
   are read from a private copy of db and ``-wal``);
5. only then SQLite opens it (:func:`connect`), the markers are read again through SQLite and
   the pragmas set: WAL (readers never block the writer), ``synchronous=FULL`` (an acknowledged
   write survives power loss), ``temp_store=MEMORY`` (no temp files beside a user's chats).

So a refused opener has changed nothing: not the db, not the ``-wal``, and it has created no
``-wal``/``-shm`` (taking the lease creates the ``<stem>.lock`` file, 0600, as any opener does).
A dry run holds the lease too (it answers "would the real run work?") but connects read-only,
with ``immutable=1`` when there is no ``-wal`` content, so it cannot checkpoint. A new store is
created atomically (:func:`create_store`). SqliteStorage, compact, archive, restore, copy's
SQLite destination and salvage's rebuild open through :func:`claim` / :func:`held` and
:func:`connect`; repair, which must take a store SQLite may not read, through
:func:`claim_damaged`; :func:`transaction` is the one write transaction. SqlAlchemyStorage on
SQLite takes no lease, calls :func:`check_before_open` at open and checks every pool connection
against the file it checked (storage/sqla_sqlite.py). Read-only jobs open through
maintenance/readonly.py, which uses the same probe and names.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from ..errors import (
    DatabaseDamagedError,
    NotAStoreError,
    SchemaTooNewError,
    SteerableError,
    StoreAccessError,
    StoreAlreadyOwnedError,
    UsageError,
)
from ..privatefile import fsync_dir
from . import dberrors
from .dberrors import as_store_error
from .lease import WriteLease, lock_path_for
from ..sqlitefile.pinned import open_pinned, opening
from .specialfiles import refuse_special_files
from .repairmark import refuse_interrupted_repair
from .schema import APPLICATION_ID, SCHEMA_VERSION, create_schema
from .txn import transaction

SIBLING_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, by suffix of the full name."""


def sibling_path(path: str | os.PathLike[str], suffix: str) -> Path:
    """``sessions.db`` + ``-wal`` -> ``sessions.db-wal`` (the name SQLite uses)."""
    return Path(f"{os.fspath(path)}{suffix}")


def wal_path(path: str | os.PathLike[str]) -> Path:
    """The ``-wal`` file SQLite keeps beside ``path``."""
    return sibling_path(path, "-wal")


def store_files(path: str | os.PathLike[str]) -> list[Path]:
    """Every file of the store at ``path``: the db, its -wal, -shm, -journal and the lease file."""
    return [Path(path), *(sibling_path(path, s) for s in SIBLING_SUFFIXES), lock_path_for(path)]


def has_wal_content(path: str | os.PathLike[str]) -> bool:
    """Whether a non-empty ``-wal`` sits beside ``path``."""
    wal = wal_path(path)
    return wal.exists() and wal.stat().st_size > 0


def store_uri(path: str | os.PathLike[str], query: str = "") -> str:
    """The ``file:`` URI of ``path`` (absolute, percent-quoted) with ``query`` (``mode=ro&...``)."""
    uri = "file:" + quote(str(Path(path).resolve()))
    return f"{uri}?{query}" if query else uri


def is_store_file(path: str | os.PathLike[str], db: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the store at ``db`` or one of its files (-wal, -shm, -journal, the
    lease's lock file), by name or through a link: an output must never be written there."""
    parts = set(store_files(Path(db).resolve()))
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


# 1. probe and refuse ---------------------------------------------------------------------
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
    non-regular file, an unreadable, empty or non-SQLite file, or a -wal, -shm, -journal or
    lease file that is not a regular file (storage/specialfiles.py: only stat is used).
    """
    p = Path(path)
    refuse_special_files(p)
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
        raise StoreAccessError(f"{p}: cannot access: {exc.strerror}", path=str(p),
                               hint="run as the user that owns the file, or copy it somewhere readable") from exc
    if stat.S_ISDIR(st.st_mode):
        raise NotAStoreError(f"{p}: is a directory, not a database file", path=str(p),
                             hint="pass the database file inside it (for example sessions.db)")
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"{p}: not a regular file", path=str(p), hint="pass the path of the database file")
    try:
        with open_pinned(p) as fh:  # a plain close() would drop this process's SQLite locks on it
            header = fh.read(100)
    except OSError as exc:
        raise StoreAccessError(f"{p}: cannot read: {exc.strerror}", path=str(p),
                               hint="run as the user that owns the file, or copy it somewhere readable") from exc
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


# 2.-4. claim: writable?, lease, markers ----------------------------------------------------
def check_before_open(path: str | os.PathLike[str], *, allow_missing: bool = False) -> FileProbe:
    """Probe ``path``, refuse a foreign or newer file, and refuse a newer schema still in its
    ``-wal`` (read-only) or an interrupted repair; for an opener that takes no lease
    (SqlAlchemyStorage on SQLite). Raises NotAStoreError, StoreAccessError, SchemaTooNewError,
    DatabaseDamagedError, RepairInterruptedError."""
    found = probe(path, allow_missing=allow_missing)
    refuse_foreign(found, path)
    refuse_newer_schema(found, path)
    refuse_interrupted_repair(path)
    if found.exists:
        precheck_wal_markers(path)
    return found


def claim(path: str | os.PathLike[str], *, allow_missing: bool = False,
          write: bool = False) -> tuple[FileProbe, WriteLease]:
    """Probe ``path``, refuse a foreign or newer file (and, to ``write``, one this process
    may not write, or whose directory it may not write: SQLite creates -wal and -shm
    there), take its write lease, refuse a store whose repair was interrupted, then (to
    ``write`` an existing file) refuse a newer schema still in its ``-wal``. The caller
    releases the lease.

    Raises NotAStoreError, SchemaTooNewError, StoreAccessError (cannot write; all three
    before the lease), StoreAlreadyOwnedError naming the holder's pid, or (lease released
    again) RepairInterruptedError, or SchemaTooNewError / NotAStoreError /
    DatabaseDamagedError from the ``-wal`` markers.
    """
    found = probe(path, allow_missing=allow_missing)
    refuse_foreign(found, path)
    refuse_newer_schema(found, path)
    if write:
        for target in ((Path(path),) if found.exists else ()) + (Path(path).resolve().parent,):
            if not os.access(target, os.W_OK):
                raise StoreAccessError(f"{path}: cannot write {target}: permission denied; nothing was changed",
                                       path=str(path), hint="run as the user that owns the store and its directory")
    lease = WriteLease(path).acquire()
    try:
        refuse_interrupted_repair(path)
        if write and found.exists:
            precheck_wal_markers(path)
    except BaseException:
        lease.release(discard=True)
        raise
    return found, lease


def claim_damaged(path: str | os.PathLike[str]) -> WriteLease:
    """For repair: a store SQLite may not be able to read (so no probe of its header and no
    marker check) and whose interrupted repair the caller rolls back (so that is not
    refused). Refuses only a missing path or a non-regular file (NotAStoreError), then takes
    the write lease (StoreAlreadyOwnedError naming the holder). The caller releases it."""
    db = Path(path)
    refuse_special_files(db)  # a FIFO -wal or -shm would block repair's backup copy
    try:
        st = db.stat()
    except FileNotFoundError:
        raise NotAStoreError(f"{db}: no such file", path=str(db), hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"{db}: not a regular file", path=str(db), hint="pass the database file itself")
    return WriteLease(db).acquire()


def read_error(exc: sqlite3.Error, path: str | os.PathLike[str], doing: str) -> SteerableError:
    """The project error for SQLite failing to ``doing`` (open/read) the store at ``path``:
    StoreAlreadyOwnedError when SQLite says busy (another program's lock, a stale -wal index),
    StoreAccessError for permission and I/O, DatabaseDamagedError otherwise. ``exc`` is the cause."""
    if dberrors.kind(exc) == "busy":
        name = getattr(exc, "sqlite_errorname", None) or "busy"
        error: SteerableError = StoreAlreadyOwnedError(
            f"{path}: another program holds a SQLite lock on it ({name}: {exc})", path=str(path),
            hint="close the other program that has this database open (a sqlite3 shell, a DB browser,"
                 " another copy of the app), then retry")
    else:
        error = as_store_error(exc, path) or DatabaseDamagedError(f"{path}: SQLite cannot {doing} it: {exc}",
                                                                  path=str(path))
    error.__cause__ = exc
    return error


def check_markers(conn: sqlite3.Connection, schema: str, path: str | os.PathLike[str]) -> None:
    """Refuse a schema newer than this build, or a file without our application id.

    Reads the markers through SQLite, which sees a newer header still in the ``-wal``.
    """
    try:
        version = conn.execute(f"PRAGMA {schema}.user_version").fetchone()[0]
        app_id = conn.execute(f"PRAGMA {schema}.application_id").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise read_error(exc, path, "read") from exc
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
    for attempt in range(_PROTOCOL_RETRIES):
        with opening():
            conn = sqlite3.connect(store_uri(path, "mode=ro"), uri=True, isolation_level=None)
        try:
            check_markers(conn, "main", path)
            return
        except (DatabaseDamagedError, StoreAlreadyOwnedError) as exc:
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
    """check_markers on a private copy of the db and its -wal (storage/snapshot.py; the
    originals are not touched). A copy a writer overtook is made again, up to 3 times."""
    from .snapshot import Snapshot, SourceMoved, private_temp_base  # snapshot imports this module

    source = Path(path)
    for _attempt in range(_COPY_ATTEMPTS):
        with tempfile.TemporaryDirectory(prefix="steerable-markers-", dir=private_temp_base(source)) as tmp:
            try:
                snapshot = Snapshot.private_copy(source, Path(tmp), name="store.db")
            except SourceMoved:
                continue
            except OSError as exc:
                raise StoreAccessError(f"{path}: cannot read it: {exc.strerror}", path=str(path)) from exc
            conn = sqlite3.connect(snapshot.db, isolation_level=None)
            try:
                check_markers(conn, "main", path)
            finally:
                conn.close()
            return
    raise DatabaseDamagedError(f"{path}: its -wal index is stale and the store kept changing while it was copied",
                               path=str(path), hint="stop the other writer, then open the store again")


_COPY_ATTEMPTS = 3


def refuse_same_store(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> None:
    """Raise UsageError when two paths name one store (the same path, a symlink, a hard link
    of the same file, or two names sharing one lease file)."""
    a, b = Path(first).resolve(), Path(second).resolve()
    if a == b or lock_path_for(a) == lock_path_for(b) or _same_file(a, b):
        raise UsageError(f"{second}: is the same store as {first} (or shares its lease file {lock_path_for(b).name})",
                         hint="pass a different file, with a different name stem, as the destination")


def _same_file(a: Path, b: Path) -> bool:
    """Both exist and are one file (a hard link): the same device and inode."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
        raise StoreAccessError(f"{target}: cannot create it: {exc.strerror}", path=str(target),
                               hint="check that the directory exists and is writable") from exc
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
    with open_pinned(path) as fh:  # (sqlitefile/pinned.py: the one way a store file is opened in-process)
        os.fsync(fh.fileno())


# 5. connect ----------------------------------------------------------------------------
def _uri(path: str | os.PathLike[str], *, readonly: bool) -> str:
    if not readonly:
        return store_uri(path)
    # immutable=1 ignores a -wal, so it is only exact when there is none; we hold the
    # lease, so no writer can create one while we read.
    return store_uri(path, "mode=ro" if has_wal_content(path) else "mode=ro&immutable=1")


def connect(path: str | os.PathLike[str], *, readonly: bool, synchronous: Literal["FULL", "NORMAL"] = "FULL",
            check_same_thread: bool = True, adopt_empty: bool = False) -> sqlite3.Connection:
    """An autocommit connection to a store this process has claimed (see :func:`_connect_once`).

    SQLITE_PROTOCOL (the -wal index of a writer killed a moment ago) is retried briefly; a
    lock another program holds past SQLite's busy timeout (5 s), or a PROTOCOL that stays, is
    StoreAlreadyOwnedError naming the lock. Busy is never reported as damage: the salvage remedy would be wrong for it.
    """
    for attempt in range(_PROTOCOL_RETRIES):
        try:
            return _connect_once(path, readonly=readonly, synchronous=synchronous,
                                 check_same_thread=check_same_thread, adopt_empty=adopt_empty)
        except StoreAlreadyOwnedError as exc:
            # SQLITE_BUSY has already waited out the busy timeout; only a stale -wal index
            # (SQLITE_PROTOCOL) is worth another attempt.
            protocol = getattr(exc.__cause__, "sqlite_errorname", None) == "SQLITE_PROTOCOL"
            if not protocol or attempt == _PROTOCOL_RETRIES - 1:
                raise
        time.sleep(0.02 * (attempt + 1))
    raise AssertionError("unreachable")


def _connect_once(path: str | os.PathLike[str], *, readonly: bool, synchronous: Literal["FULL", "NORMAL"],
                  check_same_thread: bool, adopt_empty: bool) -> sqlite3.Connection:
    """An autocommit connection to a store this process has claimed: markers checked through
    SQLite, then WAL and ``synchronous`` for a writer, temp_store=MEMORY for all.

    ``adopt_empty`` (SqliteStorage): a SQLite file with no table yet is made a store (schema
    created) instead of refused. Raises NotAStoreError (not ours),
    SchemaTooNewError, DatabaseDamagedError, StoreAccessError; the connection is closed then.
    """
    with opening():
        conn = sqlite3.connect(_uri(path, readonly=readonly), uri=True, isolation_level=None,
                               check_same_thread=check_same_thread)
    try:
        empty = adopt_empty and _is_empty(conn, path)
        if not empty:
            check_markers(conn, "main", path)
        if not readonly:
            _pragmas(conn, "main", path, synchronous)
        conn.execute("PRAGMA temp_store = MEMORY")
        if empty and not readonly:
            create_schema(conn)
    except sqlite3.DatabaseError as exc:  # busy, damage, access and decode errors are all DatabaseErrors
        conn.close()
        raise read_error(exc, path, "open") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _is_empty(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> bool:
    """No schema object yet: a blank SQLite file (whatever its application id says; the header
    probe has refused a foreign one) that a new store adopts. Refuses a newer user_version."""
    try:
        tables = conn.execute("SELECT count(*) FROM main.sqlite_master").fetchone()[0]
        version = conn.execute("PRAGMA main.user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise read_error(exc, path, "open") from exc
    refuse_newer_schema(version, path)
    return tables == 0


def _pragmas(conn: sqlite3.Connection, schema: str, path: str | os.PathLike[str], synchronous: str) -> None:
    """WAL (readers never block the one writer; a crash loses no committed transaction) and
    ``synchronous`` (FULL: an acknowledged commit survives power loss)."""
    if conn.execute(f"PRAGMA {schema}.journal_mode").fetchone()[0] != "wal":
        conn.execute(f"PRAGMA {schema}.journal_mode = WAL")
    conn.execute(f"PRAGMA {schema}.synchronous = {synchronous}")


@contextmanager
def open_store(path: str | os.PathLike[str], *, readonly: bool = False) -> Iterator[sqlite3.Connection]:
    """Claim ``path`` (probe, refuse, lease, markers) and yield a connection; release both on exit."""
    with held(path, write=not readonly), connection(path, readonly=readonly) as conn:
        yield conn


@contextmanager
def held(path: str | os.PathLike[str], *, write: bool, allow_missing: bool = False) -> Iterator[FileProbe]:
    """Claim ``path`` (see :func:`claim`; SQLite does not open it) until exit."""
    found, lease = claim(path, write=write, allow_missing=allow_missing)
    try:
        yield found
    finally:
        lease.release(discard=True)  # a job's lease: a lock file it created goes with it


@contextmanager
def connection(path: str | os.PathLike[str], *, readonly: bool) -> Iterator[sqlite3.Connection]:
    """A connection to a store this process holds (see :func:`held`), closed on exit. A damage,
    access or undecodable-text error SQLite raises in the block is its project error
    (dberrors.as_store_error); any other error is re-raised as it is."""
    conn = connect(path, readonly=readonly)
    try:
        yield conn
    except sqlite3.Error as exc:
        error = as_store_error(exc, path)
        if error is None:
            raise
        raise error from exc
    finally:
        conn.close()


def refuse_damaged(conn: sqlite3.Connection, path: str | os.PathLike[str], job: str) -> None:
    """Raise DatabaseDamagedError when SQLite's ``integrity_check`` finds damage in the store a
    rewriting job (compact, archive) is about to change: on a damaged b-tree its deletes could
    fail half-way or miss rows, leaving rows in both files or a VACUUM copying the damage. Reads
    only (``quick_check`` misses a table and its index disagreeing, which the deletes then meet;
    integrity_check costs about as long as ``check`` without its row pass)."""
    try:
        first = conn.execute("PRAGMA main.integrity_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise read_error(exc, path, "read") from exc
    if first != "ok":
        raise DatabaseDamagedError(
            f"{path}: SQLite's integrity_check reports damage ({' '.join(str(first).split())[:200]}); {job} changes"
            " nothing in a damaged store", path=str(path),
            hint="run `steerable-maint repair DB` first (`steerable-maint check DB` shows the damage)")


def attach(conn: sqlite3.Connection, path: str | os.PathLike[str], alias: str, *, readonly: bool) -> None:
    """ATTACH an already-claimed store as ``alias``, check its markers, WAL and FULL sync for a writer."""
    with opening():
        conn.execute("ATTACH DATABASE ? AS " + alias, (_uri(path, readonly=readonly),))
    check_markers(conn, alias, path)
    if not readonly:
        _pragmas(conn, alias, path, "FULL")


__all__ = [
    "SIBLING_SUFFIXES", "FileProbe", "attach", "check_before_open", "check_markers", "claim", "claim_damaged",
    "connect",
    "connection", "create_store", "has_wal_content", "held", "is_store_file", "open_store",
    "precheck_wal_markers", "probe", "refuse_damaged", "refuse_foreign", "refuse_newer_schema", "refuse_same_store", "sibling_path",
    "store_bytes", "store_files", "store_uri", "transaction", "wal_path",
]
