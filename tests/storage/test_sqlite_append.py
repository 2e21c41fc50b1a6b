"""SqliteStorage's one-pass rows for plain items (storage/sqlite_append.py) are the careful path's.

``plain_rows`` either declines (None: the careful path decides, and raises) or gives exactly the
rows ``checksum.history_rows(record, prepare_append(...))`` gives and the dicts it returns, for
any batch: generated entries of every shape near the plain form (wrong keys, roles, timestamps,
non-str values, lone surrogates, control and non-BMP text) and any starting seq, including seqs
whose digit count changes inside the batch. The data is also held to the model's own
``model_dump_json``; on disk, a store written through ``append_history`` holds byte-identical
rows to one written from the careful path's rows, reads back the same, and check finds nothing.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_agent_runtime import RecordFormatError, SqliteStorage
from steerable_agent_runtime.history import RECORD_FORMAT_VERSION, validate_current
from steerable_agent_runtime.history_append import prepare_append
from steerable_agent_runtime.maintenance import check
from steerable_agent_runtime.storage.checksum import history_rows, row_crc
from steerable_agent_runtime.storage import sqlite_append
from steerable_agent_runtime.storage.schema import create_schema
from steerable_agent_runtime.storage.sqlite_append import plain_rows
from tests.helpers import run

AT = "2026-01-01T00:00:00.000000Z"

_text = st.one_of(st.text(), st.just(""), st.just("a\ud800b"), st.just("\udfff"),
                  st.just("\x00\x1f\x7f\"\\/\u2028\n\té✓\U0001f600"), st.text(alphabet="\"\\\n\x01abc", max_size=8))
_role = st.one_of(st.sampled_from(["user", "assistant", "tool", "system"]),
                  st.sampled_from(["", "User", "bot", None, 1, ("user",)]))
_at = st.one_of(st.just(AT), st.just("2026-02-30T00:00:00.000000Z"), st.just("2026-01-01T00:00:00Z"),
                st.sampled_from([None, "", 0, False, 1.5]), st.just("2026-12-31T23:59:59.999999Z"))
_MISSING = object()
_ITEM_COPY = "".join(["it", "em"])  # equal to "item", not the interned object (as json.loads gives it)


class _Text(str):
    """A str subclass: never taken as plain text."""


@st.composite
def _entry(draw):
    """An entry in the plain form or one small step away from it."""
    message = {"role": draw(_role), "content": draw(st.one_of(_text, st.just(None), st.just(["x"]), st.just(3)))}
    if draw(st.booleans()):
        message = dict(reversed(list(message.items())))  # key order must not matter
    if draw(st.integers(0, 9)) == 0:
        message[draw(st.sampled_from(["name", "toolCallId", "x"]))] = "n"
    if draw(st.integers(0, 9)) == 0:
        del message[draw(st.sampled_from(["role", "content"]))]
    entry = {"type": draw(st.sampled_from(["item", "item", "item", "seed", "Item", _ITEM_COPY, _Text("item")])),
             "message": message}
    at = draw(st.one_of(st.just(_MISSING), _at))
    if at is not _MISSING:
        entry["at"] = at
    shape = draw(st.integers(0, 14))
    if shape == 0:
        entry["v"] = RECORD_FORMAT_VERSION
    elif shape == 1:
        entry["seq"] = 1
    elif shape == 2:
        return [("type", "item"), ("message", message)]  # not a dict
    elif shape == 3:
        del entry["type"]
    return entry


def _seqs():
    near = st.sampled_from([1, 2, 8, 9, 10, 95, 99, 100, 999, 10**6 - 3, 10**12 - 2, 2**62 - 20])
    return st.one_of(near, st.integers(1, 2**62 - 20))


def _careful(record_id, entries, seq):
    """The careful path: prepare_append's rows and dicts, or the error it raises."""
    try:
        prepared = prepare_append(record_id, entries, seq)
    except (RecordFormatError, TypeError) as exc:
        return type(exc), str(exc)
    return [_plain_shape(row) for row in history_rows(record_id, prepared)], [p.wire for p in prepared]


def _plain_shape(row):
    """A history row as plain_rows gives it (without v and type, INSERT_PLAIN's constants) when it
    is a current item's row; any other row as it is (so it cannot equal a plain row)."""
    return (row[0], row[1], row[4], row[5], row[6]) if row[2:4] == (RECORD_FORMAT_VERSION, "item") else row


def test_the_plain_insert_writes_the_constants_history_rows_binds():
    # INSERT_PLAIN writes v and type as constants; they are what every plain row of the
    # careful path binds, and SQLite stores a constant as it stores the bound value.
    rows = history_rows("r", prepare_append("r", [{"type": "item", "message": {"role": "user", "content": "x"}}], 1))
    assert [row[2:4] for row in rows] == [(RECORD_FORMAT_VERSION, "item")]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE history (record_id, seq, v, type, at, data, crc)")
    conn.execute(sqlite_append.INSERT_PLAIN, ("r", 1, "a", "d", 2))
    conn.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?)", ("r", 1, RECORD_FORMAT_VERSION, "item", "a", "d", 2))
    assert conn.execute("SELECT DISTINCT typeof(v), v, typeof(type), hex(type) FROM history").fetchall() == [
        ("integer", RECORD_FORMAT_VERSION, "text", "item".encode().hex().upper())]


def _stamped(entries, rows):
    """The entries with the at the fast path stamped where they had none (None, "" or missing)."""
    out = []
    for entry, row in zip(entries, rows):
        if type(entry) is dict and not entry.get("at"):
            entry = {**entry, "at": row[2]}
        out.append(entry)
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(_entry(), min_size=1, max_size=12), _seqs(), st.sampled_from(["r", "chat ✓", "x" * 40]))
def test_plain_rows_are_the_careful_paths_or_nothing(entries, seq, record_id):
    fast = plain_rows(record_id, entries, seq)
    if fast is None:
        return  # declined: append_history takes the careful path for the whole batch
    rows, wires = fast
    assert _careful(record_id, _stamped(entries, rows), seq) == (rows, wires)
    for row, wire in zip(rows, wires):  # and the model's own bytes, not only prepare_append's
        model = validate_current(dict(wire), record_id, RECORD_FORMAT_VERSION)
        assert row[3] == model.model_dump_json(by_alias=True, exclude_none=True)
        assert row[4] == row_crc("history", (record_id, row[1]), row[3])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), _text,
                          st.sampled_from([AT, None, _MISSING])), min_size=1, max_size=60), _seqs())
def test_plain_batches_are_taken_unless_the_text_is_not_unicode(items, seq):
    entries = []
    for role, content, at in items:
        entries.append({"type": "item", "message": {"role": role, "content": content}})
        if at is not _MISSING:
            entries[-1]["at"] = at
    fast = plain_rows("r", entries, seq)
    lone = any(_lone_surrogate(content) for _, content, _ in items)
    assert (fast is None) == lone
    careful = _careful("r", _stamped(entries, fast[0]) if fast else entries, seq)
    if fast is None:
        assert careful[0] is RecordFormatError and "lone surrogate" in careful[1]
    else:
        assert careful == fast
        assert len({row[2] for row, (_, _, at) in zip(fast[0], items) if at is not AT}) <= 1  # one stamp a batch


_ESCAPED = {chr(c) for c in range(32)} | {'"', "\\"}
_clean = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters='"\\'), max_size=40)
_odd = st.sampled_from(sorted(_ESCAPED) + ["\x7f", "é", "✓", "\U0001f600", "\u2028", "\ud800", "\udfff", "/"])


@st.composite
def _near_clean(draw):
    """ASCII text JSON does not escape, perhaps with one character that is escaped, not ASCII or
    a lone surrogate put anywhere in it."""
    text = draw(_clean)
    if draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_odd) + text[at:]
    return text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), _near_clean(),
                          st.sampled_from([AT, "2026-12-31T23:59:59.999999Z", None, "", _MISSING])),
                min_size=1, max_size=30), _seqs(), st.sampled_from(["r", "chat ✓", 7]))
def test_unescaped_text_and_each_character_that_needs_escaping_are_the_careful_paths(items, seq, record_id):
    # The rows of text built unescaped, those of text with one character of each kind among
    # them (escaped, not ASCII, a lone surrogate), and the ones built again escaped after the
    # batch's text was looked at: the careful path's rows, dicts and errors, and the model's bytes.
    entries = []
    for role, content, at in items:
        entries.append({"type": "item", "message": {"role": role, "content": content}})
        if at is not _MISSING:
            entries[-1]["at"] = at
    fast = plain_rows(record_id, entries, seq)
    assert (fast is None) == any(_lone_surrogate(content) for _, content, _ in items)
    if fast is None:
        return
    assert _careful(record_id, _stamped(entries, fast[0]), seq) == fast
    for row, wire in zip(*fast):
        model = validate_current(dict(wire), "r", RECORD_FORMAT_VERSION)
        assert row[3] == model.model_dump_json(by_alias=True, exclude_none=True)
        assert row[4] == row_crc("history", (record_id, row[1]), row[3])


def test_the_characters_left_unescaped_are_the_ones_pydantic_leaves():
    # plain_rows writes a content unescaped when it holds none of the 34 characters; pydantic's
    # serializer (the careful path's bytes) must escape exactly those and no other code point.
    dump = sqlite_append._json_str
    assert set(sqlite_append._RARE_ESCAPED) | {"\n", '"'} == _ESCAPED
    assert len(sqlite_append._RARE_ESCAPED) == 32
    for char in _ESCAPED:
        assert dump(char) != b'"%s"' % char.encode()
    others = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and chr(c) not in _ESCAPED)
    assert dump(others) == b'"%s"' % others.encode()
    for i in range(0, len(others), 4096):  # and one by one, so no character's escape depends on its neighbours
        chunk = others[i:i + 4096]
        assert b"".join(map(dump, chunk)) == b"".join(b'"%s"' % c.encode() for c in chunk)


def test_the_type_is_decided_by_its_value_not_by_the_object():
    # "item" as the interned literal, as an equal str made at run time, as a str subclass, and
    # other names: the same rows as the careful path, or declined.
    for kind in ("item", _ITEM_COPY, _Text("item"), "seed", "Item", "item ", "", None, 1, ["item"]):
        entries = [{"type": "item", "at": AT, "message": {"role": "user", "content": "a"}},
                   {"type": kind, "at": AT, "message": {"role": "user", "content": "b"}}]
        fast = plain_rows("r", entries, 1)
        if kind == "item" and type(kind) is str:
            assert fast is not None and fast == _careful("r", entries, 1)
        else:
            assert fast is None, kind


def _lone_surrogate(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _stored(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT rowid, record_id, seq, v, type, at, typeof(data), hex(CAST(data AS BLOB)), crc,"
                            " typeof(record_id), hex(CAST(record_id AS BLOB)), typeof(seq), typeof(v), typeof(type),"
                            " hex(CAST(type AS BLOB)), typeof(at), typeof(crc) FROM history ORDER BY rowid").fetchall()
    finally:
        conn.close()


def test_the_stored_bytes_are_the_careful_paths_and_check_agrees(tmp_path):
    batches = [[{"type": "item", "at": AT, "message": {"role": ("user", "assistant")[i % 2],
                                                         "content": f"ü {i} \"q\"\n\\ \x01 ✓\U0001f600" * (i % 4)}}
                for i in range(n)] for n in (50, 1, 7, 50)]

    async def go():
        fast = SqliteStorage(tmp_path / "fast.db")
        returned = []
        for batch in batches:
            returned.append(await fast.append_history("chat ✓", batch))
        assert await fast.list_history("chat ✓") == [w for ws in returned for w in ws]
        await fast.close()
        careful = SqliteStorage(tmp_path / "careful.db")
        seq = 1
        for batch, got in zip(batches, returned):
            prepared = prepare_append("chat ✓", batch, seq)
            assert [p.wire for p in prepared] == got
            with careful.conn:
                careful.conn.executemany("INSERT INTO history (record_id, seq, v, type, at, data, crc)"
                                         " VALUES (?, ?, ?, ?, ?, ?, ?)", history_rows("chat ✓", prepared))
            seq += len(batch)
        await careful.close()

    run(go())
    assert _stored(tmp_path / "fast.db") == _stored(tmp_path / "careful.db")
    assert {row[6] for row in _stored(tmp_path / "fast.db")} == {"text"}
    report = check(tmp_path / "fast.db")
    assert report.findings == [] and report.integrity_ok


def _put_head(path, record_id, seq):
    """A row at ``seq`` written with raw SQL (the careful path's row), so the next append starts after it."""
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany("INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         history_rows(record_id, prepare_append(record_id, [
                             {"type": "item", "at": AT, "message": {"role": "user", "content": "head"}}], seq)))
    conn.close()


def test_rows_on_disk_are_the_careful_paths_for_every_kind_of_text(tmp_path):
    # The stored rows (bytes, types, checksums, rowids) of appends through SqliteStorage, for text
    # built unescaped, text with each character JSON escapes, text that is not ASCII, huge seqs
    # (digit counts changing inside a batch), a non-plain entry with huge ints, and a batch
    # refused for a lone surrogate, equal those of the careful path's rows written with raw SQL.
    odd = sorted(_ESCAPED) + ["\x7f", "é", "✓", "\U0001f600", "\u2028", "/", "'"]
    texts = ["plain ascii text.", "", "a", *(f"before {c} after" for c in odd), *(f"{c}" for c in odd),
             "tab\tand \\ back", "x" * 3000, "ünïcödé ✓ \U0001f600 and \"quotes\"\n"]
    batches = [[{"type": "item", "at": AT, "message": {"role": ("user", "assistant")[i % 2], "content": t}}
                for i, t in enumerate(texts)],
               [{"type": "item", "message": {"role": "user", "content": t}} for t in texts[:3]],
               [{"type": "item", "at": f"2026-01-0{1 + i % 3}T00:00:00.000000Z", "message": {"role": "tool", "content": t}}
                for i, t in enumerate(reversed(texts))],
               [{"type": "item", "message": {"role": "assistant", "content": None,
                                             "toolCalls": [{"id": "c1", "name": "f", "arguments": {"n": 10**30, "m": -2**70}}]}}],
               [{"type": "item", "at": AT, "message": {"role": "user", "content": "clean " * 40}} for _ in range(50)]]
    records = {"r": 1, "chat ✓": 10**18 - 30, "big": 2**63 - 1000}

    async def go():
        fast = SqliteStorage(tmp_path / "fast.db")
        await fast.close()
        for record_id, seq in records.items():
            if seq > 1:
                _put_head(tmp_path / "fast.db", record_id, seq - 1)
        fast = SqliteStorage(tmp_path / "fast.db")
        returned = {}
        for record_id in records:
            for batch in batches:
                returned.setdefault(record_id, []).append(await fast.append_history(record_id, batch))
            try:
                await fast.append_history(record_id, [{"type": "item", "message": {"role": "user", "content": "ok"}},
                                                      {"type": "item", "message": {"role": "user", "content": "\udc80"}}])
            except RecordFormatError as exc:
                assert "lone surrogate" in str(exc)
            else:
                raise AssertionError("a lone surrogate was appended")
        await fast.close()
        careful = SqliteStorage(tmp_path / "careful.db")
        await careful.close()
        for record_id, seq in records.items():
            if seq > 1:
                _put_head(tmp_path / "careful.db", record_id, seq - 1)
        conn = sqlite3.connect(tmp_path / "careful.db")
        for record_id, seq in records.items():
            for batch, got in zip(batches, returned[record_id]):
                # the entries given no at take the stamp the append gave them (one per batch)
                stamped = [entry if entry.get("at") else {**entry, "at": wire["at"]} for entry, wire in zip(batch, got)]
                prepared = prepare_append(record_id, stamped, seq)
                assert [p.wire for p in prepared] == got
                rows = history_rows(record_id, prepared)
                with conn:
                    conn.executemany("INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                seq += len(batch)
        conn.close()

    run(go())
    assert _stored(tmp_path / "fast.db") == _stored(tmp_path / "careful.db")
    assert {row[6] for row in _stored(tmp_path / "fast.db")} == {"text"}
    assert max(row[2] for row in _stored(tmp_path / "fast.db")) > 2**63 - 900
    report = check(tmp_path / "fast.db")  # the two records started high have their seqs from 1 missing, nothing else
    assert sorted((f.code, f.record_id) for f in report.findings) == [("record-seq-gap", "big"), ("record-seq-gap", "chat ✓")]
    assert report.integrity_ok


def test_a_batch_with_one_entry_it_declines_is_the_careful_paths_error(tmp_path):
    async def go():
        store = SqliteStorage(tmp_path / "s.db")
        await store.append_history("r", [{"type": "item", "at": AT, "message": {"role": "user", "content": "a"}}])
        bad = [{"type": "item", "at": AT, "message": {"role": "user", "content": "fine"}},
               {"type": "item", "message": {"role": "user", "content": "a\ud800b"}}]
        try:
            await store.append_history("r", bad)
        except RecordFormatError as exc:
            assert "record 'r' seq 3" in str(exc) and "lone surrogate" in str(exc)
        else:
            raise AssertionError("a lone surrogate was appended")
        assert [e["seq"] for e in await store.list_history("r")] == [1]  # nothing of the batch was written
        await store.close()

    run(go())


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 50, 63, 64, 65, 127, 128, 130, 200])
def test_insert_plain_writes_what_executemany_writes_row_by_row(tmp_path, count):
    """The multi-row statements (64, 32, ... 1 rows) store the same rows, values, types, order
    and rowids as INSERT_PLAIN run once per row; text with every kind of character included."""
    texts = ["plain", "quote \" and \\\\ back", "new\\nline", "ünïcödé ✓", "emoji 😀", ""]
    entries = [{"type": "item", "at": AT, "message": {"role": ("user", "assistant")[i % 2],
                                                       "content": texts[i % len(texts)] * (i % 4 + 1)}}
               for i in range(count)]
    rows = (plain_rows("chat ✓", entries, 5) or ([], []))[0] if entries else []
    assert len(rows) == count
    dumps = []
    for name, insert in (("one", lambda c: c.executemany(sqlite_append.INSERT_PLAIN, rows)),
                         ("multi", lambda c: sqlite_append.insert_plain(c, rows))):
        conn = sqlite3.connect(tmp_path / f"{name}.db", isolation_level=None)
        create_schema(conn)
        conn.execute("BEGIN IMMEDIATE")
        insert(conn)
        conn.execute("COMMIT")
        dumps.append(conn.execute("SELECT rowid, record_id, typeof(record_id), seq, typeof(seq), v, typeof(v),"
                                  " type, typeof(type), at, data, typeof(data), crc FROM history ORDER BY rowid").fetchall())
        conn.close()
    assert dumps[0] == dumps[1] and len(dumps[0]) == count
    assert [r[3] for r in dumps[1]] == list(range(5, 5 + count))  # in order
