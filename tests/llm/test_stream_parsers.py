"""The Anthropic and Gemini stream parsers, fed events directly (properties over any fragmentation)."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.llm import LLMError, LLMProvider
from steerable_agent_runtime.llm.anthropic_stream import AnthropicStreamParser
from steerable_agent_runtime.llm.classify import classify_error_body
from steerable_agent_runtime.llm.gemini_stream import GeminiStreamParser

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
ARGUMENTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4)


def never(_data):
    raise AssertionError("no error event expected")


def cuts(text: str, points: list[int]) -> list[str]:
    points = sorted({p % (len(text) + 1) for p in points})
    edges = [0, *points, len(text)]
    return [text[a:b] for a, b in pairwise(edges)]


@given(st.lists(st.tuples(ARGUMENTS, st.lists(st.integers(0, 400), max_size=6)), min_size=1, max_size=4))
def test_anthropic_calls_come_out_whole_however_the_arguments_are_split(calls):
    parser = AnthropicStreamParser(never)
    out = []
    events = [{"type": "message_start", "message": {"usage": {"input_tokens": 3}}}]
    for index, (arguments, points) in enumerate(calls):
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": f"toolu_{index}", "name": "f", "input": {}}})
        for piece in cuts(json.dumps(arguments), points):
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}})
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
               {"type": "message_stop"}]
    for event in events:
        out.extend(parser.feed(event))
    assert [(c.tool_call.id, c.tool_call.arguments) for c in out if c.tool_call] == [
        (f"toolu_{i}", arguments) for i, (arguments, _) in enumerate(calls)]
    assert parser.done and out[-1].finish_reason == "tool_calls" and out[-1].usage.total_tokens == 12


def test_anthropic_interleaved_blocks_are_kept_apart_by_index():
    parser = AnthropicStreamParser(never)
    feed = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "a", "name": "f"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "b", "name": "g"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"y"'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"x": 1'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ": 2}"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_stop", "index": 0},
    ]
    assert [c for event in feed for c in parser.feed(event)] == []
    calls = [c.tool_call for c in parser.feed({"type": "message_stop"}) if c.tool_call]
    assert [(c.id, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {"y": 2})]


def test_anthropic_unknown_events_are_ignored_and_error_events_raise_what_the_classifier_gives():
    parser = AnthropicStreamParser(lambda data: LLMError(data["error"]["type"], kind="server"))
    assert parser.feed({"type": "ping"}) == [] and parser.feed({"type": "brand_new_event"}) == []
    try:
        parser.feed({"type": "error", "error": {"type": "overloaded_error"}})
    except LLMError as error:
        assert str(error) == "overloaded_error"
    else:
        raise AssertionError("error event did not raise")


@given(st.lists(ARGUMENTS, min_size=1, max_size=5), st.integers(1, 3))
def test_gemini_ids_are_unique_within_a_response(arguments, per_chunk):
    parser = GeminiStreamParser(never)
    parts = [{"functionCall": {"name": f"f{i}", "args": a}} for i, a in enumerate(arguments)]
    out = []
    for start in range(0, len(parts), per_chunk):
        out += parser.feed({"candidates": [{"content": {"parts": parts[start:start + per_chunk], "role": "model"}}]})
    out += parser.feed({"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]})
    out += parser.final()
    calls = [c.tool_call for c in out if c.tool_call]
    assert [c.arguments for c in calls] == arguments
    assert len({c.id for c in calls}) == len(calls)
    assert out[-1].finish_reason == "tool_calls"


def test_gemini_usage_keeps_the_last_metadata_and_adds_tool_use_prompt_tokens():
    parser = GeminiStreamParser(never)
    parser.feed({"usageMetadata": {"promptTokenCount": 5}})
    parser.feed({"candidates": [{"finishReason": "STOP"}],
                 "usageMetadata": {"promptTokenCount": 100, "toolUsePromptTokenCount": 20, "cachedContentTokenCount": 60,
                                   "candidatesTokenCount": 7, "thoughtsTokenCount": 3}})
    [last] = parser.final()
    assert (last.usage.prompt_tokens, last.usage.cached_prompt_tokens, last.usage.completion_tokens,
            last.usage.total_tokens) == (120, 60, 10, 130)
    assert not GeminiStreamParser(never).finished


def test_the_providers_satisfy_the_protocol():
    from steerable_agent_runtime.llm import (
        AnthropicProvider,
        CacheControlProvider,
        GoogleGenAIProvider,
    )

    for provider in (AnthropicProvider("m", "k"), GoogleGenAIProvider("m", "k"),
                     CacheControlProvider(AnthropicProvider("m", "k"))):
        assert isinstance(provider, LLMProvider)
        assert provider.model == "m" and provider.name in ("anthropic", "gemini")


def test_anthropic_server_tool_use_blocks_are_not_calls_for_the_host():
    parser = AnthropicStreamParser(never)
    feed = [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q": 1}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    out = [c for event in feed for c in parser.feed(event)]
    assert [c.tool_call for c in out if c.tool_call] == [] and out[-1].finish_reason == "stop"


def test_anthropic_gemini_and_cache_control_import_without_pydantic_or_storage():
    from tests.llm.test_import_cost import loaded_after

    mods = loaded_after("import steerable_agent_runtime.llm.anthropic, steerable_agent_runtime.llm.gemini, "
                        "steerable_agent_runtime.llm.cache_control")
    assert {"steerable_agent_runtime.llm.anthropic", "steerable_agent_runtime.llm.gemini", "httpx"} <= mods
    heavy = {"pydantic", "steerable_agent_runtime.models", "steerable_agent_runtime.storage",
             "steerable_agent_runtime.history", "sqlite3", "asyncio"}
    assert not heavy & mods, heavy & mods


@pytest.mark.parametrize(("error_type", "message", "kind"), [
    ("overloaded_error", "Overloaded", "server"),
    ("api_error", "Internal server error", "server"),
    ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "rate_limit"),
    ("authentication_error", "invalid x-api-key", "auth"),
    ("permission_error", "Your API key does not have permission to use the specified resource.", "auth"),
    ("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
    ("invalid_request_error", "messages: roles must alternate", "invalid_request"),
    ("not_found_error", "model: claude-nope", "invalid_request"),
])
def test_anthropic_error_event_types_map_to_kinds_through_classify(error_type, message, kind):
    parser = AnthropicStreamParser(lambda data: classify_error_body(data, provider="anthropic"))
    with pytest.raises(LLMError) as info:
        parser.feed({"type": "error", "error": {"type": error_type, "message": message}})
    assert info.value.kind == kind and message in str(info.value)
