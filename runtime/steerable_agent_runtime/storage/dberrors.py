"""What a database error means: the one place SQLite and driver errors are classified.

SQLite (:func:`kind`, :func:`as_store_error`): by result code. Python 3.11+ attaches
``sqlite_errorcode`` (the extended result code) and ``sqlite_errorname`` to every exception
that comes from SQLite; the primary code is its low byte (https://www.sqlite.org/rescode.html).
An exception without a code comes from the ``sqlite3`` module itself: the one it raises on a
read is a text column that is not UTF-8. Nothing here looks at SQLite's message text, which
changes between SQLite versions.

Drivers (:func:`translated`): SqlAlchemyStorage lets no raw driver error escape: every
exception raised under ``translated()`` that comes from the driver, the network or SQLAlchemy
becomes a SteerableError subclass naming the store by its URL with the password hidden, and
any occurrence of the password in the driver's text is replaced by ``***``. This module does
not import SQLAlchemy: it reads the exception chain (``orig``, ``__cause__``), the SQLSTATE
the PostgreSQL drivers attach, and the SQLite result code of a sqlite3 error in the chain.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from ..errors import (
    DatabaseDamagedError,
    NotAStoreError,
    SteerableError,
    StoreAccessError,
    StoreAuthError,
    StoreConnectionError,
    StoreServerError,
)

# SQLite ---------------------------------------------------------------------------------
SQLITE_ERROR = 1
SQLITE_PERM = 3
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_PROTOCOL = 15
SQLITE_AUTH = 23
SQLITE_NOTADB = 26

Kind = Literal["damage", "access", "busy", "decode", "statement", "other"]

_KINDS: dict[int, Kind] = {
    SQLITE_CORRUPT: "damage", SQLITE_NOTADB: "damage",
    SQLITE_PERM: "access", SQLITE_READONLY: "access", SQLITE_IOERR: "access", SQLITE_FULL: "access",
    SQLITE_CANTOPEN: "access", SQLITE_AUTH: "access",
    SQLITE_BUSY: "busy", SQLITE_LOCKED: "busy", SQLITE_PROTOCOL: "busy",
    SQLITE_ERROR: "statement",
}


def primary_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc`` (None: not from SQLite)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def kind(exc: BaseException) -> Kind:
    """``damage`` (corrupt, not a database), ``access`` (permission, read-only, I/O, disk full,
    cannot open), ``busy`` (locked by another connection, a stale -wal index), ``decode`` (the
    sqlite3 module could not decode a text value), ``statement`` (SQLITE_ERROR: the statement
    itself, e.g. an FTS query syntax error or a missing table) or ``other``."""
    code = primary_code(exc)
    if code is None:
        return "decode" if isinstance(exc, sqlite3.OperationalError) else "other"
    return _KINDS.get(code, "other")


def is_damage(exc: BaseException) -> bool:
    """Whether SQLite reports the file itself as damaged."""
    return kind(exc) == "damage"


def as_store_error(exc: sqlite3.Error, path: str | os.PathLike[str]) -> SteerableError | None:
    """The project error for ``exc`` raised on the store at ``path``: DatabaseDamagedError for
    damage and for a stored text value that is not UTF-8 (another program wrote raw bytes, such
    as an encoded lone surrogate, into a TEXT column), StoreAccessError for access; None when
    it is neither (the caller re-raises: a bug, a lock, or a caller's bad statement). The
    SQLite error stays the ``__cause__``."""
    found = kind(exc)
    if found == "damage":
        error: SteerableError = DatabaseDamagedError(f"{path}: SQLite reports damage: {exc}", path=str(path))
    elif found == "decode":
        error = DatabaseDamagedError(
            f"{path}: a stored text value is not valid UTF-8 ({exc}); nothing was changed", path=str(path),
            hint="`steerable-maint check DB` lists the row (another program wrote it); `steerable-maint salvage`"
                 " exports the rest")
    elif found == "access":
        name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
        error = StoreAccessError(f"{path}: SQLite cannot use it ({name}): {exc}", path=str(path))
    else:
        return None
    error.__cause__ = exc
    return error


def _sqlite_code(exc: BaseException) -> int | None:
    """The primary result code of the first sqlite3 error in ``exc``'s chain."""
    for cur in chain(exc):
        if isinstance(cur, sqlite3.Error) and primary_code(cur) is not None:
            return primary_code(cur)
    return None


# drivers --------------------------------------------------------------------------------

UNIQUE_VIOLATION = "23505"
_AUTH = {"28P01", "28000"}
_NO_DATABASE = "3D000"
_RETRYABLE = {"40001", "40P01", UNIQUE_VIOLATION}


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything it wraps (``orig``, ``__cause__``, ``__context__``), once each."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cur = todo.pop(0)
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend([getattr(cur, "orig", None), cur.__cause__, cur.__context__])


def sqlstate(exc: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE anywhere in the chain, or None."""
    for cur in chain(exc):
        code = getattr(cur, "sqlstate", None) or getattr(cur, "pgcode", None)
        if isinstance(code, str) and len(code) == 5:
            return code
    return None


def is_retryable(exc: BaseException) -> bool:
    """A conflict another attempt may not meet: unique violation, serialisation, deadlock."""
    return sqlstate(exc) in _RETRYABLE


def _driver_text(exc: BaseException) -> str:
    for cur in chain(exc):
        if type(cur).__module__.startswith(("asyncpg", "sqlite3", "psycopg")) or isinstance(cur, OSError):
            return str(cur).splitlines()[0] if str(cur) else type(cur).__name__
    first = str(exc).splitlines()
    return first[0] if first else type(exc).__name__


def _is_network(exc: BaseException) -> bool:
    return any(isinstance(cur, (OSError, asyncio.TimeoutError, TimeoutError, socket.gaierror))
               and not type(cur).__module__.startswith("sqlite3") for cur in chain(exc))


def _connection_lost(exc: BaseException) -> bool:
    """Whether SQLAlchemy found the connection dead when the error was raised. A connection
    that died mid-call surfaces as driver errors with no SQLSTATE and no OSError in the chain
    (asyncpg: "connection is closed", "cannot switch to state ..; another operation is in
    progress"; psycopg: "server closed the connection unexpectedly"); SQLAlchemy asks the
    driver whether the connection is closed and records the answer on its DBAPIError."""
    return any(getattr(cur, "connection_invalidated", False) is True for cur in chain(exc))


def translate(exc: BaseException, *, where: str, password: str | None) -> SteerableError:
    """The SteerableError for a driver/network exception raised while using the store ``where``."""
    code = sqlstate(exc)
    text = _driver_text(exc)
    if password:
        text = text.replace(password, "***")
    fields: dict[str, Any] = {"path": where}
    if code in _AUTH:
        return StoreAuthError(f"{where}: the server refused the credentials: {text}", **fields)
    if code == _NO_DATABASE:
        return StoreConnectionError(f"{where}: {text}", hint="create the database first (createdb NAME) or fix"
                                    " the database name in the URL", **fields)
    sqlite_code = _sqlite_code(exc)
    if sqlite_code == SQLITE_CANTOPEN:
        return StoreConnectionError(f"{where}: SQLite cannot open the file: {text}",
                                    hint="check that the directory exists and is writable", **fields)
    if sqlite_code == SQLITE_NOTADB:
        return NotAStoreError(f"{where}: not a SQLite database", **fields)
    if sqlite_code == SQLITE_CORRUPT:
        return DatabaseDamagedError(f"{where}: SQLite reports damage: {text}", **fields)
    if sqlite_code in (SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_AUTH):
        return StoreAccessError(f"{where}: SQLite cannot use it: {text}", **fields)
    if code is not None and code.startswith(("08", "57P")) or (code is None and (_is_network(exc)
                                                                             or _connection_lost(exc))):
        return StoreConnectionError(f"{where}: cannot reach the database: {text}", **fields)
    return StoreServerError(f"{where}: the database refused a statement: {text}",
                            **fields, **({"sqlstate": code} if code else {}))


@contextmanager
def translated(where: str, password: str | None) -> Iterator[None]:
    """Re-raise any non-SteerableError exception as its SteerableError (never a raw driver error)."""
    try:
        yield
    except SteerableError:
        raise
    except (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except Exception as exc:
        if not is_driver_error(exc):
            raise  # a bug of ours, not the database's: keep its traceback
        raise translate(exc, where=where, password=password) from None


_DRIVER_MODULES = ("sqlalchemy", "asyncpg", "sqlite3", "aiosqlite", "psycopg")


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from the database, its driver or the network."""
    return any(type(cur).__module__.startswith(_DRIVER_MODULES)
               or isinstance(cur, (OSError, asyncio.TimeoutError, TimeoutError)) for cur in chain(exc))
