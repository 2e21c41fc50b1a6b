"""The round's flush of a message it has just built (InMemoryStorage.append_built_now ->
history_append.built_snapshot) stores what append_items_now stores for that message.

- ``built_snapshot`` of the values ``tool_message`` / ``flat_calling_message`` were given equals
  ``item_snapshot`` of the message they built (or both are None): generated texts with lone
  surrogates and non-ASCII, flat and nested call arguments, str subclasses (which the builders
  hand to validation, and the round does not take as built);
- ``flat_calling_message`` is ``calling_message`` whenever it builds a message;
- ``append_built_now`` appends exactly the entry ``append_items_now`` appends, or nothing;
- a subclass overriding ``append_history`` or ``append_items_now`` loses it, unless it overrides it too;
- a whole loop run records the same entries with and without it.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from steerable_agent_runtime import InMemoryStorage, resume_transcript
from steerable_agent_runtime.history_append import built_snapshot, item_snapshot, snapshot_text
from steerable_agent_runtime.llm import ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.loop.messages import calling_message, flat_calling_message, tool_message
from steerable_agent_runtime.models import ToolCall

from tests.helpers import run
from tests.loop.kit import USER, drain, make_router
from tests.loop.test_messages import Text, flat, no_nan, texts

AT = "2026-01-01T00:00:00.000000Z"
maybe_text = st.one_of(st.none(), texts, texts.map(Text))


@settings(max_examples=400, deadline=None)
@given(texts, texts, texts, st.integers(1, 2**40))
def test_a_built_tool_message_snapshots_as_item_snapshot_does(call_id, name, content, seq):
    if not (type(call_id) is str and type(name) is str and type(content) is str):
        return  # the round takes only exact strs as built (a subclass goes to validation)
    message = tool_message(call_id, name, content)
    assert built_snapshot(seq, AT, "tool", content, call_id, name, None) == item_snapshot(message, seq, AT)


calls_made = st.lists(st.builds(ToolCall, id=st.one_of(texts, st.sampled_from(["c1", "call_0"])),
                                name=st.one_of(texts, st.just("read_note")),
                                arguments=st.dictionaries(st.one_of(texts, st.sampled_from(["name", "a"])),
                                                          st.one_of(flat, flat, no_nan), max_size=3)),
                      min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(maybe_text, calls_made, st.integers(1, 2**40))
def test_a_built_reply_snapshots_as_item_snapshot_does(content, calls, seq):
    message = flat_calling_message(content, calls)
    if message is None:  # not flat: the round flushes it the general way
        return
    assert message == calling_message(content, calls)
    assert message.__dict__ == calling_message(content, calls).__dict__
    fields = message.__dict__
    built = built_snapshot(seq, AT, "assistant", fields["content"], None, None, fields["tool_calls"])
    assert built == item_snapshot(message, seq, AT)
    if built is not None:
        assert all(type(part) in (int, str, type(None)) for part in built)
        snapshot_text(built)


def test_flat_calling_message_declines_what_is_not_flat():
    flat_call = ToolCall(id="c1", name="f", arguments={"a": 1})
    assert flat_calling_message("x", [flat_call]) is not None
    assert flat_calling_message(None, [flat_call]) is not None
    assert flat_calling_message(Text("x"), [flat_call]) is None  # a str subclass: validation decides
    assert flat_calling_message("x", [ToolCall(id="c1", name="f", arguments={"a": [1]})]) is None
    assert flat_calling_message("x", [ToolCall(id="c1", name="f", arguments={"\u00e9": 1})]) is None
    assert flat_calling_message("x", [flat_call, ToolCall(id="c2", name="f", arguments={"a": 1.5})]) is None


def test_append_built_now_appends_what_append_items_now_appends():
    pairs = [("tool", "ok \u00e9", "c1", "read_note", None), ("tool", "a\ud800b", "c1", "f", None),
             ("tool", "ok", "c\ud800", "f", None), ("tool", "ok", "c1", "f\udfff", None),
             ("assistant", "checking", None, None, [{"id": "c1", "name": "f", "arguments": {"a": "x\ud800"}}]),
             ("assistant", None, None, None, [{"id": "c1", "name": "f", "arguments": {"a": 1, "b": None}}]),
             ("assistant", "\u00e9", None, None, [{"id": "c\u00e9", "name": "f", "arguments": {}}])]
    for role, content, call_id, name, calls in pairs:
        message = (tool_message(call_id, name, content) if role == "tool"
                   else flat_calling_message(content, [ToolCall(**c) for c in calls]))
        fast, items = InMemoryStorage(), InMemoryStorage()
        fields = message.__dict__
        taken = fast.append_built_now("r", role, fields["content"], fields["tool_call_id"], fields["name"],
                                      fields["tool_calls"])
        assert taken == items.append_items_now("r", [message])
        if not taken:
            assert "r" not in fast._history  # nothing appended
            continue
        assert [e[:1] + e[2:] for e in fast._history["r"]] == [e[:1] + e[2:] for e in items._history["r"]]
        entries, expected = run(fast.list_history("r")), run(items.list_history("r"))
        assert [{k: v for k, v in e.items() if k != "at"} for e in entries] == \
            [{k: v for k, v in e.items() if k != "at"} for e in expected]
        assert fast.append_built_now("r", role, fields["content"], fields["tool_call_id"], fields["name"],
                                     fields["tool_calls"])
        assert [e[0] for e in fast._history["r"]] == [1, 2]  # the next seq


def test_a_subclass_overriding_an_append_loses_append_built_now_unless_it_overrides_it_too():
    class Plain(InMemoryStorage):
        pass

    class History(InMemoryStorage):
        async def append_history(self, record_id, entries):
            return await super().append_history(record_id, entries)

    class Items(InMemoryStorage):
        def append_items_now(self, record_id, messages, *, expect_seq=None):
            return super().append_items_now(record_id, messages, expect_seq=expect_seq)

    class Both(Items):
        def append_built_now(self, *args):
            return super().append_built_now(*args)

    class Below(History):
        pass

    assert Plain.append_built_now is InMemoryStorage.append_built_now
    assert History.append_built_now is None and History.append_items_now is None
    assert Items.append_built_now is None and Items.append_items_now is not None
    assert Both.append_built_now is not None
    assert Below.append_built_now is None


class NotBuilt(InMemoryStorage):
    """InMemoryStorage without append_built_now: the round flushes through append_items_now."""

    append_built_now = None


def _turn(storage, script):
    router, _ = make_router()
    loop = CoreLoop(ScriptedProvider(list(script)), router, storage=storage)
    return asyncio.run(drain(loop.run(USER, chat_id="c1")))


def test_a_loop_run_records_the_same_entries_with_and_without_append_built_now():
    script = [ScriptedResponse(text="looking \u00e9", tool_calls=[{"id": "a", "name": "read_note",
                                                                   "arguments": {"name": "x"}}]),
              ScriptedResponse(tool_calls=[{"id": "b", "name": "read_note", "arguments": {"name": "y\u00e9"}}]),
              ScriptedResponse(text="bad \ud800", tool_calls=[{"id": "c", "name": "read_note",
                                                               "arguments": {"name": "z"}}]),
              ScriptedResponse(tool_calls=[{"id": "d", "name": "read_note", "arguments": {"name": ["nested"]}}]),
              ScriptedResponse(tool_calls=[{"id": "e", "name": "read_note", "arguments": {"name": "p"}},
                                           {"id": "f", "name": "read_note", "arguments": {"name": "q"}}]),
              ScriptedResponse(text="done")]
    fast, other = InMemoryStorage(), NotBuilt()
    events = _turn(fast, script)
    assert [e.kind for e in events] == [e.kind for e in _turn(other, script)]
    without = [{k: v for k, v in e.items() if k != "at"} for e in run(fast.list_history("c1"))]
    assert without == [{k: v for k, v in e.items() if k != "at"} for e in run(other.list_history("c1"))]
    assert len(without) == 1 + 5 * 2 + 1 + 1  # the user, each reply and each result, the answer
    assert run(resume_transcript(fast, "c1")) == run(resume_transcript(other, "c1"))
