"""Fail closed: unreadable records, newer schemas and bad paths are refused, untouched."""

from __future__ import annotations

import os
import sqlite3

import pytest

from steerable_agent_runtime import (
    DataIntegrityError,
    NotAStoreError,
    RecordFormatError,
    SchemaTooNewError,
    SqliteStorage,
    resume_transcript,
)
from steerable_agent_runtime.storage.schema import APPLICATION_ID
from tests.helpers import boundary, digest_files, item, plant_history_row, run, unprivileged


@pytest.fixture
def open_dir():
    """A temp dir every user can traverse (pytest's base dir is 0700 to root)."""
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="steerable-open-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def make_store_with_raw_entry(path, raw: str) -> None:
    """A store whose record 'c1' ends with ``raw`` planted as the next entry, as a newer build would."""
    store = SqliteStorage(path)
    run(store.append_history("c1", [boundary("summary"), item("a")]))
    run(store.close())
    plant_history_row(path, "c1", 3, 3, raw, checkpoint=True)


V3 = '{"v":3,"type":"item","seq":3,"at":"2026-01-01T00:00:00.000000Z","message":{"role":"user","content":"x"},"parts":[]}'
UNKNOWN = '{"v":2,"type":"tool_result","seq":3,"at":"2026-01-01T00:00:00.000000Z"}'


@pytest.mark.parametrize("raw,words", [
    (V3, "written by a newer build (v3; this build reads up to v2): upgrade the app; the record was not modified"),
    (UNKNOWN, "unknown entry type 'tool_result'"),
])
def test_unreadable_entry_refuses_list_and_resume_and_changes_no_byte(tmp_path, raw, words):
    db = tmp_path / "sessions.db"
    make_store_with_raw_entry(db, raw)
    store = SqliteStorage(db)
    run(store.close())  # the open itself (lease, WAL setup) must be a no-op on an existing store
    before = digest_files(tmp_path)
    store = SqliteStorage(db)
    with pytest.raises(RecordFormatError) as err:
        run(store.list_history("c1"))
    assert words in str(err.value) and err.value.record_id == "c1" and err.value.seq == 3
    with pytest.raises(RecordFormatError, match="the record was not modified"):
        run(resume_transcript(store, "c1"))
    assert run(store.list_history("c1", until_seq=2))[1]["seq"] == 2  # the readable part still reads
    run(store.close())
    assert digest_files(tmp_path) == before


def test_checksum_mismatch_is_refused_on_read(tmp_path):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_history("c1", [item("secret plan")]))
    run(store.close())
    conn = sqlite3.connect(db)
    conn.execute("UPDATE history SET data = replace(data, 'secret', 'sacret')")
    conn.commit()
    conn.close()
    store = SqliteStorage(db)
    with pytest.raises(DataIntegrityError, match="do not match their checksum"):
        run(store.list_history("c1"))
    run(store.close())


def test_newer_schema_is_refused_and_untouched(tmp_path):
    db = tmp_path / "sessions.db"
    run(SqliteStorage(db).close())
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    os.unlink(tmp_path / "sessions.lock")
    before = digest_files(tmp_path)
    with pytest.raises(SchemaTooNewError) as err:
        SqliteStorage(db)
    assert err.value.version == 99 and "newer build" in str(err.value) and "not modified" in str(err.value)
    assert digest_files(tmp_path) == before  # not even a lock file appeared


def test_foreign_sqlite_database_is_refused(tmp_path):
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = digest_files(tmp_path)
    with pytest.raises(NotAStoreError, match="not a steerable store"):
        SqliteStorage(db)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID + 1}")
    conn.commit()
    conn.close()
    before = digest_files(tmp_path)
    with pytest.raises(NotAStoreError, match="another application"):
        SqliteStorage(db)
    assert digest_files(tmp_path) == before


@pytest.mark.parametrize("kind", ["directory", "empty", "text", "garbage", "missing-dir"])
def test_bad_paths_raise_with_a_hint_and_change_nothing(tmp_path, kind):
    target = tmp_path / "sessions.db"
    if kind == "directory":
        target.mkdir()
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "text":
        target.write_text("these are my notes\n" * 20)
    elif kind == "garbage":
        target.write_bytes(os.urandom(4096))
    else:
        target = tmp_path / "nowhere" / "sessions.db"
    before = digest_files(tmp_path)
    with pytest.raises(NotAStoreError) as err:
        SqliteStorage(target)
    assert err.value.hint and err.value.path == str(target)
    assert digest_files(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["sessions.db"] if kind != "missing-dir" else [])


def test_unreadable_file_is_refused(open_dir):
    tmp_path = open_dir
    db = tmp_path / "sessions.db"
    run(SqliteStorage(db).close())
    db.chmod(0)
    before = digest_files(tmp_path)
    with unprivileged(), pytest.raises(NotAStoreError, match="cannot read") as err:
        SqliteStorage(db)
    assert err.value.hint
    assert digest_files(tmp_path) == before


def test_unreachable_directory_is_refused(open_dir):
    tmp_path = open_dir / "private"
    tmp_path.mkdir(mode=0o700)
    with unprivileged(), pytest.raises(NotAStoreError, match="cannot"):
        SqliteStorage(tmp_path / "sessions.db")


def test_damaged_pages_raise_database_damaged_not_a_raw_sqlite_error(tmp_path):
    from steerable_agent_runtime import DatabaseDamagedError

    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_history("c1", [item("x" * 3000) for _ in range(40)]))
    run(store.close())
    page_size = 4096
    raw = bytearray(db.read_bytes())
    pages = len(raw) // page_size
    for page in range(pages // 2, pages):  # the history table's leaves live in the second half
        raw[page * page_size:(page + 1) * page_size] = b"\xff" * page_size
    db.write_bytes(bytes(raw))
    store = SqliteStorage(db)
    with pytest.raises(DatabaseDamagedError) as err:
        run(store.list_history("c1"))
    assert "salvage" in err.value.hint
    run(store.close())
