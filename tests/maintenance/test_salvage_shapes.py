"""salvage/shapes.py: the one-call validators of the export's common rows accept exactly what
from_json plus rows.is_simple_item / models.is_plain_message accept (a repeated key: never
more), with the values the loops compare with the row's columns."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import SchemaValidator, core_schema, from_json

from steerable_agent_runtime.maintenance.salvage.rows import is_simple_item
from steerable_agent_runtime.maintenance.salvage.shapes import STORED_TIMESTAMP, plain_message, simple_item
from steerable_agent_runtime.models import is_plain_message, is_stored_timestamp

from .test_salvage_rows import _entries, _near, _scalars, _stamps

_PLAIN_ID = set(" !#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~")
_stamp_ok = SchemaValidator(core_schema.str_schema(pattern=STORED_TIMESTAMP, strict=True)).validate_python


def _accepts(pattern_check: Any, value: str) -> bool:
    try:
        pattern_check(value)
    except ValueError:
        return False
    return True


def _result(validate: Any, data: bytes) -> Any:
    try:
        return validate(data)
    except ValueError:
        return None


def _decoded(data: bytes) -> Any:
    try:
        return from_json(data, cache_strings="keys")
    except ValueError:
        return None


# Years around every leap-year rule and the ends of the range, every month and day near the edges.
_YEARS = [*range(0, 13), *range(96, 105), *range(396, 405), *range(1896, 1905), *range(1996, 2005), 2100, 2400,
          *range(9995, 10000)]


def test_the_stamp_pattern_is_is_stored_timestamp_on_every_date_of_edge_years():
    for year in _YEARS:
        for month in range(14):
            for day in range(33):
                text = f"{year:04d}-{month:02d}-{day:02d}T12:34:56.123456Z"
                assert _accepts(_stamp_ok, text) is is_stored_timestamp(text), text


_times = st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z")


@given(st.one_of(_times, _times.map(lambda t: t[:-1] + "z"), _times.map(lambda t: t + "\n"), _times.map(lambda t: t[1:]),
                 st.text(max_size=30), _stamps, st.from_regex(r"\A[0-9Tt:.Z\-٣]{26,28}\Z")))
def test_the_stamp_pattern_is_is_stored_timestamp(text):
    assert _accepts(_stamp_ok, text) is is_stored_timestamp(text)


def _dump(obj: Any, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@given(st.one_of(_entries, _near), st.booleans())
def test_simple_item_accepts_exactly_what_is_simple_item_accepts(entry, ascii_only):
    data = _dump(entry, ascii_only)
    raw, got = _decoded(data), _result(simple_item, data)
    assert (got is not None) is (raw is not None and is_simple_item(raw))
    if got is not None:
        assert (got["v"], got["seq"], got["at"]) == (raw["v"], raw["seq"], raw["at"])


_messages = st.fixed_dictionaries({
    "id": st.one_of(st.text(max_size=6), st.sampled_from(['m"1', "m\\1", "m-é", "m\x7f", "m-1"]), _scalars),
    "chatId": st.one_of(st.text(max_size=4), _scalars), "role": st.sampled_from(["user", "assistant", "x", None]),
    "content": st.one_of(st.text(max_size=4), st.none(), st.integers()), "createdAt": _stamps},
    optional={"extra": _scalars})


def _plain_message(raw: Any) -> bool:
    return is_plain_message(raw) and set(raw["id"]) <= _PLAIN_ID


@given(st.one_of(_messages, st.dictionaries(st.sampled_from(["id", "chatId", "role", "content", "createdAt"]), _scalars)),
       st.booleans())
def test_plain_message_accepts_exactly_plain_messages_with_a_plain_id(message, ascii_only):
    data = _dump(message, ascii_only)
    raw, got = _decoded(data), _result(plain_message, data)
    assert (got is not None) is (raw is not None and _plain_message(raw))
    if got is not None:
        assert (got["id"], got["chatId"], got["createdAt"]) == (raw["id"], raw["chatId"], raw["createdAt"])


_ITEM = '{"v":2,"type":"item","seq":4,"at":"2026-01-01T00:00:00.000000Z","message":{"role":"user","content":"hi"}}'
_MESSAGE = '{"id":"m-1","chatId":"c","role":"user","content":"hi","createdAt":"2026-01-01T00:00:00.000000Z"}'
_edits = st.sampled_from([  # (text to find, text to put before it): a key repeated, a value changed or spliced
    ('"v":2', '"v":"2",'), ('"v":2', '"v":3,'), ('"type"', '"type":"seed",'), ('"seq":4', '"seq":4.0,'),
    ('"seq":4', '"seq":5,'), ('"at"', '"at":"2026-02-30T00:00:00.000000Z",'), ('"role"', '"role":"robot",'),
    ('"content"', '"content":null,'), ('"message"', '"message":1,'), ('"id"', '"id":"m\\"2",'), ('"id"', '"id":7,'),
    ('"chatId"', '"chatId":"d",'), ('"createdAt"', '"createdAt":"x",'), ('"content"', '"toolCalls":[1],'),
    ('"content"', '"toolCalls":[{"a":NaN}],'), ('"content"', '"name":"f","name":3,'), ('"role"', '"role":"tool",'),
    ('"content"', '"content":"\\ud800",'), ('"content"', ' '), ('"content"', '\n')])


@st.composite
def _edited(draw: Any, text: str) -> bytes:
    for _ in range(draw(st.integers(0, 3))):
        find, put = draw(_edits)
        at = text.find(find)
        if at >= 0:
            text = text[:at] + put + text[at:]
    data = text.encode()
    how = draw(st.sampled_from(["as is", "as is", "cut", "trailing", "not utf-8", "spaced"]))
    if how == "cut":
        return data[:draw(st.integers(0, len(data)))]
    if how == "trailing":
        return data + draw(st.sampled_from([b" ", b"x", b"}", b"\n", b"\x00"]))
    if how == "not utf-8":
        return data.replace(b"hi", b"h\xff")
    if how == "spaced":
        return data.replace(b":", b" : ")
    return data


@given(_edited(_ITEM))
def test_simple_item_never_accepts_more_than_is_simple_item_even_with_repeated_keys(data):
    got, raw = _result(simple_item, data), _decoded(data)
    if got is not None:
        assert raw is not None and is_simple_item(raw)
        assert (got["v"], got["seq"], got["at"]) == (raw["v"], raw["seq"], raw["at"])


@given(_edited(_MESSAGE))
def test_plain_message_never_accepts_more_than_is_plain_message_even_with_repeated_keys(data):
    got, raw = _result(plain_message, data), _decoded(data)
    if got is not None:
        assert raw is not None and _plain_message(raw)
        assert (got["id"], got["chatId"], got["createdAt"]) == (raw["id"], raw["chatId"], raw["createdAt"])


def test_the_common_shapes_are_accepted_and_a_repeated_key_takes_its_last_value():
    assert simple_item(_ITEM.encode())["seq"] == 4
    assert simple_item(_ITEM.replace('"seq":4', '"seq":3,"seq":4').encode())["seq"] == 4
    assert plain_message(_MESSAGE.encode())["id"] == "m-1"
    for refused in (_ITEM.replace('"v":2', '"v":2.0'), _ITEM.replace('"v":2', '"v":true'), _ITEM[:-1] + ',"x":1}',
                    _ITEM.replace('"seq":4', '"seq":4,"seq":"4"')):
        assert _result(simple_item, refused.encode()) is None
    assert _result(plain_message, _MESSAGE.replace('"m-1"', '"m\\"1"').encode()) is None  # an id needing escapes
    for value in (None, 5):
        try:
            simple_item(value)
        except (ValueError, TypeError):
            pass
        else:
            raise AssertionError(value)
