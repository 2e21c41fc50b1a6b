"""The dedup key: two calls share one exactly when their names and canonical JSON arguments match."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.loop.toolbatch import dedup_key
from steerable_agent_runtime.models import ToolCall

_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(-2, 2), st.sampled_from(["", "1", "a", "\x00"]),
                    st.lists(st.integers(0, 1), max_size=2), st.dictionaries(st.sampled_from("xy"), st.integers(0, 1)))
_arguments = st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, max_size=3)


@given(st.sampled_from(["read", "write"]), _arguments, st.sampled_from(["read", "write"]), _arguments)
def test_keys_are_equal_exactly_when_the_canonical_json_is(name_a, args_a, name_b, args_b):
    a = ToolCall(id="1", name=name_a, arguments=args_a)
    b = ToolCall(id="2", name=name_b, arguments=args_b)
    same = name_a == name_b and json.dumps(args_a, sort_keys=True) == json.dumps(args_b, sort_keys=True)
    assert (dedup_key(a) == dedup_key(b)) is same
    if same:
        assert hash(dedup_key(a)) == hash(dedup_key(b))
