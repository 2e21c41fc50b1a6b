"""salvage(): JSONL of every row copy, verified/valid/superseded, safe output, rebuild."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sqlite3
from pathlib import Path

import pytest

from steerable_agent_runtime.errors import NotAStoreError, OutputExistsError, StoreAlreadyOwnedError
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.maintenance.workers import Chunking
from steerable_agent_runtime.storage.lease import WriteLease
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests.damage import Original, build_store, copy_store, read_rows, zero_header, zero_page1


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def _lines(path: Path) -> list[dict]:
    # JSON Lines: "\n" ends a line; str.splitlines would also split at a U+2028 inside data.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def _winners(lines: list[dict]) -> set[tuple]:
    return {(r["table"], tuple(r["key"]), r["data"].encode()) for r in lines if r["committed"] and not r["superseded"]}


def _originals(rows: list[Original]) -> set[tuple]:
    return {(r.table, r.key, r.data) for r in rows}


@pytest.fixture()
def store(tmp_path: Path) -> tuple[Path, list[Original]]:
    src = tmp_path / "src"
    src.mkdir()
    rows, _ = build_store(src / "sessions.db", seed=7)
    return src / "sessions.db", rows


def test_healthy_store_exports_each_row_once_verified_valid_and_exits_0(store, tmp_path: Path) -> None:
    db, rows = store
    report = salvage(db, tmp_path / "out.jsonl")
    lines = _lines(tmp_path / "out.jsonl")
    assert report.method == "sqlite" and report.exit_code == 0 and report.complete
    assert _winners(lines) == _originals(rows)
    assert all(r["verified"] and r["valid"] and r["source"] == "btree" for r in lines)
    assert report.rows_written == len(lines) == len(rows)


def test_source_is_byte_identical_and_nothing_appears_beside_it(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows, owner = build_store(src / "s.db", seed=3, keep_open=True)
    try:
        before = _digest(src)
        report = salvage(src / "s.db", tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
        assert _digest(src) == before
        assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)  # committed rows still in the -wal
        assert report.wal_frames["committed"] > 0
    finally:
        owner.close_sync()


def test_a_lone_db_is_read_in_place_changing_nothing_and_creating_nothing(store, tmp_path: Path, monkeypatch) -> None:
    from steerable_agent_runtime.storage import snapshot as snapshot_module

    db, rows = store
    assert not os.path.exists(f"{db}-wal")
    copies = []
    monkeypatch.setattr(snapshot_module, "copy_private", lambda *a: copies.append(a))  # fails if it copies
    before, names = _digest(db.parent), sorted(os.listdir(db.parent))
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.method == "sqlite" and report.exit_code == 0 and copies == []
    assert _digest(db.parent) == before and sorted(os.listdir(db.parent)) == names
    assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)


def test_a_writer_overtaking_an_in_place_read_makes_salvage_start_again_from_a_copy(store, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    from steerable_agent_runtime.maintenance.salvage import job as salvage_module

    db, rows = store
    real, calls = salvage_module.write_jsonl, []

    def export_then_a_writer_commits(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # during the first (in-place) export only
            _edit(db, "DELETE FROM messages WHERE id = 'm-0-0'")
            _edit(db, "PRAGMA wal_checkpoint(TRUNCATE)")
        return real(*args, **kwargs)

    monkeypatch.setattr(salvage_module, "write_jsonl", export_then_a_writer_commits)
    report = salvage(db, tmp_path / "out.jsonl")
    assert len(calls) == 2 and report.exit_code == 0
    now = {r for r in _originals(rows) if r[:2] != ("messages", ("m-0-0",))}
    assert _winners(_lines(tmp_path / "out.jsonl")) == now  # the second snapshot, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "src"]


def test_a_store_that_keeps_changing_is_refused_after_three_attempts(store, tmp_path: Path, monkeypatch) -> None:
    from steerable_agent_runtime.errors import DatabaseDamagedError
    from steerable_agent_runtime.storage import snapshot as snapshot_module
    from steerable_agent_runtime.maintenance.salvage import job as salvage_module

    db, _ = store
    real = snapshot_module.copy_private

    def copy_while_a_writer_commits(src, dst):
        real(src, dst)
        _edit(db, "UPDATE sessions SET user_id = user_id || ''")

    monkeypatch.setattr(snapshot_module, "copy_private", copy_while_a_writer_commits)
    monkeypatch.setattr(salvage_module, "has_wal_content", lambda _p: True)  # copy from the start
    with pytest.raises(DatabaseDamagedError, match="kept changing") as err:
        salvage(db, tmp_path / "out.jsonl")
    assert err.value.hint and not (tmp_path / "out.jsonl").exists()


def test_output_is_0600_and_existing_output_needs_force(store, tmp_path: Path) -> None:
    db, _ = store
    out = tmp_path / "out.jsonl"
    out.write_text("keep me")
    with pytest.raises(OutputExistsError):
        salvage(db, out)
    assert out.read_text() == "keep me"
    salvage(db, out, force=True)
    assert (out.stat().st_mode & 0o777) == 0o600 and out.read_text() != "keep me"


def test_symlinked_output_is_refused_and_with_force_replaced_not_followed(store, tmp_path: Path) -> None:
    db, _ = store
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    with pytest.raises(OutputExistsError):
        salvage(db, link)
    salvage(db, link, force=True)
    assert victim.read_text() == "precious" and not link.is_symlink()


def test_output_that_is_the_source_is_refused_even_with_force(store) -> None:
    db, _ = store
    before = db.read_bytes()
    with pytest.raises(OutputExistsError):
        salvage(db, db, force=True)
    assert db.read_bytes() == before


@pytest.mark.parametrize("name", ["sessions.db-wal", "sessions.db-shm", "sessions.db-journal", "sessions.lock"])
def test_output_that_is_one_of_the_stores_files_is_refused_even_with_force(store, name) -> None:
    db, _ = store
    (db.parent / "sessions.lock").write_bytes(b"123\n")  # as the app's lease leaves it
    before = _digest(db.parent)
    with pytest.raises(OutputExistsError, match="one of its files"):
        salvage(db, db.parent / name, force=True)
    with pytest.raises(OutputExistsError, match="one of its files"):
        salvage(db, db.parent / "out.jsonl", rebuild=db.parent / name, force=True)
    assert _digest(db.parent) == before and sorted(os.listdir(db.parent)) == ["sessions.db", "sessions.lock"]


@pytest.mark.parametrize("content", [None, b"", b"this is not sqlite" * 500])
def test_not_a_store_is_refused(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "x.db"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(NotAStoreError):
        salvage(path, tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "other.db")
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE t (a)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAStoreError):
        salvage(tmp_path / "other.db", tmp_path / "out.jsonl")


@pytest.mark.parametrize("damage", [zero_header, zero_page1])
def test_zeroed_header_or_page1_recovers_every_row_through_the_page_reader(store, tmp_path: Path, damage) -> None:
    db, rows = store
    damage(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl")
    lines = _lines(tmp_path / "out.jsonl")
    assert report.method == "page-reader" and report.exit_code == 1
    assert _winners(lines) == _originals(rows)
    assert all(r["verified"] for r in lines)
    assert {r["source"] for r in lines} <= {"btree", "unallocated"}
    assert report.damaged_pages["db_header_damaged"] == [1]
    # page 1 holds the schema: without it every table's rows are found by shape
    assert report.damage.get("schema_table_missing", 0) == (6 if damage is zero_page1 else 0)


def _flip_inside_data(db: Path, row: Original) -> None:
    """Flip one bit inside the "content" string of ``row``'s stored data (still valid JSON)."""
    raw = bytearray(db.read_bytes())
    assert raw.count(row.data) == 1
    at = raw.index(row.data) + row.data.index(b'"content":"') + 11
    raw[at] ^= 0x01
    db.write_bytes(bytes(raw))


def test_flipped_bit_inside_json_is_exported_unverified_and_exits_1(store, tmp_path: Path) -> None:
    db, rows = store
    target = next(r for r in rows if r.table == "messages" and len(r.data) < 1000)
    _flip_inside_data(db, target)
    report = salvage(db, tmp_path / "out.jsonl")
    lines = _lines(tmp_path / "out.jsonl")
    bad = [r for r in lines if not r["verified"]]
    assert len(bad) == 1 and bad[0]["table"] == "messages"
    assert report.exit_code == 1 and report.tables["messages"].unverified == 1
    assert {(r["table"], tuple(r["key"]), r["data"].encode()) for r in lines if r["verified"]} <= _originals(rows)


def test_rebuild_writes_a_store_with_every_verified_row_byte_identical(store, tmp_path: Path) -> None:
    db, rows = store
    zero_header(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.unplaced_total == 0 and sum(report.rebuilt.values()) == len(rows)
    assert set(read_rows(tmp_path / "new.db")) == set(rows)
    assert (tmp_path / "new.db").stat().st_mode & 0o777 == 0o600
    assert check(tmp_path / "new.db").findings == []
    reopened = SqliteStorage(tmp_path / "new.db")
    try:
        assert asyncio.run(reopened.list_history("chat-0"))  # the runtime reads it, checksums and all
    finally:
        reopened.close_sync()


def test_rebuild_leaves_out_unverified_rows_and_lists_them(store, tmp_path: Path) -> None:
    db, rows = store
    target = next(r for r in rows if r.table == "history" and len(r.data) < 1000)
    _flip_inside_data(db, target)
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.unplaced_total == 1 and report.unplaced[0].table == "history"
    assert report.unplaced[0].reason == "no copy passes its checksum"
    assert set(read_rows(tmp_path / "new.db")) < set(rows)


def test_rebuild_target_with_held_lease_is_refused(store, tmp_path: Path) -> None:
    db, _ = store
    with WriteLease(tmp_path / "new.db"):
        with pytest.raises(StoreAlreadyOwnedError):
            salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


def test_uncommitted_wal_rows_are_reported_never_mixed_in(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows, owner = build_store(src / "s.db", seed=5, keep_open=True)
    try:
        conn = owner.conn
        conn.execute("PRAGMA cache_size = 1")
        conn.execute("BEGIN IMMEDIATE")
        data = json.dumps({"id": "ghost", "chatId": "chat-0", "role": "user", "content": "z" * 3000,
                           "createdAt": "2026-01-01T00:00:00.000000Z"}, separators=(",", ":"))
        for i in range(60):
            conn.execute("INSERT INTO messages (id, chat_id, created_at, data, crc) VALUES (?,?,?,?,?)",
                         (f"ghost-{i}", "chat-0", "2026-01-01T00:00:00.000000Z", data, 0))
        copy_store(src / "s.db", tmp_path / "c.db")
        conn.execute("ROLLBACK")
    finally:
        owner.close_sync()
    report = salvage(tmp_path / "c.db", tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    lines = _lines(tmp_path / "out.jsonl")
    ghosts = [r for r in lines if str(r["key"][0]).startswith("ghost")]
    assert ghosts and all(not r["committed"] and r["source"] == "wal" for r in ghosts)
    assert _winners(lines) == _originals(rows)
    assert not any(str(r.key[0]).startswith("ghost") for r in read_rows(tmp_path / "new.db"))
    assert report.wal_frames["uncommitted"] > 0


def test_progress_callback_is_called(store, tmp_path: Path) -> None:
    db, _ = store
    phases: list[str] = []
    salvage(db, tmp_path / "out.jsonl", progress=lambda phase, done, total: phases.append(phase))
    assert "read" in phases and "export" in phases


# --- the CLI: parse, one call, render, exit code -----------------------------------------
from click.testing import CliRunner  # noqa: E402

from steerable_maint.cli import main  # noqa: E402


def test_cli_healthy_store_exits_0_with_summary_on_stderr(store, tmp_path: Path) -> None:
    db, rows = store
    result = CliRunner().invoke(main, ["salvage", str(db), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.stderr
    assert "sqlite" in result.stderr and result.stdout == ""
    assert len(_lines(tmp_path / "o.jsonl")) == len(rows)


def test_cli_json_twin_prints_exactly_the_report(store, tmp_path: Path) -> None:
    db, rows = store
    result = CliRunner().invoke(main, ["salvage", str(db), "--out", str(tmp_path / "o.jsonl"), "--json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["job"] == "salvage" and report["rows_written"] == len(rows) and report["findings"] == []


def test_cli_damaged_store_exits_1_and_json_names_the_damage(store, tmp_path: Path) -> None:
    db, _ = store
    zero_page1(db, random.Random(0))
    result = CliRunner().invoke(main, ["salvage", str(db), "--out", str(tmp_path / "o.jsonl"), "--json"])
    assert result.exit_code == 1
    codes = {f["code"] for f in json.loads(result.stdout)["findings"]}
    assert "salvage-db-header-damaged" in codes


def test_cli_existing_output_exits_3_with_error_and_hint(store, tmp_path: Path) -> None:
    db, _ = store
    (tmp_path / "o.jsonl").write_text("x")
    result = CliRunner().invoke(main, ["salvage", str(db), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: ") and "Hint: " in result.stderr and "Traceback" not in result.stderr


def test_cli_missing_out_is_a_usage_error(store) -> None:
    db, _ = store
    assert CliRunner().invoke(main, ["salvage", str(db)]).exit_code == 2


def _edit(db: Path, sql: str, params: tuple = ()) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql, params)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damaged", [False, True])
def test_indexed_column_disagreeing_with_data_is_verified_but_not_valid(store, tmp_path: Path, damaged: bool) -> None:
    db, rows = store
    _edit(db, "UPDATE messages SET chat_id = 'elsewhere' WHERE id = 'm-0-0'")
    _edit(db, "UPDATE sessions SET is_active = 1 - is_active WHERE session_id = 's-0'")
    if damaged:
        zero_header(db, random.Random(0))  # the same rows through the page reader
    salvage(db, tmp_path / "out.jsonl")
    lines = {(r["table"], tuple(r["key"])): r for r in _lines(tmp_path / "out.jsonl")}
    for key in (("messages", ("m-0-0",)), ("sessions", ("s-0",))):
        assert lines[key]["verified"] and not lines[key]["valid"]
    assert sum(not r["valid"] for r in lines.values()) == 2


def test_v1_entries_and_newer_entries_are_judged_by_the_record_version(store, tmp_path: Path) -> None:
    db, _ = store
    v1 = json.dumps({"type": "item", "seq": 900, "at": "2026-01-01T00:00:00.000000Z",
                     "message": {"role": "user", "content": "old"}}, separators=(",", ":"))
    v3 = json.dumps({"v": 3, "type": "item", "seq": 901, "at": "2026-01-01T00:00:00.000000Z",
                     "message": {"role": "user", "content": "new"}}, separators=(",", ":"))
    from steerable_agent_runtime.storage.checksum import row_crc
    for seq, v, data in ((900, 1, v1), (901, 3, v3)):
        _edit(db, "INSERT INTO history VALUES (?,?,?,?,?,?,?)",
              ("chat-0", seq, v, "item", "2026-01-01T00:00:00.000000Z", data, row_crc("history", ("chat-0", seq), data)))
    salvage(db, tmp_path / "out.jsonl")
    lines = {tuple(r["key"]): r for r in _lines(tmp_path / "out.jsonl") if r["table"] == "history"}
    assert lines[("chat-0", 900)]["valid"] and lines[("chat-0", 900)]["verified"]
    assert not lines[("chat-0", 901)]["valid"] and lines[("chat-0", 901)]["verified"]


def test_zero_byte_database_with_its_wal_recovers_every_committed_row(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows, owner = build_store(src / "s.db", seed=3, keep_open=True)
    try:
        copy_store(src / "s.db", tmp_path / "c.db")
    finally:
        owner.close_sync()
    (tmp_path / "c.db").write_bytes(b"")  # SQLite itself would delete the -wal on open
    wal_before = Path(f"{tmp_path}/c.db-wal").read_bytes()
    report = salvage(tmp_path / "c.db", tmp_path / "out.jsonl")
    assert report.method == "page-reader" and report.page_size_source == "wal"
    assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)
    assert Path(f"{tmp_path}/c.db-wal").read_bytes() == wal_before


def test_torn_uncommitted_wal_tail_is_not_damage(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    rows, owner = build_store(src / "s.db", seed=5, keep_open=True)
    try:
        conn = owner.conn
        conn.execute("PRAGMA cache_size = 1")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("UPDATE messages SET data = data || ' ' WHERE id = ?", [(r.key[0],) for r in rows
                                                                                  if r.table == "messages"])
        conn.executemany("INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?,?,?,?,?,?,?)",
                         [("torn", i, 2, "item", "x", "y" * 2000, 0) for i in range(40)])
        copy_store(src / "s.db", tmp_path / "c.db")
        conn.execute("ROLLBACK")
    finally:
        owner.close_sync()
    wal = Path(f"{tmp_path}/c.db-wal")
    raw = bytearray(wal.read_bytes())
    raw[-4096 - 24 + 16] ^= 0xFF  # the last (uncommitted) frame's checksum: a torn write
    wal.write_bytes(bytes(raw))
    report = salvage(tmp_path / "c.db", tmp_path / "out.jsonl")
    assert report.damage.get("wal_torn_tail") == 1 and report.exit_code == 0
    assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)


def test_parallel_export_writes_the_same_bytes_as_one_process(store, tmp_path: Path, monkeypatch) -> None:
    from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel

    db, rows = store
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=10**9, chunk_rows=2_048))
    one = salvage(db, tmp_path / "one.jsonl")
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=10, chunk_rows=7))  # many chunks: more than the in-flight window
    assert salvage_parallel.worker_count(len(rows)) > 1 or (os.cpu_count() or 1) == 1
    many = salvage(db, tmp_path / "many.jsonl")
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "many.jsonl").read_bytes()
    assert one.model_dump() | {"out": ""} == many.model_dump() | {"out": ""}


def test_a_failing_export_worker_stops_the_others_and_salvage_falls_back(store, tmp_path: Path, monkeypatch) -> None:
    from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel

    db, rows = store
    real = salvage_parallel.write_live

    def failing(conn, table, schema, fh, tally, progress, rowids=None, **kwargs):
        if table == "history" and rowids and rowids[0] > 20:
            raise sqlite3.DatabaseError("database disk image is malformed")  # as a damaged page would
        real(conn, table, schema, fh, tally, progress, rowids, **kwargs)

    monkeypatch.setattr(salvage_parallel, "write_live", failing)  # forked workers inherit it
    monkeypatch.setattr(salvage_parallel, "worker_count", lambda _rows, _chunking=None: 2)
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=50_000, chunk_rows=7))
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.method == "page-reader" and report.damage["sqlite_read_failed"] == 1
    assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "src"]


def test_a_failing_worker_behind_a_slow_one_is_still_a_read_error(store, tmp_path: Path, monkeypatch) -> None:
    """The parent collects chunks in order: the slow first chunk's worker only learns that a
    later one failed, and the later chunk's own read error must be what salvage sees."""
    import time

    from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel

    db, rows = store
    real = salvage_parallel.write_live

    def slow_then_failing(conn, table, schema, fh, tally, progress, rowids=None, **kwargs):
        if table == "history" and rowids:
            if rowids[0] == 1:
                time.sleep(0.5)
            elif rowids[0] > 20:
                raise sqlite3.DatabaseError("database disk image is malformed")
        real(conn, table, schema, fh, tally, progress, rowids, **kwargs)

    monkeypatch.setattr(salvage_parallel, "write_live", slow_then_failing)
    monkeypatch.setattr(salvage_parallel, "worker_count", lambda _rows, _chunking=None: 4)
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=50_000, chunk_rows=7))
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.method == "page-reader" and report.damage["sqlite_read_failed"] == 1
    assert _winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)


def test_an_export_worker_that_dies_is_a_one_line_error_and_nothing_is_published(store, tmp_path: Path,
                                                                                monkeypatch) -> None:
    from steerable_agent_runtime.errors import SteerableError
    from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel

    db, _ = store
    real = salvage_parallel.write_live

    def dying(conn, table, schema, fh, tally, progress, rowids=None, **kwargs):
        if table == "history" and rowids and rowids[0] > 20:
            os._exit(1)  # as the OOM killer would
        real(conn, table, schema, fh, tally, progress, rowids, **kwargs)

    monkeypatch.setattr(salvage_parallel, "write_live", dying)
    monkeypatch.setattr(salvage_parallel, "worker_count", lambda _rows, _chunking=None: 2)
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=50_000, chunk_rows=7))
    before = _digest(db.parent)
    with pytest.raises(SteerableError, match="worker process died") as err:
        salvage(db, tmp_path / "out.jsonl")
    assert err.value.exit_code == 3 and err.value.hint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"] and _digest(db.parent) == before


def test_sqlite_failing_after_a_passed_quick_check_falls_back_to_the_page_reader(tmp_path: Path) -> None:
    from tests.damage import flip_bytes

    # Found by the property test: these flips pass quick_check, then a full read fails.
    rows, _ = build_store(tmp_path / "live.db", seed=267, chats=1, entries=7)
    db = copy_store(tmp_path / "live.db", tmp_path / "c.db")
    flip_bytes(db, random.Random(267))
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.method == "page-reader" and report.damage["sqlite_read_failed"] == 1 and report.exit_code == 1
    assert report.path == str(db)
    verified = {(r["table"], r["data"].encode()) for r in _lines(tmp_path / "out.jsonl") if r["verified"]}
    assert verified and verified <= {(r.table, r.data) for r in rows}


def test_deleted_rows_on_freed_pages_are_exported_but_not_rebuilt(store, tmp_path: Path) -> None:
    db, rows = store
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("DELETE FROM history WHERE record_id != 'chat-0'")  # whole pages go free
    conn.commit()
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    deleted = {r.data for r in rows if r.table == "history" and r.key[0] != "chat-0"}
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    freed = [r for r in _lines(tmp_path / "out.jsonl") if r["source"] == "freelist" and r["verified"]]
    gone = {r["data"].encode() for r in freed if r["key"][0] != "chat-0"}
    assert report.method == "sqlite" and gone and gone <= deleted
    # a freed page may also hold an older copy of a live row: the live copy supersedes it
    assert all(r["superseded"] for r in freed if r["key"][0] == "chat-0")
    assert report.unplaced_total == len({tuple(r["key"]) for r in freed if r["key"][0] != "chat-0"})
    assert {u.reason for u in report.unplaced} == {"only on freed or superseded pages (a deleted row, or the live copy was lost)"}
    assert not any(r.key[0] != "chat-0" for r in read_rows(tmp_path / "new.db") if r.table == "history")


def test_rebuild_restores_a_corrupted_live_row_from_its_intact_older_copy(store, tmp_path: Path) -> None:
    from steerable_agent_runtime.sqlitefile.btree import read_schema, walk_tree
    from steerable_agent_runtime.sqlitefile.pages import SqliteFile

    db, rows = store
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("DELETE FROM history WHERE record_id != 'chat-0'")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    first = salvage(db, tmp_path / "first.jsonl")
    older = [r for r in _lines(tmp_path / "first.jsonl") if r["source"] == "freelist" and r["superseded"]]
    assert first.exit_code == 0 and older
    target = older[0]["data"].encode()
    with SqliteFile(db) as pages:
        root = next(e.rootpage for e in read_schema(pages) if e.name == "history")
        live_page = next(c.page for c in walk_tree(pages, root) if c.fields and c.fields[5][1][:200] == target[:200])
    raw = bytearray(db.read_bytes())
    at = raw.index(target[:200], (live_page - 1) * 4096) + 150  # inside the live copy's JSON text
    raw[at] ^= 0x01
    db.write_bytes(bytes(raw))
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.exit_code == 1 and report.tables["history"].unverified == 1
    restored = {r.key: r.data for r in read_rows(tmp_path / "new.db")}
    assert restored[("chat-0", older[0]["key"][1])] == target
    assert not [u for u in report.unplaced if u.key[0] == "chat-0"]  # only the deleted chats are left out


def test_fast_path_exports_what_the_page_reader_exports(store, tmp_path: Path, monkeypatch) -> None:
    """The SQLite fast path renders live rows in SQL: its lines must parse to what the
    page reader's Python rendering gives (page numbers aside), for awkward text too: control
    characters, U+2028, non-ASCII, and a verified row whose data is not UTF-8."""
    from steerable_agent_runtime.maintenance.salvage import job as salvage_module
    from steerable_agent_runtime.storage.checksum import row_crc

    db, _ = store
    odd = json.dumps({"v": 2, "type": "item", "seq": 900, "at": "2026-01-01T00:00:00.000000Z",
                      "message": {"role": "user", "content": "tab\there\nnl \x01 \u2028 \x7f é ✓ \"q\" \\"}},
                     ensure_ascii=False, separators=(",", ":"))
    not_utf8 = b'{"v":2,"type":"item","seq":901,"at":"2026-01-01T00:00:00.000000Z","message":{"role":"user","content":"\xff\xfe"}}'
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO history VALUES (?,?,?,?,?,?,?)",
                 ("chat-0", 900, 2, "item", "2026-01-01T00:00:00.000000Z", odd, row_crc("history", ("chat-0", 900), odd)))
    conn.execute("INSERT INTO history VALUES (?,?,?,?,?,CAST(? AS TEXT),?)",
                 ("chat-0", 901, 2, "item", "2026-01-01T00:00:00.000000Z", not_utf8,
                  row_crc("history", ("chat-0", 901), not_utf8)))
    conn.commit()
    conn.close()
    fast = salvage(db, tmp_path / "fast.jsonl")
    monkeypatch.setattr(salvage_module, "_sqlite_check", lambda pages, spool, snapshot: None)
    slow = salvage(db, tmp_path / "slow.jsonl")
    assert (fast.method, slow.method) == ("sqlite", "page-reader")

    def rows(path: Path) -> list[dict]:
        return sorted((r | {"page": None} for r in _lines(path)), key=lambda r: json.dumps(r, sort_keys=True))

    assert rows(tmp_path / "fast.jsonl") == rows(tmp_path / "slow.jsonl")
    by_key = {tuple(r["key"]): r for r in _lines(tmp_path / "fast.jsonl") if r["table"] == "history"}
    assert json.loads(by_key[("chat-0", 900)]["data"]) == json.loads(odd) and by_key[("chat-0", 900)]["valid"]
    assert by_key[("chat-0", 901)]["verified"] and not by_key[("chat-0", 901)]["valid"]
    assert "\ufffd" in by_key[("chat-0", 901)]["data"]
    assert fast.tables == slow.tables


def test_live_rendering_is_byte_identical_to_the_careful_rendering(store, tmp_path: Path) -> None:
    """write_live (the fast path's renderer) against write_copies (the careful one) over the
    same rows, including rows write_live hands to write_copies: JSON with whitespace between
    tokens, data that is not JSON, not UTF-8, or a BLOB, and a key that is not UTF-8."""
    from steerable_agent_runtime.maintenance.salvage.output import write_copies, write_live
    from steerable_agent_runtime.maintenance.salvage.spool import Copy, live_copies_sql
    from steerable_agent_runtime.storage.checksum import register, row_crc

    db, _ = store
    at = "2026-01-01T00:00:00.000000Z"
    odd = [
        ("chat-0", 900, '{"v":2,"type":"item","seq":900,"at":"%s","message":{"role":"user","content":"q\\"\\\\ \\n é \\u2028"}}' % at),
        ("chat-0", 901, '{\n  "v": 2, "type": "item", "seq": 901, "at": "%s",\t"message": {"role": "user", "content": "x"}\r}' % at),
        ("chat-0", 902, "not json at all"),
        ("chat-0", 903, b'{"v":2,"type":"item","seq":903,"at":"x","message":{"role":"user","content":"\xff"}}'),
        (b"chat-\xff", 904, '{"v":2,"type":"item","seq":904,"at":"%s","message":{"role":"user","content":"k"}}' % at),
        ("chat-0", 906, '{"v":2,"type":"item","seq":906,"at":"%s","message":{"role":"assistant","content":"",'
                        '"toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}}' % at),
        ("chat-0", 907, '{"v":2,"type":"item","seq":907,"at":"%s","message":{"role":"tool","content":"{}",'
                        '"toolCallId":"c1","name":"f"}}' % at),
        ("chat-0", 908, '{"v":2,"type":"item","seq":908,"at":"%s","message":{"role":"tool","content":"x",'
                        '"toolCallId":7}}' % at),  # not valid: caught by the model, not the fast test
    ]
    conn = sqlite3.connect(db)
    for record_id, seq, data in odd:
        raw = data if isinstance(data, bytes) else data.encode()
        conn.execute("INSERT INTO history VALUES (CAST(? AS TEXT),?,2,'item',?,CAST(? AS TEXT),?)",
                     (record_id, seq, at, raw, row_crc("history", (record_id, seq), raw)))
    conn.execute("INSERT INTO history VALUES ('chat-1', 905, 2, 'item', ?, ?, 0)", (at, b'{"v":2}'))  # a BLOB
    # An indexed text column that is not UTF-8 (the fast loop's C decoding stops there and the
    # rest of the table is read again with the lenient factory), between ordinary rows.
    text = '{"v":2,"type":"item","seq":909,"at":"%s","message":{"role":"user","content":"t"}}' % at
    conn.execute("INSERT INTO history VALUES ('chat-0', 909, 2, CAST(? AS TEXT), ?, ?, ?)",
                 (b"it\xffem", at, text, row_crc("history", ("chat-0", 909), text)))
    for seq in (910, 911):
        text = '{"v":2,"type":"item","seq":%d,"at":"%s","message":{"role":"user","content":"after"}}' % (seq, at)
        conn.execute("INSERT INTO history VALUES ('chat-0', ?, 2, 'item', ?, ?, ?)",
                     (seq, at, text, row_crc("history", ("chat-0", seq), text)))
    conn.commit()
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    register(conn)
    last = conn.execute("SELECT max(rowid) FROM history").fetchone()[0]
    for table in ("history", "messages", "sessions"):
        fast, careful = tmp_path / f"fast-{table}", tmp_path / f"careful-{table}"
        fast_tally: dict = {}
        careful_tally: dict = {}
        with open(fast, "wb") as fh:
            write_live(conn, table, "main", fh, fast_tally, lambda _n: None)
        with open(careful, "wb") as fh:
            write_copies(map(Copy._make, conn.execute(live_copies_sql(table, "main"))), fh, careful_tally, lambda _n: None)
        assert fast.read_bytes() == careful.read_bytes() and fast_tally == careful_tally
        assert conn.text_factory is not str  # the connection's own factory is back
    with open(tmp_path / "part", "wb") as fh:  # a rowid range that starts after the damaged text
        write_live(conn, "history", "main", fh, {}, lambda _n: None, (last - 1, last))
    history_rows = conn.execute("SELECT count(*) FROM history").fetchone()[0]
    conn.close()
    lines = (tmp_path / "fast-history").read_bytes().split(b"\n")[:-1]
    assert len(lines) == history_rows and b'"key":["chat-\xef\xbf\xbd",904]' in b"".join(lines)
    assert (tmp_path / "part").read_bytes() == b"".join(line + b"\n" for line in lines[-2:])
    by_seq = {json.loads(line)["key"][1]: json.loads(line) for line in lines}
    assert [by_seq[seq]["valid"] for seq in (906, 907, 908, 909, 910)] == [True, True, False, False, True]
    assert by_seq[909]["columns"]["type"] == "it\ufffdem" and by_seq[909]["verified"]


@pytest.mark.parametrize("role", [["user"], {"name": "user"}])
def test_a_message_role_that_is_a_list_or_an_object_is_exported_invalid_not_a_crash(store, tmp_path: Path,
                                                                                    role) -> None:
    """A role that is no text (unhashable: the fast validity tests used to raise TypeError on
    it, and salvage crashed) is a verified, invalid row like any other the models refuse."""
    from steerable_agent_runtime.storage.checksum import row_crc

    db, _ = store
    at = "2026-01-01T00:00:00.000000Z"
    entry = json.dumps({"v": 2, "type": "item", "seq": 900, "at": at, "message": {"role": role, "content": "x"}},
                       separators=(",", ":"))
    message = json.dumps({"id": "m-odd", "chatId": "chat-0", "role": role, "content": "x", "createdAt": at},
                         separators=(",", ":"))
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO history VALUES ('chat-0', 900, 2, 'item', ?, ?, ?)",
                 (at, entry, row_crc("history", ("chat-0", 900), entry)))
    conn.execute("INSERT INTO messages VALUES ('m-odd', 'chat-0', ?, ?, ?)",
                 (at, message, row_crc("messages", ("m-odd",), message)))
    conn.commit()
    conn.close()
    report = salvage(db, tmp_path / "out.jsonl")
    odd = [r for r in _lines(tmp_path / "out.jsonl") if r["key"] in (["chat-0", 900], ["m-odd"])]
    assert report.method == "sqlite" and len(odd) == 2
    assert all(r["verified"] and not r["valid"] for r in odd)
    assert report.tables["history"].invalid == 1 and report.tables["messages"].invalid == 1
