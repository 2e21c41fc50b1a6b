"""The loop's events made without LoopEvent's __init__ (rounds.py, toolbatch.single) equal the constructed ones."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from steerable_agent_runtime.loop import LoopEvent
from steerable_agent_runtime.loop.events import EVENT_KINDS


def fast(kind, data):
    """What the hot path does (rounds.py, toolbatch.ToolBatch.single)."""
    event = object.__new__(LoopEvent)
    event.kind = kind
    event.data = data
    return event


def test_the_class_is_still_two_slots_and_a_generated_init():
    assert [f.name for f in dataclasses.fields(LoopEvent)] == ["kind", "data"]
    assert LoopEvent.__slots__ == ("kind", "data")
    assert not hasattr(LoopEvent, "__post_init__")
    assert LoopEvent.__new__ is object.__new__
    init = LoopEvent.__init__.__code__  # the dataclass's own: generated, self.kind = kind; self.data = data
    assert init.co_filename == "<string>" and init.co_varnames[:3] == ("self", "kind", "data")
    assert init.co_names == ("kind", "data")  # it stores the two slots and nothing else


values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                      max_leaves=8)


@given(st.sampled_from(sorted(EVENT_KINDS)), st.dictionaries(st.text(), values, max_size=5))
def test_fast_event_equals_constructed(kind, data):
    made, built = fast(kind, data), LoopEvent(kind, data)
    assert made == built and built == made
    assert repr(made) == repr(built)
    assert made.to_wire() == built.to_wire()
    assert made.data is data and made.kind is kind
    assert dataclasses.astuple(made) == dataclasses.astuple(built)
    assert dataclasses.replace(made) == built
    assert not hasattr(made, "__dict__")
