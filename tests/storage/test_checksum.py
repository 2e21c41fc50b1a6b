"""The row checksum binds data to the row's identity: a changed key column fails like changed data."""

from __future__ import annotations

import sqlite3

import pytest

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


@pytest.mark.parametrize("record_id", ["chat-1", "wörld ✓", "x" * 300, ""])
def test_record_crc_is_row_crc_of_history_with_the_record_id_hashed_once(record_id):
    from steerable_agent_runtime.storage.checksum import record_crc
    crc = record_crc(record_id)
    for seq in (1, 9, 10, 2**62):
        for data in ("{}", '{"text":"ü ✓"}', b'{"raw":1}'):
            assert crc(seq, data) == row_crc("history", (record_id, seq), data)
    assert crc(3, "{}") != crc(4, "{}")
