"""The loop's own messages (loop/messages.py) are the messages LLMMessage's validator builds.

For generated values (text with lone surrogates and non-ASCII, None, str subclasses, values of
other types, call dicts with keys that are not str) ``tool_message`` / ``assistant_message``
return a message indistinguishable from ``LLMMessage(...)`` of the same keyword arguments, or
raise the same error; ``wire_call`` returns what ``ToolCall.to_wire()`` returns.
"""

from __future__ import annotations

import copy
import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from steerable_agent_runtime.loop import messages
from steerable_agent_runtime.loop.messages import (CONSTRUCTIBLE, assistant_message, calling_message, tool_message,
                                                   wire_call)
from steerable_agent_runtime.models import LLMMessage, ToolCall


class Text(str):
    """A str subclass (validation turns it into a str)."""


texts = st.text(alphabet=st.characters(codec=None), max_size=12)  # surrogates included
maybe_text = st.one_of(st.none(), texts, texts.map(Text), st.integers(), st.just(["part"]))
flat = st.one_of(st.none(), st.booleans(), st.integers(), texts)
json_values = st.recursive(flat | st.floats(), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(texts, inner, max_size=3), max_leaves=6)
no_nan = st.recursive(flat | st.floats(allow_nan=False), lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(texts, inner, max_size=3), max_leaves=6)  # (NaN != NaN: == would fail)


def _same(built, validated):
    assert type(built) is type(validated) is LLMMessage
    assert built.__dict__ == validated.__dict__
    assert list(built.__dict__) == list(validated.__dict__)  # the model's order
    assert built.model_fields_set == validated.model_fields_set
    assert type(built.__pydantic_fields_set__) is set and built.__pydantic_fields_set__ is not validated.__pydantic_fields_set__
    assert built.__pydantic_extra__ == validated.__pydantic_extra__
    assert built.__pydantic_private__ == validated.__pydantic_private__
    assert built == validated and validated == built
    assert repr(built) == repr(validated)
    # a lone surrogate in a nested key: pydantic's JSON-mode dump refuses both alike
    assert _dumped(built.to_wire) == _dumped(validated.to_wire)
    try:
        expected = validated.model_dump_json()
    except ValueError:  # a lone surrogate: the serializer refuses both alike
        with pytest.raises(type(_raised(validated.model_dump_json))):
            built.model_dump_json()
    else:
        assert built.model_dump_json() == expected
    assert copy.deepcopy(built) == validated and pickle.loads(pickle.dumps(built)) == validated


def _dumped(fn):
    """``fn()``, or the type of what it raised."""
    try:
        return fn()
    except (ValueError, UnicodeEncodeError) as exc:
        return type(exc)


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


def _outcome(fn):
    try:
        return fn(), None
    except ValidationError as exc:
        return None, [(e["type"], e["loc"]) for e in exc.errors()]


def test_llm_message_is_constructible():
    assert CONSTRUCTIBLE  # else every message takes the validator (still correct, only slower)


@settings(max_examples=400, deadline=None)
@given(maybe_text, maybe_text, maybe_text)
def test_tool_message_is_the_validated_message(call_id, name, content):
    built, built_error = _outcome(lambda: tool_message(call_id, name, content))
    validated, error = _outcome(lambda: LLMMessage(role="tool", tool_call_id=call_id, name=name, content=content))
    assert built_error == error
    if error is None:
        _same(built, validated)


calls = st.lists(st.one_of(st.dictionaries(st.one_of(texts, st.integers()), no_nan, max_size=3),
                           st.integers(), st.none()), max_size=3)


@settings(max_examples=400, deadline=None)
@given(maybe_text, st.one_of(st.none(), calls, st.just(("not", "a list"))))
def test_assistant_message_is_the_validated_message(content, tool_calls):
    built, built_error = _outcome(lambda: assistant_message(content, tool_calls))
    if tool_calls is None:
        validated, error = _outcome(lambda: LLMMessage(role="assistant", content=content))
    else:
        validated, error = _outcome(lambda: LLMMessage(role="assistant", content=content, tool_calls=tool_calls))
    assert built_error == error
    if error is None:
        _same(built, validated)


def test_a_constructed_message_is_a_message_like_any_other():
    built = assistant_message("checking", [{"id": "c1", "name": "read", "arguments": {}}])
    built.content = "changed"  # assignment works as on a validated message (fields_set is its own)
    assert built.content == "changed" and built.model_fields_set == {"role", "content", "tool_calls"}
    assert assistant_message("x").model_fields_set == {"role", "content"}
    assert LLMMessage.model_validate(built.to_wire()) == built


@settings(max_examples=400, deadline=None)
@given(texts, texts, st.dictionaries(texts, st.one_of(flat, json_values), max_size=4))
def test_wire_call_is_to_wire(call_id, name, arguments):
    call = ToolCall(id=call_id, name=name, arguments=arguments)
    try:
        expected = call.to_wire()
    except UnicodeEncodeError:  # a nested key with a lone surrogate: to_wire raises, and so does wire_call
        with pytest.raises(UnicodeEncodeError):
            wire_call(call)
        return
    wire = wire_call(call)
    assert _nan_free(wire) == _nan_free(expected)
    assert wire["arguments"] is not call.arguments  # a fresh dict, as to_wire's


def _nan_free(value):
    """``value`` with NaN written as a marker (NaN != NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_free(v) for v in value]
    return value


tool_calls_made = st.lists(st.builds(ToolCall, id=texts, name=texts,
                                     arguments=st.dictionaries(texts, st.one_of(flat, no_nan), max_size=3)),
                           min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(maybe_text, tool_calls_made)
def test_calling_message_is_the_validated_message_of_the_calls_wire_dicts(content, calls_made):
    try:
        wires = [c.to_wire() for c in calls_made]
    except UnicodeEncodeError:  # a nested key with a lone surrogate: to_wire raises, and so does the message
        with pytest.raises(UnicodeEncodeError):
            calling_message(content, calls_made)
        return
    built, built_error = _outcome(lambda: calling_message(content, calls_made))
    validated, error = _outcome(lambda: LLMMessage(role="assistant", content=content, tool_calls=wires))
    assert built_error == error
    if error is None:
        _same(built, validated)
        assert all(w["arguments"] is not c.arguments for w, c in zip(built.tool_calls, calls_made))  # fresh dicts


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns when it dumps the int id
def test_calling_message_of_unusual_calls_is_that_of_their_wire_dicts():
    odd = ToolCall.model_construct(id=1, name="n", arguments={"a": 1.5})
    flat_call = ToolCall(id="c", name="n", arguments={"a": "x"})

    class Call(ToolCall):
        def to_wire(self):
            return {"id": "custom", "name": "n", "arguments": {}}
    for made in ([odd], [flat_call, odd], [Call(id="c", name="n")], [flat_call, Call(id="d", name="n")]):
        _same(calling_message("x", made), LLMMessage(role="assistant", content="x", tool_calls=[c.to_wire() for c in made]))


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns when it dumps the int id
def test_wire_call_of_an_unusual_call_is_to_wire():
    odd = ToolCall.model_construct(id=1, name="n", arguments={"a": 1.5})  # not validated: to_wire decides
    assert wire_call(odd) == odd.to_wire()
    floats = ToolCall(id="c", name="n", arguments={"inf": math.inf, "x": 1.0})
    assert wire_call(floats) == floats.to_wire() == {"id": "c", "name": "n", "arguments": {"inf": None, "x": 1.0}}

    class Call(ToolCall):
        def to_wire(self):
            return {"custom": True}
    assert wire_call(Call(id="c", name="n")) == {"custom": True}


def test_without_constructible_every_message_is_validated(monkeypatch):
    monkeypatch.setattr(messages, "CONSTRUCTIBLE", False)
    calls_made = []
    real = LLMMessage.__init__

    def spy(self, **kwargs):
        calls_made.append(kwargs)
        real(self, **kwargs)
    monkeypatch.setattr(LLMMessage, "__init__", spy)
    tool_message("c", "n", "x")
    assistant_message("x")
    assistant_message(None, [{"id": "c"}])
    calling_message("x", [ToolCall(id="c", name="n")])
    assert len(calls_made) == 4
