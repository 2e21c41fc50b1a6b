"""search_sessions: the two FTS5 orders (recent, relevance), the LIKE fallback, and rejected queries."""

from __future__ import annotations

import sqlite3

import pytest

from steerable_agent_runtime import SqliteStorage, UsageError
from tests.helpers import message, run, session


def populate(store: SqliteStorage) -> None:
    run(store.upsert_session(session("s-rare", chat="c-rare", minute=1)))
    run(store.upsert_session(session("s-many", chat="c-many", minute=2)))
    run(store.upsert_session(session("s-many-2", chat="c-many", minute=3)))
    run(store.upsert_session(session("s-none", chat="c-none", minute=4)))
    run(store.append_message(message("m1", chat="c-rare", content="a long talk about weather and then one mention of kiwi")))
    run(store.append_message(message("m2", chat="c-many", content="kiwi kiwi kiwi")))
    run(store.append_message(message("m3", chat="c-many", content="kiwi again")))
    run(store.append_message(message("m4", chat="c-none", content="nothing relevant here 100%_sure")))


def test_fts_search_ranks_best_chat_first(tmp_path):
    store = SqliteStorage(tmp_path / "s.db")
    assert store.fts
    populate(store)
    found = run(store.search_sessions("kiwi"))
    assert [s.session_id for s in found] == ["s-many", "s-many-2", "s-rare"]
    assert [s.session_id for s in run(store.search_sessions("kiwi", limit=1))] == ["s-many", "s-many-2"]
    assert run(store.search_sessions("durian")) == []
    run(store.close())


def test_search_follows_message_updates_and_deletes(tmp_path):
    store = SqliteStorage(tmp_path / "s.db")
    populate(store)
    run(store.append_message(message("m1", chat="c-rare", content="now about mango")))
    assert [s.session_id for s in run(store.search_sessions("mango"))] == ["s-rare"]
    assert "s-rare" not in [s.session_id for s in run(store.search_sessions("weather"))]
    run(store.close())


@pytest.mark.parametrize("query", ['"unbalanced', "kiwi AND", "col:kiwi"])
def test_query_fts_rejects_is_a_usage_error_with_a_hint(tmp_path, query):
    store = SqliteStorage(tmp_path / "s.db")
    populate(store)
    with pytest.raises(UsageError) as err:
        run(store.search_sessions(query))
    assert "double quotes" in err.value.hint and err.value.exit_code == 2
    run(store.close())


def test_like_fallback_without_fts5(tmp_path):
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    populate(store)
    run(store.close())
    conn = sqlite3.connect(db)  # what a store made by a SQLite without FTS5 looks like
    for name in ("messages_fts_ai", "messages_fts_ad", "messages_fts_au"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE messages_fts")
    conn.commit()
    conn.close()
    store = SqliteStorage(db)
    assert not store.fts
    assert [s.session_id for s in run(store.search_sessions("kiwi"))] == ["s-many", "s-many-2", "s-rare"]
    assert [s.session_id for s in run(store.search_sessions("100%_"))] == ["s-none"]
    assert run(store.search_sessions("0%x")) == []  # % and _ are literal, not wildcards
    run(store.append_message(message("m5", chat="c-rare", content="kiwi once more")))
    # recent: the chat with the newest match; relevance: the most matches (a tie by chat id)
    assert [s.session_id for s in run(store.search_sessions("kiwi"))] == ["s-rare", "s-many", "s-many-2"]
    assert [s.session_id for s in run(store.search_sessions("kiwi", order="relevance"))] == [
        "s-many", "s-many-2", "s-rare"]
    with pytest.raises(UsageError):
        run(store.search_sessions("   "))
    run(store.close())


def test_ranking_is_bounded_to_the_newest_candidates(tmp_path):
    store = SqliteStorage(tmp_path / "s.db")
    run(store.upsert_session(session("s-old", chat="c-old", minute=1)))
    run(store.upsert_session(session("s-new", chat="c-new", minute=2)))
    run(store.append_message(message("old", chat="c-old", content="fig fig fig fig", minute=1)))
    for i in range(5):
        run(store.append_message(message(f"new{i}", chat="c-new", content=f"a fig among many other words {i}", minute=2)))
    exact = [s.session_id for s in run(store.search_sessions("fig", order="relevance"))]
    assert exact == ["s-old", "s-new"]  # few matches: exact bm25, the dense old message wins
    bounded = [s.session_id for s in run(store.search_sessions("fig", order="relevance", candidates=3))]
    assert bounded == ["s-new"]  # only the 3 newest matches are ranked
    # the default order: the chat with the newest match first, whatever the density
    assert [s.session_id for s in run(store.search_sessions("fig"))] == ["s-new", "s-old"]
    # recent is exact, with no candidate bound: the old chat is found however many newer matches
    assert [s.session_id for s in run(store.search_sessions("fig", candidates=3))] == ["s-new", "s-old"]
    run(store.close())


def test_an_unknown_order_is_a_usage_error_with_a_hint(tmp_path):
    store = SqliteStorage(tmp_path / "s.db")
    populate(store)
    with pytest.raises(UsageError) as err:
        run(store.search_sessions("kiwi", order="best"))
    assert "recent" in err.value.hint and err.value.exit_code == 2
    run(store.close())


def test_ordered_chats_equal_the_sql_statement_they_replace(tmp_path):
    # matching_chats reads or sorts the candidates and looks their chats up in Python, only
    # until `limit` chats: the same chats in the same order as the one SQL statement per order.
    import random

    from steerable_agent_runtime.storage.search import _FTS_SQL, _first_chats, matching_chats
    rng = random.Random(7)
    words = ["kiwi", "apple", "plum", "fig", "pear", "lime", "date", "yuzu"]
    store = SqliteStorage(tmp_path / "s.db")
    for i in range(400):
        text = " ".join(rng.choice(words[:rng.randint(1, len(words))]) for _ in range(rng.randint(1, 12)))
        run(store.append_message(message(f"m{i}", chat=f"c{rng.randint(0, 60)}", content=text, minute=i)))
    for i in range(0, 60, 2):  # chats with 0 to 3 sessions, created out of id order
        for k in range(i % 4):
            run(store.upsert_session(session(f"s{i}-{k}", chat=f"c{i}", minute=10 - k)))
    store.conn.execute("DELETE FROM messages WHERE rowid % 37 = 0")  # the triggers keep FTS in step
    for query in ["kiwi", "yuzu", "plum fig", "apple OR date", "lime NOT kiwi", "nomatch"]:
        for limit in (0, 1, 3, 20, 100):
            for candidates in (5, 50, 500):
                expected = _first_chats(store.conn.execute(_FTS_SQL["relevance"], (query, candidates)), limit)
                assert matching_chats(store.conn, query, limit, fts=True, order="relevance",
                                      candidates=candidates) == ("fts5", expected)
            recent = _first_chats(store.conn.execute(_FTS_SQL["recent"], (query,)), limit)
            assert matching_chats(store.conn, query, limit, fts=True) == ("fts5", recent)
        for order in ("relevance", "recent"):
            expected = _first_chats(store.conn.execute(_FTS_SQL[order], (query, 500)[:1 + (order == "relevance")]), 100)
            sessions = [s for chat in expected for s in run(store.list_sessions(chat_id=chat))]
            assert run(store.search_sessions(query, limit=100, order=order, candidates=500)) == sessions
    store.close_sync()
