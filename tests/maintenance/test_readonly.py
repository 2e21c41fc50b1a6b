"""open_readonly and every read-only job: no lease, no byte changed, no file created, -wal rows seen.

The writer is a real child process (writer_child.py) holding the lease with automatic
checkpoints off, so its commits exist only in the -wal.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from steerable_agent_runtime.errors import DatabaseDamagedError, NotAStoreError, SchemaTooNewError
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.history import history
from steerable_agent_runtime.maintenance import inspect_store
from steerable_agent_runtime.maintenance.readonly import open_readonly, read_store
from steerable_agent_runtime.maintenance.search import search
from steerable_agent_runtime.storage.schema import create_schema

from .conftest import FIXTURES, snapshot
from .readjobs import READ_JOBS, live_rows

NOBODY = 65534


def _db_file(conn: sqlite3.Connection) -> Path:
    return Path(conn.execute("PRAGMA database_list").fetchone()[2])


def test_quiescent_store_is_read_in_place_immutable_without_a_copy(fixture_copy):
    db = fixture_copy("healthy")
    before = snapshot(db.parent)
    with open_readonly(db) as conn:
        assert conn.strategy == "immutable" and _db_file(conn) == db.resolve()
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2
        assert not conn.overtaken()
    assert snapshot(db.parent) == before


def test_private_copy_lives_in_a_0700_directory_elsewhere_and_is_removed(fixture_copy):
    db = fixture_copy("healthy")
    before = snapshot(db.parent)
    with open_readonly(db, force_copy=True) as conn:
        assert conn.strategy == "copy"
        copy = _db_file(conn)
        assert copy.parent != db.parent.resolve()
        assert copy.parent.stat().st_mode & 0o777 == 0o700
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 2
    assert not copy.parent.exists()
    assert snapshot(db.parent) == before


def test_wal_without_shm_is_copied_with_its_wal_and_no_shm_appears(fixture_copy):
    db = fixture_copy("wal-pending")
    before = snapshot(db.parent)
    with open_readonly(db) as conn:
        assert conn.strategy == "copy"
        assert conn.execute("SELECT count(*) FROM sessions WHERE chat_id = 'chat-gamma'").fetchone()[0] == 1
    assert snapshot(db.parent) == before


def test_immutable_read_overtaken_by_a_checkpoint_runs_again_on_the_live_files(fixture_copy, live_writer):
    db = fixture_copy("healthy")
    live = db.with_name("live.db")
    db.rename(live)
    seen: list[tuple[str, int]] = []
    written: list[int] = []

    def job(conn):
        if not seen:  # the app starts and checkpoints while the job reads
            writer = live_writer(live)
            written.append(writer.write(4))
            assert writer.send("checkpoint").startswith("checkpointed")
        seen.append((conn.strategy, conn.execute("SELECT count(*) FROM history").fetchone()[0]))
        return seen[-1]

    assert read_store(live, job) == ("shared", 7 + written[0])
    assert [strategy for strategy, _ in seen] == ["immutable", "shared"]  # what the first saw is thrown away


def test_connection_refuses_writes(fixture_copy):
    with open_readonly(fixture_copy("healthy")) as conn:
        with pytest.raises(sqlite3.Error):
            conn.execute("DELETE FROM sessions")


def test_newer_schema_is_refused_unless_allowed(fixture_copy):
    db = fixture_copy("schema-too-new")
    with pytest.raises(SchemaTooNewError):
        with open_readonly(db):
            pass
    with open_readonly(db, allow_newer_schema=True) as conn:
        assert conn.user_version == 3


def test_sqlite_file_of_another_kind_is_refused(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAStoreError, match="not a steerable store"):
        with open_readonly(other):
            pass


@pytest.mark.parametrize("job", sorted(READ_JOBS))
def test_read_job_on_quiescent_store_leaves_every_byte_identical(fixture_copy, job):
    for case in ("healthy", "wal-pending"):
        db = fixture_copy(case)
        before = snapshot(db.parent)
        READ_JOBS[job](db)
        assert snapshot(db.parent) == before


def _live_store(tmp_path: Path, live_writer, rows: int = 20):
    db = tmp_path / "live.db"
    writer = live_writer(db)
    total = writer.write(rows)
    assert (tmp_path / "live.db-wal").stat().st_size > 0 and (tmp_path / "live.db-shm").exists()
    return db, writer, total


def test_live_writer_commits_are_only_in_the_wal(tmp_path, live_writer):
    db, _, total = _live_store(tmp_path, live_writer)
    main_only = tmp_path / "main-only"
    main_only.mkdir()
    shutil.copyfile(db, main_only / "live.db")
    conn = sqlite3.connect(f"{(main_only / 'live.db').as_uri()}?immutable=1", uri=True)
    assert conn.execute("SELECT count(*) FROM history").fetchone()[0] == 0  # the db file alone has none
    conn.close()
    assert live_rows(READ_JOBS["check"](db)) == total


@pytest.mark.parametrize("job", sorted(READ_JOBS))
def test_read_job_sees_wal_rows_of_a_live_writer_and_changes_nothing(tmp_path, live_writer, job):
    db, writer, total = _live_store(tmp_path, live_writer)
    before = snapshot(tmp_path)
    result = READ_JOBS[job](db)
    assert live_rows(result) == total
    assert snapshot(tmp_path) == before
    assert writer.write(1) == total + 1  # the owner still writes


def test_writer_never_fails_while_every_read_job_runs(tmp_path, live_writer):
    db, writer, _ = _live_store(tmp_path, live_writer)
    db_before, wal_before = db.read_bytes(), (tmp_path / "live.db-wal").read_bytes()
    names_before = sorted(os.listdir(tmp_path))
    writer.send("run")
    for _ in range(3):
        for job in sorted(READ_JOBS):
            assert live_rows(READ_JOBS[job](db)) > 0
    ok, failed = writer.pause()
    assert failed == 0 and ok > 21
    assert sorted(os.listdir(tmp_path)) == names_before
    assert db.read_bytes() == db_before  # autocheckpoint is off: only the -wal grows
    assert (tmp_path / "live.db-wal").read_bytes().startswith(wal_before)


@pytest.mark.parametrize("job", sorted(READ_JOBS))
def test_read_job_after_writer_crash_sees_every_acknowledged_row(tmp_path, live_writer, job):
    db, writer, total = _live_store(tmp_path, live_writer)
    writer.kill()
    assert (tmp_path / "live.db-wal").exists() and (tmp_path / "live.db-shm").exists()
    before = snapshot(tmp_path)
    assert live_rows(READ_JOBS[job](db)) == total
    assert snapshot(tmp_path) == before


def _as_nobody(job: "str | Callable[[Path], Any]", db: Path) -> dict:
    """Run one read job in a forked child that dropped root for uid 65534; return its result
    as {"rows": live_rows(report), "uid": ..., "report": the report as JSON}."""
    run = READ_JOBS[job] if isinstance(job, str) else job
    run(FIXTURES / "healthy" / "sessions.db")  # import everything lazily imported, as root
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            report = run(db)
            rows = live_rows(report) if db.name == "live.db" else None
            out = {"rows": rows, "uid": os.getuid(), "report": json.loads(report.model_dump_json())}
            code = 0
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_fd, json.dumps(out).encode())
        os._exit(code)
    os.close(write_fd)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_fd, "rb") as pipe:
        out = json.loads(pipe.read() or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


def _read_only_dir(live_writer, crash: bool):
    base = Path(tempfile.mkdtemp(prefix="steerable-rodir-"))
    base.chmod(0o755)
    (base / "store").mkdir()
    writer = live_writer(base / "store" / "live.db")
    total = writer.write(15)
    if crash:
        writer.kill()
    for path in (base / "store").iterdir():
        path.chmod(0o644)
    (base / "store").chmod(0o555)
    return base, writer, total


@pytest.mark.parametrize("crash", [False, True], ids=["live-writer", "after-crash"])
@pytest.mark.parametrize("job", sorted(READ_JOBS))
def test_read_job_in_read_only_directory_as_unprivileged_user(live_writer, job, crash):
    base, writer, total = _read_only_dir(live_writer, crash)
    store = base / "store"
    try:
        before = snapshot(store)
        out = _as_nobody(job, store / "live.db")
        assert (out["rows"], out["uid"]) == (total, NOBODY)
        assert snapshot(store) == before
        if not crash:
            assert writer.write(1) == total + 1
    finally:
        store.chmod(0o755)
        writer.close()
        shutil.rmtree(base)


GAMMA_JOBS = {
    "check": (check, lambda r: r["rows"]["sessions"] == 3 and r["access"] == "copy"),
    "inspect": (inspect_store, lambda r: r["rows"]["sessions"] == 3),
    "history": (lambda db: history(db, "chat-gamma") if db.parent.name == "store" else history(db, "chat-alpha"),
                lambda r: [e["entry"]["message"]["content"] for e in r["entries"]] == ["only in the wal"]),
    "search": (lambda db: search(db, "wal"), lambda r: r["chats"] == ["chat-gamma"]),
}


@pytest.mark.parametrize("job", sorted(GAMMA_JOBS))
def test_wal_without_shm_in_read_only_directory_is_read_from_a_private_copy(job):
    base = Path(tempfile.mkdtemp(prefix="steerable-rodir-"))
    try:
        base.chmod(0o755)
        store = base / "store"
        shutil.copytree(FIXTURES / "wal-pending", store)
        for path in store.iterdir():
            path.chmod(0o644)
        store.chmod(0o555)
        before = snapshot(store)
        report = _as_nobody(GAMMA_JOBS[job][0], store / "sessions.db")["report"]
        assert snapshot(store) == before and not (store / "sessions.db-shm").exists()
        assert GAMMA_JOBS[job][1](report)  # chat-gamma exists only in the -wal
    finally:
        (base / "store").chmod(0o755)
        shutil.rmtree(base)


def test_damaged_wal_header_is_read_from_a_copy_not_spun_on(tmp_path, live_writer):
    """readonly_shm cannot recover a WAL whose header is bad (SQLite spins ~10 s, then
    SQLITE_PROTOCOL); the copy reads at once and, like SQLite, ignores that WAL."""
    db, writer, _ = _live_store(tmp_path, live_writer)
    assert writer.send("checkpoint").startswith("checkpointed")
    in_db = writer.write(5) - 5
    writer.kill()
    _damage_wal_header(tmp_path / "live.db-wal")
    before = snapshot(tmp_path)
    with open_readonly(db) as conn:
        assert conn.strategy == "copy"
    report = check(db)
    assert report.access == "copy" and report.rows["history"] == in_db  # what the db file holds
    assert snapshot(tmp_path) == before


def _damage_wal_header(wal: Path) -> None:
    raw = bytearray(wal.read_bytes())
    raw[24] ^= 0xFF  # the header checksum
    wal.write_bytes(bytes(raw))


def test_store_whose_tables_are_only_in_a_damaged_wal_points_to_salvage(tmp_path):
    """As an older build left a new store: even the schema only in the -wal (never checkpointed)."""
    db = tmp_path / "old.db"
    owner = sqlite3.connect(db, isolation_level=None)
    owner.execute("PRAGMA journal_mode = WAL")
    owner.execute("PRAGMA wal_autocheckpoint = 0")
    create_schema(owner)
    live = tmp_path / "crashed"
    live.mkdir()
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(f"{db}{suffix}", live / f"old.db{suffix}")  # what a kill -9 leaves
    owner.close()
    _damage_wal_header(live / "old.db-wal")
    before = snapshot(live)
    with pytest.raises(DatabaseDamagedError, match="-wal") as caught:
        check(live / "old.db")
    assert "salvage" in caught.value.hint
    assert snapshot(live) == before
