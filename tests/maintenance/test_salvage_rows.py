"""salvage/rows.py: the fast validity tests of the export never accept what validation refuses."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from steerable_agent_runtime.history import is_plain_item
from steerable_agent_runtime.maintenance.salvage.rows import LIVE_VALID, data_valid, is_simple_item, parsed_valid
from steerable_agent_runtime.maintenance.salvage.shapes import simple_item
from pydantic_core import from_json

_stamps = st.one_of(st.just("2026-01-01T00:00:00.000000Z"), st.just("2026-02-30T00:00:00.000000Z"),
                    st.just("2026-01-01T00:00:00Z"), st.just("0000-01-01T00:00:00.000000Z"),
                    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z"))
_scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=5), st.sampled_from(["item", "seed", "user", "assistant", "tool", "system", "x"]),
                     _stamps)
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                     max_leaves=6)
_calls = st.one_of(_json, st.lists(st.one_of(st.dictionaries(st.text(max_size=4), _json, max_size=3), _scalars),
                                   max_size=3))
_message_keys = ["role", "content", "toolCalls", "toolCallId", "name", "tool_calls", "extra"]
_messages = st.one_of(_scalars, st.dictionaries(st.sampled_from(_message_keys), st.one_of(_scalars, _calls), max_size=6))
_entries = st.dictionaries(st.sampled_from(["v", "type", "seq", "at", "message", "extra"]),
                           st.one_of(_scalars, _messages), max_size=6)
_near = st.fixed_dictionaries({
    "v": st.sampled_from([2, 1, 3]), "type": st.sampled_from(["item", "seed"]),
    "seq": st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False)),
    "at": _stamps,
    "message": st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]),
         "content": st.one_of(st.text(), st.none(), st.integers())},
        optional={"toolCalls": _calls, "toolCallId": st.one_of(st.text(max_size=5), st.none(), st.integers()),
                  "name": st.one_of(st.text(max_size=5), st.none()), "tool_calls": _calls})})


@given(st.one_of(_entries, _near))
def test_is_simple_item_accepts_only_entries_that_validate(entry):
    data = json.dumps(entry, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if is_simple_item(entry):
        assert data_valid("history", data)
    if is_plain_item(entry):  # the shapes it replaces on the export's path stay accepted
        assert is_simple_item(entry)


@given(st.one_of(_entries, _near), st.lists(st.one_of(_scalars, st.just(2), st.just("item")), min_size=3, max_size=3))
def test_the_export_validator_is_parsed_valid(entry, indexed):
    data = json.dumps(entry, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        raw = from_json(data)
    except ValueError:
        return
    if isinstance(raw, dict) and indexed[0] == 2:  # also the rows whose columns agree
        indexed = [raw.get("v", 1), raw.get("type"), raw.get("at")]
    assert LIVE_VALID["history"](raw, data, tuple(indexed)) == parsed_valid("history", raw, data, list(indexed))


_AT = "2026-01-01T00:00:00.000000Z"


def _item(**message):
    return {"v": 2, "type": "item", "seq": 3, "at": _AT, "message": message}


def test_tool_call_items_take_the_fast_test_and_near_misses_do_not():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    accepted = [_item(role="assistant", content="", toolCalls=[call]), _item(role="tool", content="{}", toolCallId="c1", name="f"),
                _item(role="user", content="hi"), _item(role="assistant", content="x", toolCalls=[])]
    refused = [_item(role="tool", content="x", toolCallId=7), _item(role="assistant", content="x", tool_calls=[call]),
               _item(role="assistant", content="x", toolCalls=[call, "no"]), _item(role="tool", name="f"),
               _item(role="robot", content="x"), _item(role="user", content="x", extra=1),
               {**_item(role="user", content="x"), "at": "2026-02-30T00:00:00.000000Z"},
               {**_item(role="user", content="x"), "v": 1}]
    assert [is_simple_item(e) for e in accepted] == [True] * 4
    assert [is_simple_item(e) for e in refused] == [False] * 8
    assert all(data_valid("history", json.dumps(e).encode()) for e in accepted)


def test_an_assistant_turn_that_only_calls_tools_takes_the_fast_test():
    """The runtime writes a tool-call-only assistant turn with null content (llm/types.py):
    the commonest item after text ones in an agent's record, so the export's fast path."""
    call = {"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}
    entry = _item(role="assistant", content=None, toolCalls=[call])
    assert is_simple_item(entry) and data_valid("history", json.dumps(entry).encode())
    data = json.dumps(entry, separators=(",", ":")).encode()
    assert simple_item(data)["seq"] == 3


# rows.is_simple_item as it was before it tested the role's type and skipped the tool-call
# tests for a message of only role and content (commit 561ba48), with null content accepted
# since (a tool-call-only assistant turn): the reference.
def _reference_simple_item(entry):
    from steerable_agent_runtime.history import RECORD_FORMAT_VERSION
    from steerable_agent_runtime.models import CHAT_ROLES, is_stored_timestamp

    if type(entry) is not dict or len(entry) != 5:
        return False
    v, msg = entry.get("v"), entry.get("message")
    if not (type(v) is int and v == RECORD_FORMAT_VERSION and entry.get("type") == "item"
            and type(entry.get("seq")) is int and type(msg) is dict
            and msg.keys() <= frozenset({"role", "content", "toolCalls", "toolCallId", "name"})
            and msg.get("role") in CHAT_ROLES
            and (type(msg.get("content")) is str or ("content" in msg and msg["content"] is None))):
        return False
    calls = msg.get("toolCalls", [])
    if "toolCalls" in msg and (type(calls) is not list or not all(type(call) is dict for call in calls)):
        return False
    return (type(msg.get("toolCallId", "")) is str and type(msg.get("name", "")) is str
            and is_stored_timestamp(entry.get("at")))


_unhashable_roles = st.fixed_dictionaries({
    "v": st.just(2), "type": st.just("item"), "seq": st.just(1), "at": st.just(_AT),
    "message": st.fixed_dictionaries({"role": st.one_of(st.lists(st.text(max_size=2), max_size=2),
                                                        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
                                      "content": st.just("x")})})


@given(st.one_of(_entries, _near, _unhashable_roles))
def test_is_simple_item_decides_as_it_did_and_never_raises(entry):
    try:
        before = _reference_simple_item(entry)
    except TypeError:  # the reference raised on a role that is a list or an object: no role
        before = False
    assert is_simple_item(entry) is before


def test_a_role_that_is_a_list_or_an_object_is_no_plain_message_and_no_simple_item():
    from steerable_agent_runtime.models import is_plain_message

    for role in (["user"], {"a": 1}):
        assert not is_simple_item(_item(role=role, content="x"))
        assert not is_plain_message({"id": "m", "chatId": "c", "role": role, "content": "x", "createdAt": _AT})
