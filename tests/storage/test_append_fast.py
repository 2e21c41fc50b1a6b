"""The append fast paths are held to the careful path: ``history_append.loop_item`` (the one-entry form the
loop's RecordWriter appends, taken by InMemoryStorage without prepare_append's batch machinery), the
hand-written text of a message whose fields are all a str or None, and the rows SqliteStorage
inserts (``checksum.history_rows``). Same stored bytes, same checksums, same returned dicts, same
errors, for generated messages, messages changed after construction, and any other entry form."""

from __future__ import annotations

import sqlite3
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_agent_runtime import InMemoryStorage, LLMMessage, RecordFormatError, SqliteStorage
from steerable_agent_runtime.history_append import _dump_message, _dump_message_json, loop_item, prepare_append
from steerable_agent_runtime.storage.checksum import row_crc
from tests.helpers import run
from tests.storage.test_typed_items import _changed, _messages

AT = "2026-01-01T00:00:00.000000Z"
_texts = st.one_of(st.none(), st.text(), st.just("a\ud800b"), st.just("\x00\x1f\x7f\"\\/\u2028é✓\U0001f600"))


def _careful(entry, seq):
    """prepare_append's answer for one entry: its (data, dict, type, at) or the error it raises."""
    try:
        p = prepare_append("r", [entry], seq)[0]
    except RecordFormatError as exc:
        return type(exc), str(exc)
    return p.data, p.wire, p.type, p.at


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["user", "assistant", "tool", "system"]), _texts, _texts, _texts, st.integers(1, 2**63 - 1))
def test_a_str_only_message_is_written_as_its_serializer_writes_it(role, content, call_id, name, seq):
    message = LLMMessage(role=role, content=content, tool_call_id=call_id, name=name)
    item = loop_item({"type": "item", "message": message}, seq)
    try:
        text = _dump_message_json(message, by_alias=True, exclude_none=True).decode()
    except Exception:  # noqa: BLE001 - a lone surrogate: the serializer refuses it
        assert item is None
        assert _careful({"type": "item", "message": message}, seq)[0] is RecordFormatError
        return
    assert item is not None
    data, wire = item
    assert data == f'{{"v":2,"type":"item","seq":{seq},"at":"{wire["at"]}","message":{text}}}'
    assert wire == {"v": 2, "type": "item", "seq": seq, "at": wire["at"],
                    "message": _dump_message(message, mode="json", by_alias=True, exclude_none=True)}


def _same_as_careful(message, seq):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns when it serialises a reassigned field
        item = loop_item({"type": "item", "message": message}, seq)
        if item is None:
            return  # nothing decided: prepare_append takes it (tests/storage/test_typed_items.py)
        data, wire = item
        at = wire["at"]
        assert (wire["seq"], wire["v"], wire["type"]) == (seq, 2, "item")
        assert _careful({"type": "item", "at": at, "message": message}, seq) == (data, wire, "item", at)
        assert _careful({"type": "item", "at": at, "message": message.to_wire()}, seq) == (data, wire, "item", at)


@settings(max_examples=200, deadline=None)
@given(_messages(), st.integers(1, 2**63 - 1))
def test_loop_item_is_prepare_append_of_the_same_entry(message, seq):
    _same_as_careful(message, seq)


@settings(max_examples=200, deadline=None)
@given(_changed(), st.integers(1, 100))
def test_loop_item_of_a_changed_message_is_prepare_append_or_nothing(message, seq):
    _same_as_careful(message, seq)


def test_loop_item_takes_only_the_loop_form():
    message = LLMMessage(role="user", content="hi")

    class Sub(LLMMessage):
        pass

    for entry in ({"type": "item", "message": message, "at": AT}, {"type": "seed", "message": message},
                  {"type": "item", "message": message.to_wire()}, {"type": "item", "message": Sub(role="user")},
                  {"message": message, "kind": "item"}, [("type", "item"), ("message", message)], None):
        assert loop_item(entry, 1) is None, entry
    assert loop_item({"type": "item", "message": message}, 7)[1]["seq"] == 7


# --- both storages: the one-entry fast path against batches of wire dicts --------------------------

_rounds = st.lists(st.lists(_messages(), min_size=1, max_size=3), min_size=1, max_size=4)


def _rows(conn, record):
    return conn.execute("SELECT seq, v, type, at, data, crc FROM history WHERE record_id = ? ORDER BY seq",
                        (record,)).fetchall()


async def _append_both(fast, careful, record, rounds):
    """Append each round to ``fast`` one loop-form entry at a time and to ``careful`` as one batch
    of wire dicts stamped with the fast side's times; return both sides' answers."""
    got, expected = [], []
    for messages in rounds:
        for message in messages:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    got.extend(await fast.append_history(record, [{"type": "item", "message": message}]))
                except RecordFormatError as exc:
                    got.append((type(exc), str(exc)))
        stamped = got[len(expected):]
        wires = []
        for message, answer in zip(messages, stamped):
            if isinstance(answer, dict):
                wires.append({"type": "item", "at": answer["at"], "message": message.to_wire()})
            else:  # what the fast side refused, the careful side must refuse alike (one at a time)
                if wires:
                    expected.extend(await careful.append_history(record, wires))
                    wires = []
                try:  # with an at, so prepare_append's general path decides it
                    expected.extend(await careful.append_history(record, [{"type": "item", "at": AT,
                                                                           "message": message}]))
                except RecordFormatError as exc:
                    expected.append((type(exc), str(exc)))
        if wires:
            expected.extend(await careful.append_history(record, wires))
    return got, expected


@settings(max_examples=40, deadline=None)
@given(_rounds)
def test_in_memory_one_entry_appends_store_and_return_what_a_batch_does(rounds):
    async def go():
        fast, careful = InMemoryStorage(), InMemoryStorage()  # a new record's first append included
        got, expected = await _append_both(fast, careful, "r", rounds)
        assert got == expected
        assert fast._history == careful._history
        assert await fast.list_history("r") == await careful.list_history("r")

    run(go())


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("fast")
    stores = SqliteStorage(base / "fast.db", synchronous="NORMAL"), SqliteStorage(base / "careful.db",
                                                                                 synchronous="NORMAL")
    yield stores
    for store in stores:
        store.close_sync()


_records = iter(range(10**9))


@settings(max_examples=25, deadline=None)
@given(rounds=_rounds)
def test_sqlite_rows_and_checksums_are_the_careful_paths(two_stores, rounds):
    fast, careful = two_stores
    record = f"r{next(_records)} ✓"

    async def go():
        got, expected = await _append_both(fast, careful, record, rounds)
        assert got == expected
        rows = _rows(fast.conn, record)
        assert rows == _rows(careful.conn, record)
        for seq, _, _, _, data, crc in rows:
            assert crc == row_crc("history", (record, seq), data)
        assert await fast.list_history(record) == [g for g in got if isinstance(g, dict)]

    run(go())


def test_sqlite_batch_rows_hold_their_checksums(tmp_path):
    async def go():
        store = SqliteStorage(tmp_path / "s.db")
        entries = [{"type": "item", "at": AT, "message": {"role": "user", "content": f"ü {i} \"q\"\n"}}
                   for i in range(60)]
        returned = await store.append_history("chat ✓", entries)
        assert [e["seq"] for e in returned] == list(range(1, 61))
        rows = _rows(store.conn, "chat ✓")
        assert [(seq, crc) for seq, _, _, _, _, crc in rows] == \
            [(seq, row_crc("history", ("chat ✓", seq), data)) for seq, _, _, _, data, _ in rows]
        assert await store.list_history("chat ✓") == returned
        await store.close()
        conn = sqlite3.connect(tmp_path / "s.db")
        assert conn.execute("SELECT DISTINCT typeof(data) FROM history").fetchall() == [("text",)]
        conn.close()

    run(go())
