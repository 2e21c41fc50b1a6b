"""The row checksum binds data to the row's identity: a changed key column fails like changed data."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_agent_runtime import DataIntegrityError, SqliteStorage
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.storage.checksum import IDENTITY, identity_bytes, legacy_crc, row_crc
from steerable_agent_runtime.storage.schema import SCHEMA_VERSION, TABLES
from tests.helpers import event, item, message, run, session, span, trace


def test_the_identity_is_every_key_column_and_every_place_column_outside_data():
    assert IDENTITY == {"sessions": ("session_id",), "messages": ("id",), "traces": ("trace_id",),
                        "spans": ("span_id", "trace_id"), "events": ("event_id", "trace_id"),
                        "history": ("record_id", "seq")}
    for table, spec in TABLES.items():
        outside = {c for c, field in spec.columns.items() if not field}
        assert set(spec.key) | outside == set(IDENTITY[table])


@pytest.mark.parametrize("a, b", [
    (("ab", "c"), ("a", "bc")), (("1",), (1,)), ((None,), ("",)), (("chat-1", 2), ("chat-1", 3)),
    (("x",), (b"x\x00",)), ((1.0,), (1,)),
])
def test_the_identity_encoding_is_unambiguous(a, b):
    assert identity_bytes(a) != identity_bytes(b)
    assert row_crc("history", a, b"{}") != row_crc("history", b, b"{}")


def test_text_and_its_utf8_bytes_are_the_same_identity():
    assert identity_bytes(("wörld", 3)) == identity_bytes(("wörld".encode(), 3))


def test_the_checksum_is_crc32_of_identity_then_data():
    import zlib
    data = b'{"v":2}'
    assert row_crc("history", ("c1", 1), data) == zlib.crc32(identity_bytes(("c1", 1)) + data)
    assert legacy_crc(data) == zlib.crc32(data) != row_crc("history", ("c1", 1), data)


def _store(tmp_path):
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    run(store.upsert_session(session("s1", chat="c1")))
    run(store.upsert_session(session("s2", chat="c2")))
    run(store.append_message(message("m1", chat="c1")))
    run(store.upsert_trace(trace("t1", sid="s1")))
    run(store.upsert_trace(trace("t2", sid="s2", chat="c2")))
    run(store.add_span("t1", span("sp1")))
    run(store.add_event("t1", event("ev1", "sp1")))
    run(store.append_history("c1", [item("a"), item("b")]))
    run(store.append_history("c2", [item("z")]))
    run(store.close())
    return db


def _edit(db, sql: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()


MOVES = [
    # a history entry that moved to another chat, as one flipped byte in record_id does (c1 -> c3)
    ("UPDATE history SET record_id = 'c3' WHERE record_id = 'c1' AND seq = 2",
     lambda s: s.list_history("c3"), "history"),
    # a span and an event that moved to another trace (t1 -> t2)
    ("UPDATE spans SET trace_id = 't2' WHERE span_id = 'sp1'", lambda s: s.list_spans("t2"), "spans"),
    ("UPDATE events SET trace_id = 't2' WHERE event_id = 'ev1'", lambda s: s.list_events("t2"), "events"),
    # a key column flipped, data untouched
    ("UPDATE sessions SET session_id = 's9' WHERE session_id = 's1'", lambda s: s.get_session("s9"), "sessions"),
    ("UPDATE messages SET id = 'm9' WHERE id = 'm1'", lambda s: s.list_messages("c1"), "messages"),
    ("UPDATE traces SET trace_id = 't9' WHERE trace_id = 't1'", lambda s: s.get_trace("t9"), "traces"),
]


@pytest.mark.parametrize("sql, read, table", MOVES, ids=[m[2] for m in MOVES])
def test_a_row_whose_key_column_changed_fails_its_checksum_on_read(tmp_path, sql, read, table):
    db = _store(tmp_path)
    _edit(db, sql)
    store = SqliteStorage(db)
    try:
        with pytest.raises(DataIntegrityError) as caught:
            run(read(store))
        assert caught.value.table == table
    finally:
        run(store.close())


@pytest.mark.parametrize("sql, read, table", MOVES, ids=[m[2] for m in MOVES])
def test_check_reports_a_changed_key_column_as_a_checksum_mismatch(tmp_path, sql, read, table):
    db = _store(tmp_path)
    assert not check(db).findings
    _edit(db, sql)
    report = check(db)
    mismatches = [f for f in report.findings if f.code == "row-checksum-mismatch"]
    assert [f.table for f in mismatches] == [table]
    assert report.has_errors and report.schema_version == SCHEMA_VERSION


@given(st.one_of(st.sampled_from(["chat-1", "wörld ✓", "x" * 300, "", "a\ud800"]), st.text(max_size=6),
                 st.integers(-5, 5), st.binary(max_size=4), st.none()),
       st.lists(st.tuples(st.one_of(st.integers(-2**63, 2**63), st.just(True), st.text(max_size=3)),
                          st.one_of(st.text(max_size=12), st.just('{"t":"\ud800"}'), st.binary(max_size=8))),
                max_size=6))
def test_history_rows_checksum_each_row_as_row_crc_does(record_id, entries):
    from steerable_agent_runtime.storage.checksum import history_rows
    prepared = [(seq, 2, "item", "2026-01-01T00:00:00.000000Z", data, {"wire": i}) for i, (seq, data) in enumerate(entries)]
    rows = history_rows(record_id, prepared)
    assert rows == [(record_id, seq, 2, "item", "2026-01-01T00:00:00.000000Z", data,
                     row_crc("history", (record_id, seq), data)) for seq, data in entries]
    if len(entries) == 2 and entries[0][1] == entries[1][1] and type(entries[0][0]) is int \
            and type(entries[1][0]) is int and entries[0][0] != entries[1][0]:
        assert rows[0][-1] != rows[1][-1]  # the seq is bound into the checksum


_VALUES = st.one_of(st.text(max_size=8), st.integers(-2**70, 2**70), st.binary(max_size=8), st.none(),
                    st.floats(allow_nan=False), st.booleans())
_ROWS = st.lists(st.tuples(st.sampled_from(["c1", "c2", "wörld", "", b"c1", "wörld".encode()]) | _VALUES, _VALUES,
                           st.binary(max_size=12) | st.none(), st.booleans()), max_size=30)


@given(_ROWS, st.sampled_from(sorted(TABLES)), st.sampled_from([1, SCHEMA_VERSION]))
def test_row_checker_answers_as_bytes_checker_over_any_sequence_of_rows(rows, table, version):
    """The hot-loop checker (which remembers the last first identity value) gives, row after
    row, exactly what the one CRC check gives: for stored crcs that match and that do not."""
    from steerable_agent_runtime.storage.checksum import bytes_checker, row_checker
    fast, slow = row_checker(table, version), bytes_checker(version)
    arity = len(IDENTITY[table])
    for first, second, data, matching in rows:
        identity = (first, second, first)[:arity]
        crc = (row_crc(table, identity, data) if version >= 2 else legacy_crc(data)) if data is not None else 0
        crc = crc if matching else crc ^ 1
        assert fast(*identity, data, crc) is slow(identity, data, crc) is (matching and data is not None)


@settings(max_examples=400, deadline=None)
@given(_ROWS, st.sampled_from(sorted(TABLES)), st.sampled_from([1, SCHEMA_VERSION]),
       st.lists(st.integers(0, 8), max_size=8), st.booleans())
def test_batch_checker_answers_as_row_checker_over_any_sequence_of_batches(rows, table, version, cuts, messages_layout):
    """The batch checker (one loop over a fetched batch, which remembers the last first
    identity value across batches) gives, row after row, what the per-row checker gives: for
    each table, both schema versions, rows laid out as history's or messages' SELECT, and the
    rows cut into batches anywhere (an empty batch too)."""
    from steerable_agent_runtime.storage.checksum import batch_checker, row_checker
    arity = len(IDENTITY[table])
    fetched = []
    for first, second, data, matching in rows:
        identity = (first, second, first)[:arity]
        crc = (row_crc(table, identity, data) if version >= 2 else legacy_crc(data)) if data is not None else 0
        crc = crc if matching else crc ^ 1
        # messages' SELECT: (data, crc, key, ...); history's: (record_id, seq, v, type, at, data, crc)
        fetched.append((data, crc, *identity, "x") if messages_layout else (*identity, 2, "item", "at", data, crc))
    if messages_layout:
        positions = (tuple(range(2, 2 + arity)), 0, 1)
    else:
        positions = (tuple(range(arity)), arity + 3, arity + 4)
    per_row = row_checker(table, version)
    expected = [per_row(*(row[i] for i in positions[0]), row[positions[1]], row[positions[2]]) for row in fetched]
    check, answers, start = batch_checker(table, version, *positions), [], 0
    for cut in [*cuts, len(fetched)]:
        batch = fetched[start:start + cut]
        answers += check(batch)
        start += len(batch)
    answers += check(fetched[start:])
    assert answers == expected and all(type(a) is bool for a in answers)
