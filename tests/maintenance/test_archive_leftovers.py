"""A run killed between "commit the archive" and "delete from the store", then the app touched
the chat: the next run keeps the chat in the store and removes only the archive's
byte-identical copies; anything that differs, or that the store does not hold, stays."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta

import pytest

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.models import ChatMessage
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests.maintenance.storemaker import NEW, NOW, ChatSpec, assert_healthy, assert_moved_exactly_once, make_store, rows_of

CUTOFF = timedelta(days=30)
RECENT = (NOW - NEW).isoformat()


@pytest.fixture
def store(tmp_path):
    return make_store(tmp_path / "sessions.db", [ChatSpec(0), ChatSpec(1), ChatSpec(2, sessions=2), ChatSpec(3, age=NEW)])


def _interrupted_copy(store, target, chat: str) -> None:
    """Leave ``target`` as a killed run would: every row of ``chat`` copied, none deleted."""
    archive(store, to=target, older_than=CUTOFF, now=NOW - timedelta(days=3650))  # creates it empty
    conn = sqlite3.connect(target)
    conn.execute("ATTACH DATABASE ? AS src", (str(store),))
    traces = f"SELECT trace_id FROM src.traces WHERE chat_id = '{chat}'"
    for table, where in (("sessions", f"chat_id = '{chat}'"), ("messages", f"chat_id = '{chat}'"),
                         ("history", f"record_id = '{chat}'"), ("traces", f"chat_id = '{chat}'"),
                         ("spans", f"trace_id IN ({traces})"), ("events", f"trace_id IN ({traces})")):
        conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} WHERE {where}")
    conn.commit()
    conn.close()


def _app(store, action) -> None:
    async def run():
        s = SqliteStorage(store)
        try:
            await action(s)
        finally:
            await s.close()
    asyncio.run(run())


def _chat_rows(rows: dict, index: int) -> dict:
    return {k: v for k, v in rows.items()
            if (k[1][0] == f"chat-{index:04d}" if k[0] == "history" else k[1][0].split("-")[1] == str(index))}


def test_archive_removes_identical_leftover_copies_of_a_chat_that_stays(store, tmp_path):
    target = tmp_path / "archive.db"
    _interrupted_copy(store, target, "chat-0002")
    _app(store, lambda s: s.append_message(ChatMessage(id="m-2-new", chat_id="chat-0002", role="user",
                                                       content="back again", created_at=RECENT)))
    current = rows_of(store)
    report = archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert report.staying_chats_in_archive == 1
    assert report.leftover_copies_removed.model_dump() == {"sessions": 2, "messages": 3, "history": 3,
                                                           "traces": 2, "spans": 4, "events": 4}
    assert _chat_rows(rows_of(target), 2) == {}
    assert _chat_rows(rows_of(store), 2) == _chat_rows(current, 2)
    assert_moved_exactly_once(current, store, target)
    assert_healthy(target)


def test_archive_keeps_an_archive_row_that_differs_from_the_store(store, tmp_path):
    target = tmp_path / "archive.db"
    _interrupted_copy(store, target, "chat-0002")
    stale = _chat_rows(rows_of(target), 2)[("sessions", ("s-2-1",))]

    async def touch(s):
        session = await s.get_session("s-2-1")
        await s.upsert_session(session.model_copy(update={"updated_at": RECENT}))

    _app(store, touch)
    archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert _chat_rows(rows_of(target), 2) == {("sessions", ("s-2-1",)): stale}


def test_archive_never_removes_archived_rows_the_store_does_not_hold(store, tmp_path):
    target = tmp_path / "archive.db"
    archive(store, to=target, older_than=CUTOFF, now=NOW)  # chats 0, 1, 2 archived for real
    archived = _chat_rows(rows_of(target), 2)
    _app(store, lambda s: s.append_message(ChatMessage(id="m-2-new", chat_id="chat-0002", role="user",
                                                       content="the user came back", created_at=RECENT)))
    report = archive(store, to=target, older_than=CUTOFF, now=NOW)
    assert report.staying_chats_in_archive == 1 and report.leftover_copies_removed.total == 0
    assert _chat_rows(rows_of(target), 2) == archived


def test_cli_archive_human_output_mentions_removed_leftovers(store, tmp_path):
    from click.testing import CliRunner

    from steerable_maint.cli import main

    target = tmp_path / "archive.db"
    _interrupted_copy(store, target, "chat-0003")  # chat 3 is recent: it stays
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(target), "--older-than", "30d"])
    assert result.exit_code == 0, result.output
    assert "removed 17 rows from the archive" in result.stdout


def test_cli_archive_json_counts_removed_leftovers(store, tmp_path):
    import json

    from click.testing import CliRunner

    from steerable_maint.cli import main

    target = tmp_path / "archive.db"
    _interrupted_copy(store, target, "chat-0003")
    result = CliRunner().invoke(main, ["archive", str(store), "--to", str(target), "--older-than", "30d", "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["staying_chats_in_archive"] == 1
    assert report["leftover_copies_removed"]["messages"] == 3
