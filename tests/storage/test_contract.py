"""One contract suite, run against every StorageAdapter implementation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from steerable_agent_runtime import (
    HistorySeqConflictError,
    InMemoryStorage,
    RecordFormatError,
    SqliteStorage,
    StorageAdapter,
)
from tests.helpers import boundary, event, item, message, run, seed, session, span, trace


STORES = ["memory", "sqlite", "sqla-sqlite", "sqla-postgres", "sqla-psycopg"]


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path) -> StorageAdapter:
    """A fresh, empty store of ``kind`` (PostgreSQL: a new database on the session's cluster)."""
    if kind == "memory":
        return InMemoryStorage()
    if kind == "sqlite":
        return SqliteStorage(tmp_path / "sessions.db")
    from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

    if kind == "sqla-sqlite":
        return SqlAlchemyStorage(f"sqlite+aiosqlite:///{tmp_path / 'sessions.db'}")
    url = request.getfixturevalue("pg_url")
    if kind == "sqla-psycopg":  # the other documented PostgreSQL driver (psycopg 3)
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return SqlAlchemyStorage(url)


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[StorageAdapter]:
    s = make_store(request.param, request, tmp_path)
    yield s
    run(s.close())


def test_implements_the_protocol(store):
    assert isinstance(store, StorageAdapter)


def test_upsert_session_round_trips_and_replaces(store):
    first = run(store.upsert_session(session("s1")))
    assert run(store.get_session("s1")) == first
    changed = first.model_copy(update={"current_stage": "DONE", "is_active": False})
    run(store.upsert_session(changed))
    assert run(store.get_session("s1")) == changed
    assert len(run(store.list_sessions())) == 1


def test_get_unknown_session_is_none(store):
    assert run(store.get_session("nope")) is None


def test_list_sessions_filters_and_orders(store):
    run(store.upsert_session(session("s3", chat="c2", user="u2", minute=3)))
    run(store.upsert_session(session("s1", chat="c1", minute=1, active=False)))
    run(store.upsert_session(session("s2", chat="c1", minute=2)))
    assert [s.session_id for s in run(store.list_sessions())] == ["s1", "s2", "s3"]
    assert [s.session_id for s in run(store.list_sessions(chat_id="c1"))] == ["s1", "s2"]
    assert [s.session_id for s in run(store.list_sessions(user_id="u2"))] == ["s3"]
    assert [s.session_id for s in run(store.list_sessions(active_only=True))] == ["s2", "s3"]
    assert run(store.list_sessions(user_id="u2", chat_id="c1")) == []


def test_returned_models_are_copies(store):
    stored = run(store.upsert_session(session("s1")))
    stored.stage_data = {"mutated": True}
    assert run(store.get_session("s1")).stage_data is None


def test_messages_in_time_order_and_limit_takes_the_tail(store):
    for i, minute in enumerate([5, 1, 3, 3]):
        run(store.append_message(message(f"m{i}", minute=minute, content=f"text {i}")))
    run(store.append_message(message("other", chat="c2")))
    assert [m.id for m in run(store.list_messages("c1"))] == ["m1", "m2", "m3", "m0"]
    assert [m.id for m in run(store.list_messages("c1", limit=2))] == ["m3", "m0"]
    assert run(store.list_messages("c1", limit=0)) == []
    assert run(store.list_messages("nope")) == []


def test_append_message_same_id_replaces_in_place(store):
    run(store.append_message(message("m1", minute=1, content="draft")))
    run(store.append_message(message("m2", minute=1)))
    run(store.append_message(message("m1", minute=1, content="final")))
    found = run(store.list_messages("c1"))
    assert [(m.id, m.content) for m in found] == [("m1", "final"), ("m2", "hello")]


def test_traces_spans_events(store):
    run(store.upsert_trace(trace("t2", minute=2)))
    run(store.upsert_trace(trace("t1", minute=1, sid="s2", chat="c2")))
    assert [t.trace_id for t in run(store.list_traces())] == ["t1", "t2"]
    assert [t.trace_id for t in run(store.list_traces(session_id="s2"))] == ["t1"]
    assert [t.trace_id for t in run(store.list_traces(chat_id="c1"))] == ["t2"]
    assert [t.trace_id for t in run(store.list_traces(since="2026-01-01T00:02:00.000000Z"))] == ["t2"]
    assert [t.trace_id for t in run(store.list_traces(until="2026-01-01T00:02:00.000000Z"))] == ["t1"]
    # bounds mean instants, also with an offset or no zone (UTC), as the stored times are normalised
    assert [t.trace_id for t in run(store.list_traces(since="2026-01-01T02:01:30+02:00"))] == ["t2"]
    assert [t.trace_id for t in run(store.list_traces(until="2025-12-31T19:01:30-05:00"))] == ["t1"]
    assert [t.trace_id for t in run(store.list_traces(since="2026-01-01T00:00:30"))] == ["t1", "t2"]
    from steerable_agent_runtime import UsageError

    for bad in ("yesterday", "a\ud800", ""):
        with pytest.raises(UsageError, match="ISO 8601"):
            run(store.list_traces(since=bad))
    run(store.add_span("t2", span("sp2", minute=3)))
    run(store.add_span("t2", span("sp1", minute=2)))
    closed = span("sp1", minute=2).model_copy(update={"end_at": "2026-01-01T00:09:00Z"})
    run(store.add_span("t2", closed))
    spans = run(store.list_spans("t2"))
    assert [s.span_id for s in spans] == ["sp1", "sp2"]
    assert spans[0].end_at == "2026-01-01T00:09:00.000000Z"
    run(store.add_event("t2", event("e1", "sp1", minute=4)))
    run(store.add_event("t2", event("e2", "sp2", minute=3)))
    assert [e.event_id for e in run(store.list_events("t2"))] == ["e2", "e1"]
    assert [e.event_id for e in run(store.list_events("t2", span_id="sp1"))] == ["e1"]
    assert run(store.get_trace("missing")) is None
    assert run(store.list_spans("t1")) == []


def test_append_history_assigns_contiguous_seq_and_stamps(store):
    first = run(store.append_history("c1", [item("a"), item("b")]))
    second = run(store.append_history("c1", [item("c")]))
    assert [e["seq"] for e in first + second] == [1, 2, 3]
    assert all(e["v"] == 2 for e in first + second)
    assert all(e["at"].endswith("Z") for e in first + second)
    assert run(store.append_history("c2", [item("x")]))[0]["seq"] == 1
    listed = run(store.list_history("c1"))
    assert listed == first + second


def test_append_history_keeps_given_at_normalised(store):
    stored = run(store.append_history("c1", [{**item("a"), "at": "2026-05-01T12:00:00+02:00"}]))
    assert stored[0]["at"] == "2026-05-01T10:00:00.000000Z"


def test_append_history_refuses_wrong_seq_and_writes_nothing(store):
    run(store.append_history("c1", [item("a")]))
    with pytest.raises(HistorySeqConflictError) as err:
        run(store.append_history("c1", [{**item("b"), "seq": 2}, {**item("c"), "seq": 5}]))
    assert err.value.record_id == "c1" and err.value.seq == 5
    assert [e["seq"] for e in run(store.list_history("c1"))] == [1]
    run(store.append_history("c1", [{**item("b"), "seq": 2}]))
    assert [e["seq"] for e in run(store.list_history("c1"))] == [1, 2]


def test_append_history_is_atomic_on_an_invalid_entry(store):
    with pytest.raises(RecordFormatError):
        run(store.append_history("c1", [item("ok"), {"type": "mystery"}]))
    with pytest.raises(RecordFormatError):
        run(store.append_history("c1", [item("ok"), {"type": "item"}]))
    with pytest.raises(RecordFormatError):
        run(store.append_history("c1", [{**item("future"), "v": 3}]))
    assert run(store.list_history("c1")) == []


@pytest.mark.parametrize("entry", [
    item("lone surrogate \ud800"),  # the fast path for plain items
    {**item("x"), "message": {"role": "tool", "content": "y", "toolCallId": "\udfff"}},  # the validated path
])
def test_append_history_refuses_text_that_is_not_unicode_and_writes_nothing(store, entry):
    with pytest.raises(RecordFormatError, match="not valid Unicode"):
        run(store.append_history("c1", [item("ok"), entry]))
    assert run(store.list_history("c1")) == []


def test_append_history_returns_and_stores_the_same_canonical_entries(store):
    """Plain items take a fast path (no pydantic); others are validated and dumped: both
    give the same canonical JSON, returned as stored."""
    entries = [item("plain ✓ \n \" \\ \u2028 \x00"), {**item("given at"), "at": "2026-05-01T12:00:00+02:00"},
               {"type": "item", "message": {"role": "assistant", "content": None, "toolCalls": [{"id": "t"}]}},
               seed("a", "b"), boundary("sum")]
    stored = run(store.append_history("c1", entries))
    assert stored == run(store.list_history("c1"))
    assert [e["message"]["content"] for e in stored[:2]] == ["plain ✓ \n \" \\ \u2028 \x00", "given at"]


def test_reappended_entry_is_stamped_current_version(store):
    run(store.append_history("c1", [item("a")]))
    entry = run(store.list_history("c1"))[0]
    legacy = {k: v for k, v in entry.items() if k not in ("v", "seq")}
    copied = run(store.append_history("c2", [legacy]))[0]
    assert copied["v"] == 2 and copied["seq"] == 1 and copied["message"] == entry["message"]


def test_list_history_windows(store):
    run(store.append_history("c1", [item(str(i)) for i in range(1, 11)]))

    def seqs(**kw):
        return [e["seq"] for e in run(store.list_history("c1", **kw))]

    assert seqs(after_seq=7) == [8, 9, 10]
    assert seqs(until_seq=3) == [1, 2, 3]
    assert seqs(after_seq=2, until_seq=5) == [3, 4, 5]
    assert seqs(limit=2) == [1, 2]
    assert seqs(reverse=True, limit=3) == [10, 9, 8]
    assert seqs(reverse=True, until_seq=4, limit=2) == [4, 3]
    assert seqs(reverse=True, after_seq=8) == [10, 9]
    assert seqs(after_seq=10) == []
    assert seqs(after_seq=5, until_seq=3) == []
    assert seqs(limit=0) == []
    assert run(store.list_history("nope")) == []


def test_history_checkpoint_is_newest_boundary_or_seed(store):
    assert run(store.history_checkpoint("c1")) is None
    run(store.append_history("c1", [seed("s"), item("a"), boundary("b1"), item("c")]))
    assert run(store.history_checkpoint("c1")) == 3
    run(store.append_history("c1", [seed("again")]))
    assert run(store.history_checkpoint("c1")) == 5


def test_close_is_idempotent(store):
    run(store.close())
    run(store.close())


def test_a_key_holding_a_lone_surrogate_is_found_nowhere_and_refused_for_writes(store):
    """A lone surrogate is no character (UTF-8, SQLite and PostgreSQL cannot hold it), so no row
    has such a key: every read answers "nothing there", as for any missing key, and a write is a
    UsageError that writes nothing; never a raw UnicodeEncodeError from the driver."""
    from steerable_agent_runtime import UsageError

    key = "a\ud800"
    run(store.upsert_session(session("s1")))
    assert run(store.get_session(key)) is None
    assert run(store.list_sessions(chat_id=key)) == [] and run(store.list_sessions(user_id=key)) == []
    assert run(store.list_messages(key)) == [] and run(store.list_messages(key, limit=3)) == []
    assert run(store.get_trace(key)) is None and run(store.list_traces(session_id=key)) == []
    assert run(store.list_spans(key)) == [] and run(store.list_events("t", span_id=key)) == []
    assert run(store.list_history(key)) == [] and run(store.history_checkpoint(key)) is None
    assert not hasattr(store, "search_sessions") or run(store.search_sessions(key)) == []
    for write in (lambda: store.append_history(key, [item("x")]), lambda: store.add_span(key, span("p")),
                  lambda: store.add_event(key, event("e", "p"))):
        with pytest.raises(UsageError) as caught:
            run(write())
        assert caught.value.hint
    assert run(store.list_sessions()) == [session("s1")] and run(store.list_spans("t")) == []
