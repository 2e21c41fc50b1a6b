"""The one write transaction on an autocommit sqlite3 connection (re-exported by access.py).

A leaf module (it imports nothing of the project), so storage/schema.py, which access.py
imports, can use it too.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType


class transaction:  # lower case: used as the function it was, ``with transaction(conn) as conn:``
    """One write transaction on an autocommit connection: ``BEGIN IMMEDIATE`` (the write lock
    first, so a transaction never fails half-way for a lock), COMMIT on exit, ROLLBACK on any
    exception (if a failed COMMIT has not ended it already); the exception propagates.

    A class rather than a generator context manager: every append runs one, and entering and
    leaving a generator's context costs about three times the instructions (BENCHMARKS.md,
    "The append path, fifth pass")."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        conn = self.conn
        if kind is None:
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return False
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False  # the exception propagates


__all__ = ["transaction"]
