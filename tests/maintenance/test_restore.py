"""restore: one chat moves back from the archive, whole and byte-identical; re-runs are no-ops."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.maintenance.archive import archive, restore
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_maint.cli import main
from tests.maintenance.storemaker import (
    NEW, NOW, ChatSpec, assert_healthy, assert_moved_exactly_once, file_bytes, make_store, rows_of,
)


@pytest.fixture
def pair(tmp_path):
    """A store with chat 3 (recent) left, and an archive holding chats 0, 1, 2. Returns (store, archive, original)."""
    store = make_store(tmp_path / "sessions.db", [ChatSpec(0), ChatSpec(1, sessions=2), ChatSpec(2), ChatSpec(3, age=NEW)])
    original = rows_of(store)
    archive(store, to=tmp_path / "archive.db", older_than=timedelta(days=30), now=NOW)
    return store, tmp_path / "archive.db", original


def _chat_rows(rows: dict, index: int) -> dict:
    def belongs(key):
        table, k = key
        return (k[0] == f"chat-{index:04d}") if table == "history" else k[0].split("-")[1] == str(index)
    return {k: v for k, v in rows.items() if belongs(k)}


def test_restore_moves_the_chat_back_byte_identical(pair):
    store, arc, original = pair
    report = restore(arc, to=store, chat_id="chat-0001")
    assert report.restored and report.rows_moved.sessions == 2 and report.rows_moved.total == 2 + 3 + 3 + 2 + 4 + 4
    assert _chat_rows(rows_of(store), 1) == _chat_rows(original, 1)
    assert _chat_rows(rows_of(arc), 1) == {}
    assert_moved_exactly_once(original, store, arc)
    assert_healthy(store)
    assert_healthy(arc)


def test_restored_chat_is_readable_and_searchable_through_sqlitestorage(pair):
    store, arc, _ = pair
    restore(arc, to=store, chat_id="chat-0002")

    async def read():
        s = SqliteStorage(store)
        try:
            return await s.search_sessions("widget2"), await s.list_history("chat-0002")
        finally:
            await s.close()

    found, history = asyncio.run(read())
    assert [x.session_id for x in found] == ["s-2-0"] and len(history) == 3


def test_restore_rerun_after_it_finished_changes_nothing_and_says_so(pair):
    store, arc, original = pair
    restore(arc, to=store, chat_id="chat-0000")
    before = file_bytes(store), file_bytes(arc)
    again = restore(arc, to=store, chat_id="chat-0000")
    assert not again.restored and [f.code for f in again.findings] == ["restore-already-restored"]
    assert again.exit_code == 0 and (file_bytes(store), file_bytes(arc)) == before
    assert_moved_exactly_once(original, store, arc)


def test_restore_conflict_moves_nothing_and_overwrites_nothing(pair):
    store, arc, _ = pair
    conn = sqlite3.connect(store)  # the app started chat 0 again: a new record 1..n under the same id
    conn.execute("INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES ('chat-0000', 1, 2, 'item',"
                 " '2026-01-01T00:00:00.000000Z', '{}', 0)")
    conn.commit()
    conn.close()
    before = rows_of(store), rows_of(arc)
    report = restore(arc, to=store, chat_id="chat-0000")
    assert report.exit_code == 1 and not report.restored
    assert [(f.code, f.table) for f in report.findings] == [("archive-conflict", "history")]
    assert (rows_of(store), rows_of(arc)) == before


# CLI -------------------------------------------------------------------------------------

def test_cli_restore_human_output_says_restored(pair):
    store, arc, _ = pair
    result = CliRunner().invoke(main, ["restore", str(arc), "--to", str(store), "--chat", "chat-0002"])
    assert result.exit_code == 0, result.output
    assert "(restored)" in result.stdout and result.stderr == ""


def test_cli_restore_json_prints_exactly_the_report(pair):
    store, arc, _ = pair
    result = CliRunner().invoke(main, ["restore", str(arc), "--to", str(store), "--chat", "chat-0002", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["job"], report["chat_id"], report["restored"]) == ("restore", "chat-0002", True)
    assert report["rows_moved"]["messages"] == 3


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_restore_unknown_chat_is_a_usage_error_and_changes_nothing(pair, as_json):
    store, arc, _ = pair
    before = file_bytes(store), file_bytes(arc)
    result = CliRunner().invoke(main, ["restore", str(arc), "--to", str(store), "--chat", "chat-9999"]
                                + (["--json"] if as_json else []))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert (file_bytes(store), file_bytes(arc)) == before


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_restore_into_a_missing_store_exits_3_and_creates_nothing(pair, tmp_path, as_json):
    _, arc, _ = pair
    before = file_bytes(arc)
    result = CliRunner().invoke(main, ["restore", str(arc), "--to", str(tmp_path / "typo.db"), "--chat", "chat-0000"]
                                + (["--json"] if as_json else []))
    assert result.exit_code == 3 and "no such file" in result.stderr
    assert not (tmp_path / "typo.db").exists() and file_bytes(arc) == before
