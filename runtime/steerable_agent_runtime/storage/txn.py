"""The one write transaction on an autocommit sqlite3 connection (re-exported by access.py).

A leaf module (it imports nothing of the project), so storage/schema.py, which access.py
imports, can use it too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection: ``BEGIN IMMEDIATE`` (the write lock
    first, so a transaction never fails half-way for a lock), COMMIT on exit, ROLLBACK on any
    exception (if a failed COMMIT has not ended it already); the exception propagates."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


__all__ = ["transaction"]
