"""CacheControlProvider: the exact request bodies the replay server received."""

from __future__ import annotations

import pytest
from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.llm import (
    AnthropicProvider,
    CacheControlProvider,
    GoogleGenAIProvider,
)
from steerable_agent_runtime.llm.cache_control import count_breakpoints
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.llm.test_anthropic import (
    CITIES_TOOL,
    EXPECTED_MESSAGES,
    WEATHER_TOOL,
    conversation,
)
from tests.llm.wire_cases import ANTHROPIC_KEY, case, drain, without_cache_control
from tests.replay_server import ReplayServer

SHORT = {"type": "ephemeral"}
LONG = {"type": "ephemeral", "ttl": "1h"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("STEERABLE_CACHE_CONTROL", raising=False)
    monkeypatch.delenv("STEERABLE_PROMPT_CACHE_TTL", raising=False)


def sent_bodies(calls, retention="short", wrap=True, replies=None):
    """Run ``calls`` (a list of (messages, tools, options)) through one wrapped provider."""
    with ReplayServer(replies or [case("anthropic", "text")]) as server:
        inner = AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url)
        wrapped = CacheControlProvider(inner, retention=retention) if wrap else inner

        async def go():
            for messages, tools, options in calls:
                await drain(wrapped.stream(messages, tools=tools, **options))
        run(go())
    return [r.json() for r in server.requests]


def stamped_expected(marker):
    """The body test_anthropic expects for conversation(), with the three breakpoints."""
    messages = [dict(m) for m in EXPECTED_MESSAGES]
    tail = list(messages[-1]["content"])
    tail[-1] = {**tail[-1], "cache_control": marker}
    messages[-1] = {"role": "user", "content": tail}
    return {
        "model": "claude-sonnet-4-6", "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": marker}],
        "messages": messages,
        "tools": [{"name": "get_weather", "description": "Current weather for a city",
                   "input_schema": WEATHER_TOOL["function"]["parameters"]},
                  {"name": "list_cities", "input_schema": {"type": "object", "properties": {}},
                   "cache_control": marker}],
        "stream": True,
    }


def test_three_breakpoints_system_last_tool_and_tail():
    [body] = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {})])
    assert body == stamped_expected(SHORT)
    assert count_breakpoints(body) == 3


def test_long_retention_uses_the_one_hour_ttl():
    [body] = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {})], retention="long")
    assert body == stamped_expected(LONG)


def test_env_ttl_1h_opts_every_breakpoint_in(monkeypatch):
    monkeypatch.setenv("STEERABLE_PROMPT_CACHE_TTL", "1h")
    [body] = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {})])
    assert body == stamped_expected(LONG)


def test_per_call_long_and_none():
    long_body, none_body = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {"cache_retention": "long"}),
                                        (conversation(), [WEATHER_TOOL, CITIES_TOOL], {"cache_retention": "none"})])
    assert long_body == stamped_expected(LONG)
    [plain] = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {})], wrap=False)
    assert none_body == plain and count_breakpoints(none_body) == 0 and isinstance(none_body["system"], str)


def test_env_off_is_read_at_each_request(monkeypatch):
    wrapped_calls = [(conversation(), [WEATHER_TOOL], {})]
    with ReplayServer([case("anthropic", "text")]) as server:
        wrapped = CacheControlProvider(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url))

        async def go():
            for messages, tools, options in wrapped_calls * 3:
                await drain(wrapped.stream(messages, tools=tools, **options))
                monkeypatch.setenv("STEERABLE_CACHE_CONTROL", "0" if len(server.requests) == 1 else "1")
        run(go())
    counts = [count_breakpoints(r.json()) for r in server.requests]
    assert counts == [3, 0, 3]


def test_breakpoints_are_recomputed_from_each_request():
    first = conversation()[:2]
    second = conversation()
    a, b = sent_bodies([(first, [WEATHER_TOOL], {}), (second, [WEATHER_TOOL, CITIES_TOOL], {})])
    assert a["tools"][-1]["cache_control"] == SHORT
    assert a["messages"][-1]["content"][-1]["cache_control"] == SHORT
    assert "cache_control" not in b["tools"][0] and b["tools"][1]["cache_control"] == SHORT
    assert "cache_control" not in b["messages"][0]["content"][-1]
    assert b["messages"][-1]["content"][-1] == {"type": "text", "text": "And tomorrow?", "cache_control": SHORT}
    assert count_breakpoints(a) == count_breakpoints(b) == 3


def test_no_system_no_tools_gives_only_the_tail_breakpoint_on_a_string_turn():
    [body] = sent_bodies([([LLMMessage(role="user", content="hello")], None, {})])
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": SHORT}]}]
    assert "system" not in body and "tools" not in body


def test_tail_is_a_tool_result_block_when_the_transcript_ends_in_results():
    [body] = sent_bodies([(conversation()[:5], [WEATHER_TOOL], {})])
    tail = body["messages"][-1]["content"][-1]
    assert tail == {"type": "tool_result", "tool_use_id": "toolu_2", "content": "9 C, rain", "cache_control": SHORT}


def test_never_more_than_four_breakpoints_with_ones_already_in_the_body():
    def prestamp(body):
        body = dict(body)
        body["messages"] = [dict(m) for m in body["messages"]]
        first = body["messages"][0]
        first["content"] = [{**block, "cache_control": SHORT} for block in first["content"]]
        return body

    [body] = sent_bodies([(conversation(), [WEATHER_TOOL, CITIES_TOOL], {"shape_body": prestamp})])
    assert count_breakpoints(body) == 4
    assert body["messages"][-1]["content"][-1]["cache_control"] == SHORT
    assert body["system"][0]["cache_control"] == SHORT
    assert "cache_control" not in body["tools"][-1]
    assert without_cache_control(body) == without_cache_control(stamped_expected(SHORT)) | {
        "system": [{"type": "text", "text": "You are terse."}]}


def test_the_callers_messages_and_tools_are_not_mutated():
    messages, tools = conversation(), [WEATHER_TOOL, CITIES_TOOL]
    before = ([m.model_dump() for m in messages], repr(tools))
    sent_bodies([(messages, tools, {})])
    assert ([m.model_dump() for m in messages], repr(tools)) == before


def test_pass_through_for_a_provider_without_breakpoints():
    with ReplayServer([case("gemini", "text")]) as server:
        inner = GoogleGenAIProvider("gemini-2.5-flash", "k", base_url=server.url)
        wrapped = CacheControlProvider(inner, retention="long")
        run(drain(wrapped.stream(conversation(), tools=[WEATHER_TOOL])))
        run(drain(inner.stream(conversation(), tools=[WEATHER_TOOL])))
    assert server.requests[0].body == server.requests[1].body
    assert b"cache_control" not in server.requests[0].body
    assert (wrapped.name, wrapped.model) == ("gemini", "gemini-2.5-flash")


def test_complete_goes_through_the_wrapper():
    with ReplayServer([case("anthropic", "text")]) as server:
        wrapped = CacheControlProvider(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url))
        message, usage = run(wrapped.complete([LLMMessage(role="user", content="hi")]))
    assert message.content.startswith("Hello!") and usage.prompt_tokens == 21
    assert count_breakpoints(server.requests[0].json()) == 1


def test_bad_retention_is_refused():
    with pytest.raises(SteerableError) as info:
        CacheControlProvider(AnthropicProvider("m", "k"), retention="forever")
    assert "retention" in str(info.value) and info.value.hint


def test_bad_per_call_retention_is_refused_before_anything_is_sent():
    with ReplayServer([case("anthropic", "text")]) as server:
        wrapped = CacheControlProvider(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url))
        with pytest.raises(SteerableError) as info:
            run(drain(wrapped.stream([LLMMessage(role="user", content="hi")], cache_retention="1h")))
        assert server.requests == []
    assert "cache_retention" in str(info.value)
