"""SqliteStorage refuses a schema newer than the build "file untouched" -- also when the newer
user_version is only in the -wal (its writer died before a checkpoint)."""

import shutil
import sqlite3

import pytest

from steerable_agent_runtime.errors import SchemaTooNewError
from steerable_agent_runtime.storage.sqlite import SqliteStorage


def test_refusing_a_newer_schema_in_the_wal_leaves_db_and_wal_bytes_unchanged(tmp_path):
    SqliteStorage(tmp_path / "t.db").close_sync()
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA user_version = 9")
    shutil.copyfile(tmp_path / "t.db", tmp_path / "s.db")
    shutil.copyfile(tmp_path / "t.db-wal", tmp_path / "s.db-wal")
    conn.close()
    before = (tmp_path / "s.db").read_bytes(), (tmp_path / "s.db-wal").read_bytes()
    with pytest.raises(SchemaTooNewError):
        SqliteStorage(tmp_path / "s.db")
    wal = tmp_path / "s.db-wal"
    assert ((tmp_path / "s.db").read_bytes(), wal.read_bytes() if wal.exists() else None) == before
