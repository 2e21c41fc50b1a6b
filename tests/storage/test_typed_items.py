"""Items whose message is an LLMMessage instance (what the loop appends) are stored exactly as the
same item with ``message.to_wire()``: the same bytes, the same returned dict, the same errors,
also for instances changed after construction (the fast path must never accept what the dict
path refuses)."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from steerable_agent_runtime import InMemoryStorage, LLMMessage, RecordFormatError, SqliteStorage, parse_entry
from steerable_agent_runtime.history_append import is_sound_message, prepare_append
from tests.helpers import run

AT = "2026-01-01T00:00:00.000000Z"

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=6),
                     st.floats(allow_nan=True, allow_infinity=True), st.just("a\ud800b"), st.just("\x00\n\"\\é✓"))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                     max_leaves=8)
_parts = st.lists(st.dictionaries(st.sampled_from(["type", "text", "image_url", "x"]), _json, max_size=3), max_size=2)
_calls = st.lists(st.fixed_dictionaries({"id": st.text(max_size=4), "name": st.text(max_size=6),
                                         "arguments": st.dictionaries(st.text(max_size=4), _json, max_size=3)}),
                  min_size=1, max_size=2)


@st.composite
def _messages(draw):
    role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
    content = draw(st.one_of(st.none(), st.text(), st.just("a\ud800b"), _parts))
    fields = {"role": role, "content": content}
    if draw(st.booleans()):
        fields["tool_calls"] = draw(_calls)
    if draw(st.booleans()):
        fields["tool_call_id"] = draw(st.text(max_size=4))
        fields["name"] = draw(st.one_of(st.none(), st.text(max_size=4)))
    return LLMMessage(**fields)


# Reassignments that validation would refuse, or values that are not JSON.
_bad_values = {
    "role": st.sampled_from(["robot", 5, None]),
    "content": st.sampled_from([5, [1], [{"k": object()}], [{1: "x"}], {"a": 1}, b"x"]),
    "tool_calls": st.sampled_from(["x", [1], [{2: "k"}], [{"a": {1, 2}}], ({"id": "c"},), [{"a": object()}]]),
    "tool_call_id": st.sampled_from([5, b"x", ["c"]]),
    "name": st.sampled_from([5, 1.5]),
}


@st.composite
def _changed(draw):
    message = draw(_messages())
    field = draw(st.sampled_from(sorted(_bad_values)))
    setattr(message, field, draw(_bad_values[field]))  # no validate_assignment: accepted as is
    return message


def _outcome(entry, seq):
    try:
        prepared = prepare_append("r", [entry], seq)[0]
    except (RecordFormatError, PydanticSerializationError) as exc:
        return type(exc), str(exc)
    return prepared.data, prepared.wire, prepared.type, prepared.at


def _reference(message, seq):
    try:
        wire = message.to_wire()
    except PydanticSerializationError:
        return None  # the instance path must then refuse it with a RecordFormatError
    return _outcome({"type": "item", "at": AT, "message": wire}, seq)


def _check_same(message, seq):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns when it serialises a reassigned field
        expected = _reference(message, seq)
        got = _outcome({"type": "item", "at": AT, "message": message}, seq)
    if expected is None:
        assert got[0] is RecordFormatError and "does not serialise as JSON" in got[1]
    else:
        assert got == expected
    return got


@settings(max_examples=150, deadline=None)
@given(_messages(), st.integers(1, 2**63 - 1))
def test_an_instance_is_stored_as_its_wire_dict(message, seq):
    got = _check_same(message, seq)
    if isinstance(got[0], str):
        assert parse_entry(json.loads(got[0])).message.to_json() == message.to_json()


@settings(max_examples=150, deadline=None)
@given(_changed(), st.integers(1, 100))
def test_a_changed_instance_fails_or_stores_exactly_like_its_wire_dict(message, seq):
    _check_same(message, seq)


def _check_same_unstamped(message, seq):
    """The loop's own form, {"type": "item", "message": instance} (no at: the append stamps it),
    against the wire dict stamped with the same time."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _outcome({"type": "item", "message": message}, seq)
        at = got[3] if isinstance(got[0], str) else AT
        try:
            wire = message.to_wire()
        except PydanticSerializationError:
            wire = None
        expected = None if wire is None else _outcome({"type": "item", "at": at, "message": wire}, seq)
    if expected is None:
        assert got[0] is RecordFormatError and "does not serialise as JSON" in got[1]
    else:
        assert got == expected


@settings(max_examples=150, deadline=None)
@given(_messages(), st.integers(1, 2**63 - 1))
def test_an_unstamped_instance_is_stored_as_its_wire_dict(message, seq):
    _check_same_unstamped(message, seq)


@settings(max_examples=150, deadline=None)
@given(_changed(), st.integers(1, 100))
def test_a_changed_unstamped_instance_fails_or_stores_exactly_like_its_wire_dict(message, seq):
    _check_same_unstamped(message, seq)


def test_the_fast_test_refuses_what_validation_would():
    sound = LLMMessage(role="assistant", content="x", tool_calls=[{"id": "c", "name": "t", "arguments": {}}])
    assert is_sound_message(sound)
    for field, value in (("role", "robot"), ("content", 5), ("content", [1]), ("tool_calls", [{1: 2}]),
                         ("tool_call_id", 3), ("name", b"n")):
        changed = sound.model_copy()
        setattr(changed, field, value)
        assert not is_sound_message(changed), (field, value)

    deleted = sound.model_copy()
    del deleted.__dict__["name"]  # a field gone from the instance
    assert not is_sound_message(deleted)

    class Sub(LLMMessage):
        pass

    assert not is_sound_message(Sub(role="user", content="x"))
    assert not is_sound_message({"role": "user", "content": "x"})


def test_every_other_entry_field_keeps_its_checks():
    message = LLMMessage(role="user", content="hi")
    with pytest.raises(RecordFormatError, match="extra"):
        prepare_append("r", [{"type": "item", "message": message, "extra": 1}], 1)
    with pytest.raises(RecordFormatError):
        prepare_append("r", [{"type": "seed", "message": message}], 1)
    stamped = prepare_append("r", [{"type": "item", "message": message, "at": "2026-01-01T01:00:00+01:00"}], 1)[0]
    assert stamped.at == AT  # a timestamp not in stored form is normalised, as for a dict


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_storages_store_the_same_bytes_for_an_instance_and_its_wire_dict(backend, tmp_path):
    messages = [LLMMessage(role="user", content="hi ✓"),
                LLMMessage(role="assistant", content=None,
                           tool_calls=[{"id": "c1", "name": "read", "arguments": {"path": "a", "n": 1.5}}]),
                LLMMessage(role="tool", tool_call_id="c1", name="read", content='{"success":true}')]

    async def go():
        stores = [InMemoryStorage(), InMemoryStorage()] if backend == "memory" else [
            SqliteStorage(tmp_path / "a.db"), SqliteStorage(tmp_path / "b.db")]
        typed = await stores[0].append_history("r", [{"type": "item", "at": AT, "message": m} for m in messages])
        wired = await stores[1].append_history("r", [{"type": "item", "at": AT, "message": m.to_wire()}
                                                     for m in messages])
        assert typed == wired
        assert await stores[0].list_history("r") == await stores[1].list_history("r")
        for store in stores:
            await store.close()

    run(go())
