"""Tool-call assembly, property-tested: however the wire fragments and interleaves the arguments,
each call comes out once, whole, with exactly the arguments that were sent."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.llm.openai_compat import _ChatStream
from steerable_agent_runtime.llm.openai_responses import _ResponsesStream

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8)
ARGS = st.dictionaries(st.text(min_size=1, max_size=6), JSON_VALUES, max_size=4)


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)]) if text[a:b]]


@given(st.lists(ARGS, min_size=1, max_size=4), st.lists(st.integers(0, 10_000), max_size=20), st.randoms())
def test_chat_completions_fragments_in_any_split_and_interleaving(calls, cuts, rnd):
    queues = [[{"index": i, "id": f"call_{i}", "type": "function", "function": {"name": f"tool{i}", "arguments": ""}}]
              + [{"index": i, "function": {"arguments": p}} for p in pieces(json.dumps(args), cuts)]
              for i, args in enumerate(calls)]
    state = _ChatStream("p", "http://127.0.0.1/x")
    while any(queues):  # interleave the calls' fragments; each call's own order is kept
        queue = rnd.choice([q for q in queues if q])
        state.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [queue.pop(0)]}}]}))
    state.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    state.done = True
    *call_chunks, last = state.end()
    assert [(c.tool_call.id, c.tool_call.name, c.tool_call.arguments) for c in call_chunks] == [
        (f"call_{i}", f"tool{i}", args) for i, args in enumerate(calls)]
    assert last.finish_reason == "tool_calls"


@given(st.lists(ARGS, min_size=1, max_size=4), st.lists(st.integers(0, 10_000), max_size=20))
def test_responses_argument_deltas_in_any_split(calls, cuts):
    state = _ResponsesStream("p", "http://127.0.0.1/x", "sk-x")
    for i, args in enumerate(calls):
        item = {"id": f"fc_{i}", "type": "function_call", "call_id": f"call_{i}", "name": f"tool{i}", "arguments": ""}
        state.feed(json.dumps({"type": "response.output_item.added", "output_index": i, "item": item}))
        for piece in pieces(json.dumps(args), cuts):
            state.feed(json.dumps({"type": "response.function_call_arguments.delta", "item_id": f"fc_{i}",
                                   "output_index": i, "delta": piece}))
    state.feed(json.dumps({"type": "response.completed", "response": {"status": "completed", "usage": None}}))
    *call_chunks, last = state.end()
    assert [(c.tool_call.id, c.tool_call.arguments) for c in call_chunks] == [
        (f"call_{i}", args) for i, args in enumerate(calls)]
    assert last.finish_reason == "tool_calls"
