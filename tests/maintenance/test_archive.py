"""archive: which chats move, byte-identical and whole, into an archive that is a valid store."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
from datetime import timedelta

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.models import ChatMessage, HarnessTrace
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_maint.cli import main
from tests.maintenance.storemaker import (
    NEW, NOW, ChatSpec, assert_healthy, assert_moved_exactly_once, file_bytes, make_store, rows_of,
)

CUTOFF = timedelta(days=30)


def chats_in(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT chat_id FROM sessions UNION SELECT record_id FROM history")}
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path):
    """chat 0, 2: idle 200 days; chat 1: idle but a session is active; chat 3: touched yesterday."""
    chats = [ChatSpec(0), ChatSpec(1, active=True, sessions=2), ChatSpec(2, sessions=2), ChatSpec(3, age=NEW)]
    return make_store(tmp_path / "sessions.db", chats)


def test_archive_moves_idle_chats_whole_and_byte_identical(store, tmp_path):
    original = rows_of(store)
    report = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW)
    assert chats_in(tmp_path / "archive.db") == {"chat-0000", "chat-0002"}
    assert chats_in(store) == {"chat-0001", "chat-0003"}
    assert report.chats_moved == 2 and report.chats_skipped == {"active": 1, "recent": 1, "conflict": 0}
    assert report.rows_moved.model_dump() == {"sessions": 3, "messages": 6, "history": 6, "traces": 4,
                                              "spans": 8, "events": 8}
    assert_moved_exactly_once(original, store, tmp_path / "archive.db")
    assert_healthy(store)
    assert_healthy(tmp_path / "archive.db")


def test_archive_include_active_moves_chats_with_active_sessions(store, tmp_path):
    report = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW, include_active=True)
    assert chats_in(store) == {"chat-0003"}
    assert report.chats_skipped["active"] == 0 and report.chats_moved == 3


async def _touch(path, part: str) -> None:
    """Give chat 0 one recent thing of the kind ``part``; everything else of it stays old."""
    recent = (NOW - NEW).isoformat()
    store = SqliteStorage(path)
    try:
        if part == "session":
            old = await store.get_session("s-0-0")
            await store.upsert_session(old.model_copy(update={"updated_at": recent}))
        elif part == "message":
            await store.append_message(ChatMessage(id="m-new", chat_id="chat-0000", role="user", content="hi",
                                                   created_at=recent))
        elif part == "history":
            await store.append_history("chat-0000", [{"type": "item", "at": recent,
                                                      "message": {"role": "user", "content": "hi"}}])
        else:
            await store.upsert_trace(HarnessTrace(trace_id="t-new", session_id="s-0-0", chat_id="chat-0000",
                                                  user_id="user-0", started_at=recent))
    finally:
        await store.close()


@pytest.mark.parametrize("part", ["session", "message", "history", "trace"])
def test_archive_keeps_a_chat_when_any_part_of_it_is_newer_than_the_cutoff(store, tmp_path, part):
    asyncio.run(_touch(store, part))
    report = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW)
    assert "chat-0000" in chats_in(store) and "chat-0000" not in chats_in(tmp_path / "archive.db")
    assert report.chats_skipped["recent"] == 2 and report.chats_moved == 1


def test_archive_appends_to_the_same_archive_run_after_run(tmp_path):
    store = make_store(tmp_path / "sessions.db", [ChatSpec(0, age=timedelta(days=400)), ChatSpec(1), ChatSpec(2, age=NEW)])
    original = rows_of(store)
    first = archive(store, to=tmp_path / "archive.db", older_than=timedelta(days=300), now=NOW)
    second = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW)
    assert (first.archive_created, first.chats_moved) == (True, 1)
    assert (second.archive_created, second.chats_moved) == (False, 1)
    assert chats_in(tmp_path / "archive.db") == {"chat-0000", "chat-0001"}
    assert_moved_exactly_once(original, store, tmp_path / "archive.db")
    assert_healthy(tmp_path / "archive.db")


def test_archive_file_is_a_private_valid_store_that_sqlitestorage_reads_and_searches(store, tmp_path):
    target = tmp_path / "archive.db"
    archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600

    async def read():
        arc = SqliteStorage(target)
        try:
            return (await arc.list_messages("chat-0002"), await arc.list_history("chat-0002"),
                    await arc.search_sessions("widget2"), await arc.list_spans("t-2-1"))
        finally:
            await arc.close()

    messages, history, found, spans = asyncio.run(read())
    assert [m.id for m in messages] == ["m-2-0", "m-2-1", "m-2-2"]
    assert [e["seq"] for e in history] == [1, 2, 3]
    assert {s.session_id for s in found} == {"s-2-0", "s-2-1"}
    assert len(spans) == 2


def test_archive_dry_run_counts_the_same_rows_and_creates_nothing(store, tmp_path):
    before = file_bytes(store)
    dry = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW, dry_run=True)
    assert not (tmp_path / "archive.db").exists() and not (tmp_path / "archive.lock").exists()
    assert file_bytes(store) == before
    real = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW)
    assert dry.rows_moved == real.rows_moved and dry.chats_moved == real.chats_moved == 2
    assert dry.chats_skipped == real.chats_skipped


def test_archive_works_in_bounded_batches_of_chats(tmp_path):
    store = make_store(tmp_path / "sessions.db", [ChatSpec(i, messages=1, traces=1, spans=1) for i in range(10)])
    report = archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW, batch_size=3)
    assert report.chats_moved == 10 and report.batches == 4  # ceil(10 / 3) pages of at most 3 chats


def test_archive_rerun_finishes_a_move_whose_copy_was_already_committed(store, tmp_path):
    """The state a kill between "commit the archive" and "delete from the store" leaves behind."""
    original = rows_of(store)
    target = tmp_path / "archive.db"
    archive(store, to=target, older_than=CUTOFF, now=NOW - timedelta(days=365))  # creates an empty archive
    conn = sqlite3.connect(target)
    conn.execute("ATTACH DATABASE ? AS src", (str(store),))
    for table, where in (("sessions", "chat_id"), ("messages", "chat_id"), ("history", "record_id")):
        conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} WHERE {where} = 'chat-0002'")
    conn.commit()
    conn.close()
    report = archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert report.rows_already_in_archive.model_dump() == {"sessions": 2, "messages": 3, "history": 3,
                                                           "traces": 0, "spans": 0, "events": 0}
    assert report.chats_moved == 2 and not report.findings
    assert_moved_exactly_once(original, store, target)


def test_archive_conflicting_chat_stays_whole_and_nothing_is_overwritten(store, tmp_path):
    target = make_store(tmp_path / "archive.db", [ChatSpec(2, age=NEW, messages=1, traces=0)])
    archive_before, store_chat2 = rows_of(target), {k: v for k, v in rows_of(store).items() if "-2-" in str(k)}
    report = archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert report.exit_code == 1 and report.chats_moved == 1 and report.chats_skipped["conflict"] == 1
    [finding] = report.findings
    assert (finding.code, finding.record_id, finding.table) == ("archive-conflict", "chat-0002", "sessions")
    after = rows_of(target)
    assert {k: after[k] for k in archive_before} == archive_before
    assert not any(k[1][0] in ("m-2-1", "m-2-2") for k in after)  # nothing of chat 2 was half-copied
    assert {k: v for k, v in rows_of(store).items() if "-2-" in str(k)} == store_chat2


# CLI -------------------------------------------------------------------------------------

def test_cli_archive_human_output_lists_rows_moved_and_chats_kept(store, tmp_path):
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(tmp_path / "a.db"), "--older-than", "30d"])
    assert result.exit_code == 0, result.output
    assert "chats moved: 2" in result.stdout and "1 active, 1 recent" in result.stdout
    assert result.stderr == ""


def test_cli_archive_json_prints_exactly_the_report(store, tmp_path):
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(tmp_path / "a.db"), "--older-than", "30d",
                                       "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["job"] == "archive" and report["chats_moved"] == 2 and report["rows_moved"]["messages"] == 6


def test_cli_archive_conflict_exits_1_and_json_names_it(store, tmp_path):
    make_store(tmp_path / "a.db", [ChatSpec(2, age=NEW)])
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(tmp_path / "a.db"), "--older-than", "30d",
                                       "--json"])
    assert result.exit_code == 1
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["archive-conflict"]


def test_cli_archive_conflict_human_shows_finding_and_hint(store, tmp_path):
    make_store(tmp_path / "a.db", [ChatSpec(2, age=NEW)])
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(tmp_path / "a.db"), "--older-than", "30d"])
    assert result.exit_code == 1 and "archive-conflict" in result.stdout and "hint:" in result.stdout


def _foreign_sqlite(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("kind", ["text", "sqlite", "empty"])
def test_cli_archive_target_that_is_not_a_store_exits_3_and_changes_nothing(store, tmp_path, kind, as_json):
    target = tmp_path / "not-a-store.db"
    if kind == "text":
        target.write_text("shopping list\n")
    elif kind == "sqlite":
        _foreign_sqlite(target)
    else:
        target.write_bytes(b"")
    before_target, before_store = target.read_bytes(), file_bytes(store)
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(target), "--older-than", "30d"]
                                + (["--json"] if as_json else []))
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert "Traceback" not in result.output and result.stdout == ""
    assert target.read_bytes() == before_target and file_bytes(store) == before_store
    leftovers = {p.name for p in tmp_path.iterdir()} - {target.name, "not-a-store.lock", "sessions.db", "sessions.lock"}
    assert leftovers == set()  # no -wal, -shm or -journal: SQLite never wrote beside the target


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_archive_bad_duration_exits_2_and_creates_nothing(store, tmp_path, as_json):
    before = file_bytes(store)
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(tmp_path / "a.db"), "--older-than", "ninety"]
                                + (["--json"] if as_json else []))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["Error", "Hint"] and "Traceback" not in result.output
    assert not (tmp_path / "a.db").exists() and file_bytes(store) == before


def test_cli_archive_into_the_store_itself_is_a_usage_error(store):
    before = file_bytes(store)
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(store), "--older-than", "30d"])
    assert result.exit_code == 2 and result.stderr.startswith("Error: ") and file_bytes(store) == before


def test_cli_archive_target_with_newer_schema_exits_3_untouched(store, tmp_path):
    target = make_store(tmp_path / "a.db", [])
    conn = sqlite3.connect(target)
    conn.execute("PRAGMA user_version = 5")
    conn.close()
    before = file_bytes(target), file_bytes(store)
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(target), "--older-than", "30d"])
    assert result.exit_code == 3 and "newer build" in result.stderr
    assert (file_bytes(target), file_bytes(store)) == before


def test_archived_chats_leave_the_stores_search_index(store, tmp_path):
    archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW)

    async def search(path, words):
        s = SqliteStorage(path)
        try:
            return {x.chat_id for x in await s.search_sessions(words)}
        finally:
            await s.close()

    assert asyncio.run(search(store, "widget2")) == set()
    assert asyncio.run(search(store, "widget3")) == {"chat-0003"}
    assert asyncio.run(search(tmp_path / "archive.db", "widget2")) == {"chat-0002"}


def test_archive_reports_progress_per_page(tmp_path):
    store = make_store(tmp_path / "sessions.db", [ChatSpec(i, messages=1, traces=0) for i in range(5)])
    calls = []
    archive(store, to=tmp_path / "archive.db", older_than=CUTOFF, now=NOW, batch_size=2,
            progress=lambda phase, done, total: calls.append((phase, done, total)))
    assert calls == [("archive chats", 2, None), ("archive chats", 4, None), ("archive chats", 5, None)]
