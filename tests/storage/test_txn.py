"""storage/txn.transaction and SqliteStorage's error mapping, as context managers: what they do
on success, on an exception in the body, on a failed COMMIT, and which errors they turn into
store errors (both are classes now; these hold them to what the generator versions did)."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import pytest

from steerable_agent_runtime import DatabaseDamagedError, SqliteStorage
from steerable_agent_runtime.storage.dberrors import as_store_error
from steerable_agent_runtime.storage.txn import transaction


class _Conn:
    """A connection stand-in that records statements and can fail COMMIT."""

    def __init__(self, commit_error: BaseException | None = None, ends_on_failed_commit: bool = False) -> None:
        self.sql: list[str] = []
        self.in_transaction = False
        self.commit_error, self.ends = commit_error, ends_on_failed_commit

    def execute(self, sql: str) -> None:
        self.sql.append(sql)
        if sql == "COMMIT" and self.commit_error is not None:
            if self.ends:
                self.in_transaction = False
            raise self.commit_error
        self.in_transaction = sql == "BEGIN IMMEDIATE"


def test_commit_on_success_and_the_connection_is_given():
    conn = _Conn()
    with transaction(conn) as got:  # type: ignore[arg-type]
        assert got is conn and conn.sql == ["BEGIN IMMEDIATE"]
    assert conn.sql == ["BEGIN IMMEDIATE", "COMMIT"]


@pytest.mark.parametrize("error", [ValueError("x"), KeyboardInterrupt(), sqlite3.OperationalError("y")])
def test_rollback_on_any_exception_which_propagates_itself(error):
    conn = _Conn()
    with pytest.raises(type(error)) as raised:
        with transaction(conn):  # type: ignore[arg-type]
            raise error
    assert raised.value is error
    assert conn.sql == ["BEGIN IMMEDIATE", "ROLLBACK"]


@pytest.mark.parametrize("ends", [False, True])
def test_a_failed_commit_rolls_back_unless_it_ended_the_transaction(ends):
    error = sqlite3.OperationalError("disk I/O error")
    conn = _Conn(commit_error=error, ends_on_failed_commit=ends)
    with pytest.raises(sqlite3.OperationalError) as raised:
        with transaction(conn):  # type: ignore[arg-type]
            pass
    assert raised.value is error
    assert conn.sql == ["BEGIN IMMEDIATE", "COMMIT"] + ([] if ends else ["ROLLBACK"])


def test_a_failed_begin_propagates_without_a_rollback():
    class _Busy(_Conn):
        def execute(self, sql: str) -> None:
            self.sql.append(sql)
            raise sqlite3.OperationalError("database is locked")

    conn = _Busy()
    with pytest.raises(sqlite3.OperationalError):
        with transaction(conn):  # type: ignore[arg-type]
            raise AssertionError("the body ran")
    assert conn.sql == ["BEGIN IMMEDIATE"]


def test_a_real_transaction_commits_and_rolls_back():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(ZeroDivisionError):
        with transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            1 / 0
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)] and not conn.in_transaction


@contextmanager
def _generator_version(path):
    """SqliteStorage._damage_as_error as it was written before (a generator context manager)."""
    try:
        yield
    except sqlite3.Error as exc:
        error = as_store_error(exc, path)
        if error is None and isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            error = DatabaseDamagedError(f"{path}: SQLite reports damage: {exc}", path=str(path))
        if error is None:
            raise
        raise error from exc


def _outcome(context, error):
    try:
        with context:
            if error is not None:
                raise error
    except BaseException as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc), exc is error, type(exc.__cause__), exc.__cause__ is error
    return None


def _coded(cls, message, code, name):
    exc = cls(message)
    exc.sqlite_errorcode, exc.sqlite_errorname = code, name
    return exc


def test_the_storage_maps_sqlite_errors_as_before(tmp_path):
    store = SqliteStorage(tmp_path / "s.db")
    try:
        errors = [None, KeyError("k"), KeyboardInterrupt(), sqlite3.IntegrityError("UNIQUE constraint failed"),
                  sqlite3.OperationalError("no such function: f"), sqlite3.DatabaseError("file is not a database"),
                  sqlite3.DataError("x"), sqlite3.InterfaceError("y"), sqlite3.ProgrammingError("z"),
                  _coded(sqlite3.DatabaseError, "database disk image is malformed", 11, "SQLITE_CORRUPT"),
                  _coded(sqlite3.OperationalError, "database is locked", 5, "SQLITE_BUSY"),
                  _coded(sqlite3.OperationalError, "disk I/O error", 10, "SQLITE_IOERR"),
                  _coded(sqlite3.OperationalError, "unable to open database file", 14, "SQLITE_CANTOPEN"),
                  _coded(sqlite3.OperationalError, "attempt to write a readonly database", 8, "SQLITE_READONLY"),
                  _coded(sqlite3.IntegrityError, "constraint failed", 19, "SQLITE_CONSTRAINT")]
        outcomes = [_outcome(store._damage_as_error(), error) for error in errors]
        assert outcomes == [_outcome(_generator_version(store.path), error) for error in errors]
        assert outcomes[0] is None and outcomes[1][2] and outcomes[3][0] is DatabaseDamagedError
    finally:
        store.close_sync()
