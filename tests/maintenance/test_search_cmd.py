"""steerable-maint search: read-only, ranked exactly like SqliteStorage.search_sessions."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from steerable_agent_runtime import AgentSession, ChatMessage, SqliteStorage
from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.maintenance.search import search
from steerable_maint.cli import main

from .conftest import FIXTURES, snapshot

QUERIES = ["apple", "apple OR banana", '"apple pie"', "app*", "banana", "cherry", "pie NOT banana"]
STAMP = "2026-03-01T00:00:{:02d}Z"


def run(*args: object):
    return CliRunner().invoke(main, ["search", *map(str, args)])


async def _write(db) -> None:
    store = SqliteStorage(db)
    texts = {"chat-1": ["apple pie", "apple apple apple", "more apple"], "chat-2": ["one apple", "banana split"],
             "chat-3": ["banana bread", "pie crust"], "chat-4": ["nothing here"]}
    n = 0
    for chat, lines in texts.items():
        for k in range(2 if chat == "chat-2" else 1):
            n += 1
            await store.upsert_session(AgentSession(session_id=f"s-{chat}-{k}", user_id="u", chat_id=chat,
                                                    current_stage="x", is_active=False, created_at=STAMP.format(n),
                                                    updated_at=STAMP.format(n)))
        for line in lines:
            n += 1
            await store.append_message(ChatMessage(id=f"m{n}", chat_id=chat, role="user", content=line,
                                                   created_at=STAMP.format(n)))
    await store.close()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same chats twice: with the FTS5 index, and with it dropped (LIKE fallback)."""
    base = tmp_path_factory.mktemp("search")
    fts, plain = base / "fts" / "s.db", base / "plain" / "s.db"
    fts.parent.mkdir()
    plain.parent.mkdir()
    asyncio.run(_write(fts))
    shutil.copyfile(fts, plain)
    conn = sqlite3.connect(plain)
    for trigger in ("messages_fts_ai", "messages_fts_ad", "messages_fts_au"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE messages_fts")
    conn.commit()
    conn.close()
    return {"fts5": fts, "like": plain}


def _runtime(db, query: str, limit: int, order: str = "recent") -> list[dict]:
    async def go() -> list[dict]:
        store = SqliteStorage(db)
        try:
            return [s.to_wire() for s in await store.search_sessions(query, limit=limit, order=order)]
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.mark.parametrize("order", ["recent", "relevance"])
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("limit", [1, 2, 20])
def test_search_ranks_like_the_runtime_with_fts5(stores, query, limit, order):
    report = search(stores["fts5"], query, limit=limit, order=order)
    assert report.engine == "fts5" and report.order == order
    assert report.sessions == _runtime(stores["fts5"], query, limit, order)


@pytest.mark.parametrize("order", ["recent", "relevance"])
@pytest.mark.parametrize("query", ["apple", "banana", "pie", "zzz", "50%_"])
def test_search_ranks_like_the_runtime_without_fts(stores, query, order):
    report = search(stores["like"], query, order=order)
    assert report.engine == "like"
    assert report.sessions == _runtime(stores["like"], query, 20, order)


@pytest.mark.parametrize("engine", ["fts5", "like"])
def test_search_newest_match_first_and_sessions_in_creation_order(stores, engine):
    report = search(stores[engine], "apple")  # chat-2's "one apple" is newer than all of chat-1's
    assert report.chats == ["chat-2", "chat-1"]
    assert [s["sessionId"] for s in report.sessions] == ["s-chat-2-0", "s-chat-2-1", "s-chat-1-0"]


@pytest.mark.parametrize("engine", ["fts5", "like"])
def test_search_by_relevance_best_match_first(stores, engine):
    report = search(stores[engine], "apple", order="relevance")  # chat-1 says apple five times
    assert report.chats == ["chat-1", "chat-2"]
    assert [s["sessionId"] for s in report.sessions] == ["s-chat-1-0", "s-chat-2-0", "s-chat-2-1"]
    result = run(stores[engine], "apple", "--order", "relevance", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["chats"] == ["chat-1", "chat-2"]


def test_an_unknown_order_is_a_usage_error(stores):
    result = run(stores["fts5"], "apple", "--order", "best")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_search_json_twin_prints_exactly_the_report(stores):
    result = run(stores["fts5"], "apple", "--json", "--limit", "1")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout) == json.loads(search(stores["fts5"], "apple", limit=1).model_dump_json())


def test_search_human_view_lists_ranked_sessions(stores):
    result = run(stores["fts5"], "apple")
    assert result.exit_code == 0
    assert "2 chat(s) match 'apple'" in result.stdout and "s-chat-2-1" in result.stdout
    assert "newest match first" in result.stdout
    none = run(stores["fts5"], "durian")
    assert none.exit_code == 0 and "no chat matches 'durian'" in none.stdout


@pytest.mark.parametrize("query", ['"unterminated', "apple AND", "nosuchcolumn:apple", "   "])
def test_rejected_query_is_a_usage_error_with_one_error_and_one_hint(stores, query):
    before = snapshot(stores["fts5"].parent)
    result = run(stores["fts5"], query)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert "Traceback" not in result.output
    assert snapshot(stores["fts5"].parent) == before


def test_search_sees_uncheckpointed_wal_rows():
    report = search(FIXTURES / "wal-pending" / "sessions.db", '"only in the wal"')
    assert report.chats == ["chat-gamma"] and report.sessions[0]["sessionId"] == "s-gamma-1"


def test_damaged_session_row_is_a_finding_not_silently_dropped(fixture_copy):
    db = fixture_copy("healthy")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET crc = crc + 1 WHERE session_id = 's-alpha-1'")
    conn.commit()
    conn.close()
    report = search(db, "invoice")
    assert report.chats == ["chat-alpha"] and report.sessions == []
    assert [f.code for f in report.findings] == ["row-checksum-mismatch"] and report.exit_code == 1
    assert run(db, "invoice").exit_code == 1


def test_search_of_a_newer_schema_cannot_run():
    result = run(FIXTURES / "schema-too-new" / "sessions.db", "invoice")
    assert result.exit_code == 3 and len(result.stderr.splitlines()) == 2


def test_undecodable_session_row_is_a_finding_not_a_crash(fixture_copy):
    db = fixture_copy("healthy")
    conn = sqlite3.connect(db)
    broken = '{"sessionId": "s-alpha-1", "userId": '
    conn.execute("UPDATE sessions SET data = ?, crc = ? WHERE session_id = 's-alpha-1'",
                 (broken, row_crc("sessions", ("s-alpha-1",), broken)))
    conn.commit()
    conn.close()
    report = search(db, "invoice")
    assert report.sessions == [] and [f.code for f in report.findings] == ["row-json-invalid"]
    result = run(db, "invoice", "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["key"] == "s-alpha-1"


@pytest.mark.parametrize("data", [
    {"sessionId": "s-chat-1-0", "userId": "u", "chatId": "elsewhere", "currentStage": "x", "isActive": False,
     "createdAt": "2026-03-01T00:00:01.000000Z", "updatedAt": "2026-03-01T00:00:01.000000Z"},  # column disagrees
    {"sessionId": "s-chat-1-0", "chatId": "chat-1"},  # not a session's shape
], ids=["column-mismatch", "invalid"])
def test_a_session_whose_data_disagrees_is_left_out_and_named_not_a_crash(stores, tmp_path, data):
    db = tmp_path / "s.db"
    shutil.copyfile(stores["fts5"], db)
    text = json.dumps(data, separators=(",", ":"))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE sessions SET data = ?, crc = ? WHERE session_id = 's-chat-1-0'",
                 (text, row_crc("sessions", ("s-chat-1-0",), text)))
    conn.commit()
    conn.close()
    result = run(db, "apple")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "s-chat-1-0" in result.output and "s-chat-2-0" in result.stdout
    report = search(db, "apple")
    assert [s["sessionId"] for s in report.sessions] == ["s-chat-2-0", "s-chat-2-1"]
    assert {f.code for f in report.findings} == {"row-column-mismatch" if "userId" in data else "row-invalid"}


def test_an_index_this_sqlite_cannot_read_falls_back_to_like_in_the_runtime_and_the_tool(stores, tmp_path):
    """A store made by a build with FTS5, read by a SQLite without the module: both the
    runtime and steerable-maint search by substring instead of failing (one shared test,
    schema.has_fts). Simulated with a virtual table of a module no SQLite has."""
    db = tmp_path / "s.db"
    shutil.copyfile(stores["like"], db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('table', 'messages_fts',"
                 " 'messages_fts', 0, 'CREATE VIRTUAL TABLE messages_fts USING nosuchmodule(content)')")
    conn.commit()
    conn.close()
    report = search(db, "apple")
    assert report.engine == "like" and report.chats == ["chat-2", "chat-1"]
    assert [s["sessionId"] for s in _runtime(db, "apple", 20)] == [s["sessionId"] for s in report.sessions]
