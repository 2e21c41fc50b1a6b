"""Turn a database driver's exception into the project's error, with the password scrubbed.

SqlAlchemyStorage lets no raw driver error escape: every exception raised under
``translated()`` that comes from the driver, the network or SQLAlchemy becomes a
SteerableError subclass naming the store by its URL with the password hidden, and any
occurrence of the password in the driver's text is replaced by ``***``. This module does
not import SQLAlchemy: it reads the exception chain (``orig``, ``__cause__``), the SQLSTATE
the PostgreSQL drivers attach, and SQLite's messages.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import (
    DatabaseDamagedError,
    NotAStoreError,
    SteerableError,
    StoreAuthError,
    StoreConnectionError,
    StoreServerError,
)

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
    lowered = text.lower()
    if "unable to open database file" in lowered:
        return StoreConnectionError(f"{where}: SQLite cannot open the file: {text}",
                                    hint="check that the directory exists and is writable", **fields)
    if "file is not a database" in lowered:
        return NotAStoreError(f"{where}: not a SQLite database", **fields)
    if "malformed" in lowered:
        return DatabaseDamagedError(f"{where}: SQLite reports damage: {text}", **fields)
    if code is not None and code.startswith(("08", "57P")) or (code is None and _is_network(exc)):
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
