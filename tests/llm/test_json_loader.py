"""The stream data parser (pydantic_core's, json.loads deciding where it refuses) gives exactly
json.loads's value, and a ValueError wherever json.loads raises one."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from steerable_agent_runtime.llm.openai_compat import json_loader

loads = json_loader()

ODD = ['{"s": "\\ud800"}', '{"s": "\\udc00x\\ud83d\\ude00"}', '[' * 300 + ']' * 300, '{"a":1,"a":2}',
       '{"n": 123456789012345678901234567890}', '{"f": 1e400}', '{"f": -Infinity}', '{"f": 5e-324}',
       '{"f": -0.0}', '{"s":"\\u0000"}', ' {} ', '"x"', '123', 'null']
BAD = ['{"s": "a\tb"}', '{} x', 'tru', '{"a":01}', '{"a":1.}', '{"a":.5}', '{"a":1,}', '[1,]', '\ufeff{}', '',
       '{"a":1', "{'a': 1}"]


@pytest.mark.parametrize("text", ODD)
def test_values_equal_json_loads_even_where_pydantic_core_refuses(text):
    assert repr(loads(text)) == repr(json.loads(text))


def test_nan_is_read_like_json_loads():
    assert math.isnan(loads('{"f": NaN}')["f"])


@pytest.mark.parametrize("text", BAD)
def test_bad_data_raises_value_error_like_json_loads(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(JSON, st.booleans())
def test_any_json_round_trips_like_json_loads(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert repr(loads(text)) == repr(json.loads(text))
