"""The official ``anthropic`` SDK reads the same recorded bytes to the same answer as AnthropicProvider.

That the SDK's own stream accumulator (``client.messages.stream(...).get_final_message()``)
parses each fixture proves the fixtures are the real wire format; that our adapter gets the
same text, tool calls, reasoning and usage from the same bytes proves the adapter reads it
right. The request test builds the same conversation by hand in the SDK's own parameter
types and compares what each client put on the wire.
"""

from __future__ import annotations

import anthropic
import pytest
from steerable_agent_runtime.llm import (
    AnthropicProvider,
    CacheControlProvider,
    LLMError,
    collect,
)
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.llm.test_anthropic import (
    CITIES_TOOL,
    EXPECTED_MESSAGES,
    WEATHER_TOOL,
    conversation,
)
from tests.llm.wire_cases import ANTHROPIC_KEY, case, drain, sdk_environment
from tests.replay_server import ReplayServer

FINISH = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


@pytest.fixture(autouse=True)
def _no_sdk_env():
    with sdk_environment("ANTHROPIC_"):
        yield


def sdk_client(server: ReplayServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=server.url, max_retries=0)


async def sdk_final(server: ReplayServer, **params):
    async with sdk_client(server).messages.stream(**params) as stream:
        return await stream.get_final_message()


def sdk_view(message) -> dict:
    usage = message.usage
    read, created = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    return {
        "text": "".join(b.text for b in message.content if b.type == "text"),
        "reasoning": "".join(b.thinking for b in message.content if b.type == "thinking"),
        "calls": [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"],
        "usage": (usage.input_tokens + read + created, usage.output_tokens, read, created),
        "finish": FINISH[message.stop_reason],
    }


def our_view(chunks) -> dict:
    usage = chunks[-1].usage
    return {
        "text": "".join(c.content_delta or "" for c in chunks),
        "reasoning": "".join(c.reasoning_delta or "" for c in chunks),
        "calls": [(c.tool_call.id, c.tool_call.name, c.tool_call.arguments) for c in chunks if c.tool_call],
        "usage": (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens, usage.cache_creation_tokens),
        "finish": chunks[-1].finish_reason,
    }


@pytest.mark.parametrize("name", ["text", "tool_calls", "thinking", "thinking_tool_use", "cache_usage"])
def test_sdk_and_adapter_read_the_same_bytes_to_the_same_answer(name):
    with ReplayServer([case("anthropic", name)]) as server:
        sdk = sdk_view(run(sdk_final(server, model="claude-sonnet-4-6", max_tokens=64,
                                     messages=[{"role": "user", "content": "hi"}])))
        ours = our_view(run(drain(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url)
                                  .stream([LLMMessage(role="user", content="hi")]))))
    assert ours == sdk
    assert sdk["text"] or sdk["calls"]


def test_the_request_matches_the_sdks_for_the_same_conversation():
    sdk_params = {
        "model": "claude-sonnet-4-6", "max_tokens": 1024, "system": "You are terse.", "messages": EXPECTED_MESSAGES,
        "tools": [{"name": "get_weather", "description": "Current weather for a city",
                   "input_schema": WEATHER_TOOL["function"]["parameters"]},
                  {"name": "list_cities", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "auto"}, "extra_body": {"temperature": 0.5},
    }
    with ReplayServer([case("anthropic", "text")]) as server:
        run(sdk_final(server, **sdk_params))
        ours = AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url, max_tokens=1024)
        run(collect(ours.stream(conversation(), tools=[WEATHER_TOOL, CITIES_TOOL], temperature=0.5,
                                tool_choice="auto")))
    sdk_sent, our_sent = server.requests
    assert (our_sent.method, our_sent.path, our_sent.query) == (sdk_sent.method, sdk_sent.path, sdk_sent.query)
    assert our_sent.json() == sdk_sent.json()
    assert our_sent.headers["content-type"] == sdk_sent.headers["content-type"] == "application/json"
    assert "anthropic-version" in sdk_sent.headers and our_sent.headers["anthropic-version"] == "2023-06-01"
    # This SDK release authenticates with a bearer header; the Messages API documents x-api-key, which we send.
    sdk_key = sdk_sent.headers.get("x-api-key") or sdk_sent.headers["authorization"].removeprefix("Bearer ")
    assert our_sent.headers["x-api-key"] == sdk_key == ANTHROPIC_KEY


@pytest.mark.parametrize(("name", "sdk_error"), [
    ("overflow", anthropic.BadRequestError),
    ("rate_limit", anthropic.RateLimitError),
    ("server_error", anthropic.InternalServerError),
])
def test_http_errors_the_sdk_raises_match_our_status_and_kind(name, sdk_error):
    with ReplayServer([case("anthropic", name)]) as server:
        with pytest.raises(sdk_error) as sdk:
            run(sdk_final(server, model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]))
        with pytest.raises(LLMError) as ours:
            run(drain(AnthropicProvider("m", ANTHROPIC_KEY, base_url=server.url)
                      .stream([LLMMessage(role="user", content="hi")])))
    assert ours.value.status_code == sdk.value.status_code
    assert sdk.value.body["error"]["message"] in str(ours.value)


def test_error_event_is_an_error_for_the_sdk_too():
    with ReplayServer([case("anthropic", "error_event")]) as server:
        with pytest.raises(anthropic.APIError) as sdk:
            run(sdk_final(server, model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]))
    assert "overloaded_error" in str(sdk.value)


def test_cache_breakpoints_have_the_shape_the_sdk_sends():
    marker = {"type": "ephemeral", "ttl": "1h"}
    tail = [*EXPECTED_MESSAGES[:-1], {"role": "user", "content": [
        *EXPECTED_MESSAGES[-1]["content"][:-1], {**EXPECTED_MESSAGES[-1]["content"][-1], "cache_control": marker}]}]
    sdk_params = {
        "model": "claude-sonnet-4-6", "max_tokens": 4096, "messages": tail,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": marker}],
        "tools": [{"name": "get_weather", "description": "Current weather for a city",
                   "input_schema": WEATHER_TOOL["function"]["parameters"], "cache_control": marker}],
    }
    with ReplayServer([case("anthropic", "text")]) as server:
        run(sdk_final(server, **sdk_params))
        ours = CacheControlProvider(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url), "long")
        run(collect(ours.stream(conversation(), tools=[WEATHER_TOOL])))
    sdk_sent, our_sent = server.requests
    assert our_sent.json() == sdk_sent.json()


def test_the_api_key_is_not_in_the_providers_repr():
    claude = AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY)
    assert ANTHROPIC_KEY not in repr(claude) and ANTHROPIC_KEY not in repr(CacheControlProvider(claude))
    assert ANTHROPIC_KEY not in repr(vars(claude).get("_clients"))
