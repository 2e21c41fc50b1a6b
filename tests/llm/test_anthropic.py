"""AnthropicProvider against a real HTTP server replaying recorded Messages streams."""

from __future__ import annotations

import logging
import socket

import pytest
from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.llm import AnthropicProvider, LLMError, ToolCall, collect
from steerable_agent_runtime.models import LLMMessage
from steerable_agent_runtime.tools import RAW_ARGUMENTS_KEY

from tests.helpers import run
from tests.llm.wire_cases import ANTHROPIC_KEY, case, drain
from tests.replay_server import ReplayServer, Reply

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
CITIES_TOOL = {"type": "function", "function": {"name": "list_cities", "parameters": {"type": "object", "properties": {}}}}


def conversation() -> list[LLMMessage]:
    """System, user with an image, assistant with two calls, both results, then a user follow-up."""
    calls = [ToolCall(id="toolu_1", name="get_weather", arguments={"location": "Paris"}),
             ToolCall(id="toolu_2", name="get_weather", arguments={"location": "Zürich"})]
    return [
        LLMMessage(role="system", content="You are terse."),
        LLMMessage(role="user", content=[{"type": "text", "text": "Weather here and there?"},
                                         {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]),
        LLMMessage(role="assistant", content="Checking both.", tool_calls=[c.to_wire() for c in calls]),
        LLMMessage(role="tool", tool_call_id="toolu_1", content="18 C, sunny"),
        LLMMessage(role="tool", tool_call_id="toolu_2", content="9 C, rain"),
        LLMMessage(role="user", content="And tomorrow?"),
    ]


EXPECTED_MESSAGES = [
    {"role": "user", "content": [
        {"type": "text", "text": "Weather here and there?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "Zürich"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C, sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "9 C, rain"},
        {"type": "text", "text": "And tomorrow?"}]},
]


def provider(server: ReplayServer, **kwargs) -> AnthropicProvider:
    return AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url, **kwargs)


def stream_case(name: str, messages=None, **options):
    with ReplayServer([case("anthropic", name)]) as server:
        chunks = run(drain(provider(server).stream(messages or [LLMMessage(role="user", content="hi")], **options)))
        return chunks, server.requests


def test_request_is_a_streamed_messages_post_with_the_key_header_and_version():
    with ReplayServer([case("anthropic", "text")]) as server:
        run(drain(provider(server, max_tokens=512).stream(conversation(), tools=[WEATHER_TOOL, CITIES_TOOL],
                                                           temperature=0.3, tool_choice="required")))
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == ANTHROPIC_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json() == {
        "model": "claude-sonnet-4-6", "max_tokens": 512, "system": "You are terse.", "messages": EXPECTED_MESSAGES,
        "tools": [{"name": "get_weather", "description": "Current weather for a city",
                   "input_schema": WEATHER_TOOL["function"]["parameters"]},
                  {"name": "list_cities", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "any"}, "temperature": 0.3, "stream": True}


def test_max_tokens_option_overrides_the_default_per_call():
    _, requests = stream_case("text", max_tokens=77)
    assert requests[0].json()["max_tokens"] == 77


def test_text_stream_yields_deltas_then_stop_and_normalised_usage():
    chunks, _ = stream_case("text")
    assert "".join(c.content_delta or "" for c in chunks) == "Hello! The capital of France is Paris — la Ville Lumière."
    last = chunks[-1]
    assert last.finish_reason == "stop"
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (21, 17, 38)
    assert [c for c in chunks[:-1] if c.finish_reason or c.usage] == []


def test_parallel_tool_calls_are_assembled_per_block_and_emitted_once_whole():
    chunks, _ = stream_case("tool_calls")
    calls = [c.tool_call for c in chunks if c.tool_call is not None]
    assert calls == [
        ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather",
                 arguments={"location": "San Francisco, CA", "unit": "celsius"}),
        ToolCall(id="toolu_01AbCdEfGhIjKlMnOpQrStUv", name="get_weather",
                 arguments={"location": "Zürich", "days": [1, 2, 3], "detail": {"hourly": True}}),
        ToolCall(id="toolu_01NoArgs000000000000000", name="list_cities", arguments={}),
    ]
    assert chunks[-1].finish_reason == "tool_calls"
    assert "".join(c.content_delta or "" for c in chunks) == "I'll check the weather in both cities."


def test_complete_builds_the_assistant_message_with_its_calls():
    with ReplayServer([case("anthropic", "tool_calls")]) as server:
        message, usage = run(provider(server).complete([LLMMessage(role="user", content="weather?")]))
    assert message.content == "I'll check the weather in both cities."
    assert [c["id"] for c in message.tool_calls] == ["toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01AbCdEfGhIjKlMnOpQrStUv",
                                                     "toolu_01NoArgs000000000000000"]
    assert (usage.prompt_tokens, usage.completion_tokens) == (472, 139)


def test_thinking_deltas_become_reasoning_and_text_stays_content():
    chunks, _ = stream_case("thinking")
    reasoning = "".join(c.reasoning_delta or "" for c in chunks)
    assert reasoning == "The user asks for 27 * 453. 27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431 = 12231."
    assert "".join(c.content_delta or "" for c in chunks) == "27 × 453 = **12,231**"
    assert "EqQB" not in reasoning


def test_cache_hits_count_in_prompt_tokens_and_max_tokens_is_length():
    chunks, _ = stream_case("cache_usage")
    usage = chunks[-1].usage
    assert usage.prompt_tokens == 12 + 248 + 10240
    assert (usage.cached_prompt_tokens, usage.cache_creation_tokens) == (10240, 248)
    assert usage.total_tokens == 10500 + 64
    assert chunks[-1].finish_reason == "length"


def collect_error(name: str) -> tuple[LLMError, list]:
    seen: list = []
    with ReplayServer([case("anthropic", name)]) as server:
        async def go():
            async for chunk in provider(server).stream([LLMMessage(role="user", content="hi")]):
                seen.append(chunk)
        with pytest.raises(LLMError) as info:
            run(go())
    return info.value, seen


def test_error_event_mid_stream_is_classified_after_the_text_before_it():
    error, seen = collect_error("error_event")
    assert error.kind == "server" and error.retryable
    assert "Overloaded" in str(error)
    assert "".join(c.content_delta or "" for c in seen) == "Let me think about"


def test_connection_dropped_mid_stream_is_transport_and_no_partial_call_escapes():
    error, seen = collect_error("dropped")
    assert error.kind == "transport"
    assert [c.tool_call for c in seen if c.tool_call] == []
    assert all(c.finish_reason is None for c in seen)


def test_stream_ending_cleanly_without_message_stop_is_transport():
    body = case("anthropic", "text").chunks[:-1]
    with ReplayServer([Reply(chunks=body)]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "transport" and "message_stop" in str(info.value)


@pytest.mark.parametrize(("name", "kind", "status", "retry_after_ms"), [
    ("overflow", "context_overflow", 400, None),
    ("rate_limit", "rate_limit", 429, 17_000),
    ("server_error", "server", 500, None),
])
def test_http_errors_are_classified(name, kind, status, retry_after_ms):
    error, seen = collect_error(name)
    assert (error.kind, error.status_code, error.retry_after_ms, error.provider) == (kind, status, retry_after_ms,
                                                                                     "anthropic")
    assert seen == []


def test_malformed_json_in_a_data_line_is_a_clear_llm_error():
    chunks = case("anthropic", "text").chunks[:2] + [b"event: content_block_delta\ndata: {\"type\": \"content_bl\n\n"]
    with ReplayServer([Reply(chunks=chunks)]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "invalid_request" and "malformed" in str(info.value)


def test_tool_arguments_that_are_not_json_reach_the_router_as_raw_arguments():
    # as with every provider (tools.decode_arguments): the router answers them with a failed
    # result the model reads, rather than the whole request failing
    chunks = [c for c in case("anthropic", "tool_calls").chunks if b'"index":1,"delta"' not in c]
    chunks.insert(5, b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
                     b'"delta":{"type":"input_json_delta","partial_json":"{\\"location\\": "}}\n\n')
    with ReplayServer([Reply(chunks=chunks)]) as server:
        got = run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    calls = [c.tool_call for c in got if c.tool_call is not None]
    assert calls[0].name == "get_weather" and calls[0].arguments == {RAW_ARGUMENTS_KEY: '{"location": '}


@pytest.mark.parametrize("name", ["overflow", "rate_limit", "server_error", "error_event", "dropped"])
def test_api_key_is_never_in_an_error_or_a_log_line(name, caplog):
    caplog.set_level(logging.DEBUG)
    error, _ = collect_error(name)
    everything = " ".join([str(error), error.hint, error.body or "", repr(error.to_dict()), caplog.text])
    assert ANTHROPIC_KEY not in everything
    assert "POST" in caplog.text or name == "dropped"


def test_unreachable_server_is_transport_naming_the_url_without_the_key():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bad = AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=f"http://127.0.0.1:{port}", timeout=2.0)
    with pytest.raises(LLMError) as info:
        run(drain(bad.stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "transport"
    assert f"127.0.0.1:{port}" in str(info.value) and ANTHROPIC_KEY not in str(info.value)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"model": ""}, "model"),
    ({"base_url": "ftp://example.com"}, "http"),
    ({"max_tokens": 0}, "max_tokens"),
])
def test_bad_construction_is_a_steerable_error_with_a_hint(kwargs, words):
    args = {"model": "claude-sonnet-4-6", "api_key": ANTHROPIC_KEY, **kwargs}
    with pytest.raises(SteerableError) as info:
        AnthropicProvider(**args)
    assert words in str(info.value) and info.value.hint
    assert ANTHROPIC_KEY not in str(info.value)


@pytest.mark.parametrize(("tools", "content", "named"), [
    ([{"name": "raw_tool", "parameters": {}}], "hi", "raw_tool"),
    ([WEATHER_TOOL, {"type": "function", "function": {"name": "broken", "parameters": "nope"}}], "hi", "broken"),
    (None, [{"type": "audio", "data": "x"}], "audio"),
])
def test_bad_tools_or_content_raise_naming_it_and_send_nothing(tools, content, named):
    with ReplayServer([case("anthropic", "text")]) as server:
        with pytest.raises(SteerableError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content=content)], tools=tools)))
        assert server.requests == []
    assert named in str(info.value) and info.value.hint


def test_several_system_messages_join_and_openai_form_tool_calls_are_accepted():
    messages = [LLMMessage(role="system", content="A."), LLMMessage(role="system", content="B."),
                LLMMessage(role="user", content="go"),
                LLMMessage(role="assistant", tool_calls=[{"id": "c1", "type": "function",
                                                          "function": {"name": "f", "arguments": "{\"x\": 1}"}}]),
                LLMMessage(role="tool", tool_call_id="c1", content=[{"type": "text", "text": "done"}]),
                LLMMessage(role="tool", tool_call_id="c2", content=""),
                LLMMessage(role="assistant", content="")]
    f_tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body = AnthropicProvider("m", "k").build_body(messages, tools=[f_tool],
                                                  tool_choice={"type": "function", "function": {"name": "f"}})
    assert body["system"] == "A.\n\nB."
    assert body["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": [{"type": "text", "text": "done"}]},
                                     {"type": "tool_result", "tool_use_id": "c2"}]},
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "f"}


def test_collect_gives_the_finish_reason_of_the_stream():
    with ReplayServer([case("anthropic", "cache_usage")]) as server:
        message, usage, finish = run(collect(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert finish == "length" and message.content.startswith("Using the cached document")
    assert usage.cached_prompt_tokens == 10240


def test_thinking_budget_turns_thinking_on_and_the_blocks_go_back_with_their_calls():
    question = [LLMMessage(role="user", content="Weather in Paris?")]
    with ReplayServer([case("anthropic", "thinking_tool_use"), case("anthropic", "text")]) as server:
        claude = provider(server)
        message, _ = run(claude.complete(question, tools=[WEATHER_TOOL], thinking_budget=2048))
        result = LLMMessage(role="tool", tool_call_id=message.tool_calls[0]["id"], content="18 C")
        run(drain(claude.stream([*question, message, result], tools=[WEATHER_TOOL], thinking_budget=2048)))
    first, second = (r.json() for r in server.requests)
    assert first["thinking"] == second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I need the current weather, so I call get_weather.",
         "signature": "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV"},
        {"type": "tool_use", "id": "toolu_01ThinkCall00000000000001", "name": "get_weather",
         "input": {"location": "Paris"}}]}
    assert "thinking" not in AnthropicProvider("m", "k").build_body(question)


@pytest.mark.parametrize(("messages", "options", "named"), [
    ([LLMMessage(role="assistant", tool_calls=[{"id": "c9", "name": "f", "arguments": "{not json"}])], {}, "c9"),
    ([LLMMessage(role="user", content="hi")], {"tool_choice": "sometimes"}, "sometimes"),
])
def test_malformed_tool_calls_or_tool_choice_raise_and_send_nothing(messages, options, named):
    with ReplayServer([case("anthropic", "text")]) as server:
        with pytest.raises(SteerableError) as info:
            run(drain(provider(server).stream(messages, **options)))
        assert server.requests == []
    assert named in str(info.value) and info.value.hint


def test_a_call_completed_before_the_cut_is_not_emitted_either():
    reply = case("anthropic", "tool_calls")
    assert b'"type":"content_block_stop","index":1' in reply.chunks[10]
    reply.drop_after = 11
    seen: list = []
    with ReplayServer([reply]) as server:
        async def go():
            async for chunk in provider(server).stream([LLMMessage(role="user", content="hi")]):
                seen.append(chunk)
        with pytest.raises(LLMError) as info:
            run(go())
    assert info.value.kind == "transport"
    assert [c for c in seen if c.tool_call or c.finish_reason] == []


def test_extra_headers_are_sent_and_cannot_replace_the_key_or_version():
    with ReplayServer([case("anthropic", "text")]) as server:
        claude = provider(server, extra_headers={"anthropic-beta": "extended-cache-ttl-2025-04-11",
                                                 "anthropic-version": "1999-01-01"})
        run(drain(claude.stream([LLMMessage(role="user", content="hi")])))
    sent = server.requests[0].headers
    assert sent["anthropic-beta"] == "extended-cache-ttl-2025-04-11"
    assert (sent["anthropic-version"], sent["x-api-key"]) == ("2023-06-01", ANTHROPIC_KEY)


def test_blank_text_is_never_sent_as_a_text_block():
    # The API refuses a text block that is empty ("text content blocks must be non-empty") or
    # only whitespace ("... must contain non-whitespace text"), anywhere: a reply that streamed
    # "\n\n" before its call (Claude does; so do models behind other wires), a user turn whose
    # caption is empty beside its image, a tool result given as an empty text part, a blank
    # system message. The record replays such a message every turn, so the chat was stuck.
    call = ToolCall(id="toolu_1", name="get_weather", arguments={"location": "Paris"})
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    messages = [LLMMessage(role="system", content="Be terse."), LLMMessage(role="system", content=" \n"),
                LLMMessage(role="user", content=[{"type": "text", "text": ""}, image]),
                LLMMessage(role="assistant", content="\n\n", tool_calls=[call.to_wire()]),
                LLMMessage(role="tool", tool_call_id="toolu_1", content=[{"type": "text", "text": " "}]),
                LLMMessage(role="assistant", content=[{"type": "text", "text": "Sunny."}, {"type": "text", "text": "\n"}]),
                LLMMessage(role="user", content="  "), LLMMessage(role="assistant", content="\t"),
                LLMMessage(role="user", content="And tomorrow?")]
    body = AnthropicProvider("m", "k").build_body(messages)
    assert body["system"] == "Be terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                   "data": PNG}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"location": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]},
        {"role": "user", "content": "And tomorrow?"},
    ]
    blank_only = [LLMMessage(role="system", content=" "), LLMMessage(role="user", content="hi")]
    assert "system" not in AnthropicProvider("m", "k").build_body(blank_only)
