"""OpenAIResponsesProvider over real HTTP: the recorded streams parse as the official SDK parses them."""

from __future__ import annotations

import json
import time

import openai
import pytest
from steerable_agent_runtime.llm import (
    LLMError,
    OpenAIResponsesProvider,
    ProviderConfigError,
    ToolDefinitionError,
)
from steerable_agent_runtime.llm.types import LLMUsage

from tests.helpers import run
from tests.llm.openai_cases import (
    CONVERSATION,
    KEY,
    PNG,
    TOOLS,
    closed_port,
    collect_stream,
    reply,
    sdk_client,
)
from tests.replay_server import ReplayServer

DIR = "openai_responses"
MODEL = "gpt-4.1-mini"
R_TOOLS = [{"type": "function", **t["function"], "strict": False} for t in TOOLS]  # the SDK requires strict


def ours(server: ReplayServer, **kwargs):
    provider = OpenAIResponsesProvider(MODEL, KEY, base_url=server.url + "/v1")
    return run(collect_stream(provider, **kwargs))


def sdk(server: ReplayServer, input_=None, **kwargs):
    """What the SDK's Responses stream assembles: text, reasoning (summary and raw text), calls,
    usage, final status."""
    client = sdk_client(server.url + "/v1")
    reasoning = []
    with client.responses.stream(model=MODEL, input=input_ or [{"role": "user", "content": "hi"}],
                                 store=False, **kwargs) as stream:
        last = None
        for event in stream:
            last = event
            if event.type in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                reasoning.append(event.delta)
        # The SDK finalises only on response.completed; an incomplete response is the event's own.
        final = last.response if last.type == "response.incomplete" else stream.get_final_response()
    calls = [(o.call_id, o.name, json.loads(o.arguments)) for o in final.output if o.type == "function_call"]
    return final.output_text, "".join(reasoning), calls, final.usage, final.status


def usage_of(u) -> LLMUsage:
    return LLMUsage(u.input_tokens, u.output_tokens, u.total_tokens, u.input_tokens_details.cached_tokens, 0)


@pytest.mark.parametrize("case,finish", [("text", "stop"), ("tool_calls", "tool_calls"), ("reasoning", "stop"),
                                         ("usage_cached", "stop"), ("incomplete", "length"),
                                         ("reasoning_tool_call", "tool_calls"),
                                         ("reasoning_preamble_calls", "tool_calls"),
                                         ("reasoning_text_tool_call", "tool_calls")])
def test_fixture_parses_like_the_sdk(case, finish):
    with ReplayServer([reply(DIR, case)]) as server:
        got = ours(server, tools=TOOLS)
        text, reasoning, calls, usage, status = sdk(server, tools=R_TOOLS)
    assert got.error is None
    assert got.text == text and got.reasoning == reasoning
    assert [(c.id, c.name, c.arguments) for c in got.calls] == calls
    assert got.usage == usage_of(usage)
    assert got.finish == finish and status == ("incomplete" if finish == "length" else "completed")


def test_call_ids_are_call_id_not_item_id_and_arguments_are_whole():
    with ReplayServer([reply(DIR, "tool_calls")]) as server:
        got = ours(server, tools=TOOLS)
    assert [c.id for c in got.calls] == ["call_Ab12Cd34Ef56Gh78", "call_Zy98Xw76Vu54Ts32"]
    assert got.calls[0].arguments == {"city": "Lisbon", "unit": "celsius"}
    assert got.chunks == 3  # two whole calls, then finish + usage: no fragment leaves the provider


def test_request_matches_what_the_sdk_sends_for_the_same_conversation():
    native = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in this image, and the weather?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_prev1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'},
        {"type": "function_call_output", "call_id": "call_prev1", "output": '{"tempC": 21}'},
        {"role": "user", "content": "And tomorrow?"},
    ]
    with ReplayServer([reply(DIR, "text")]) as server:
        ours(server, messages=CONVERSATION, tools=TOOLS, temperature=0.2, max_tokens=300)
        sdk(server, native, tools=R_TOOLS, temperature=0.2, max_output_tokens=300)
        mine, theirs = server.requests
    assert mine.path == theirs.path == "/v1/responses"
    assert mine.json() == theirs.json()
    assert mine.json()["store"] is False
    for header in ("authorization", "content-type"):
        assert mine.headers[header] == theirs.headers[header]


@pytest.mark.parametrize("case,kind,status,sdk_error", [
    ("overflow_400", "context_overflow", 400, openai.BadRequestError),
    ("rate_limit_429", "rate_limit", 429, openai.RateLimitError),
    ("server_500", "server", 500, openai.InternalServerError),
])
def test_http_errors_classified_where_the_sdk_raises(case, kind, status, sdk_error):
    with ReplayServer([reply(DIR, case)]) as server:
        got = ours(server)
        with pytest.raises(sdk_error):
            sdk(server)
    assert (got.error.kind, got.error.status_code) == (kind, status)
    if kind == "rate_limit":  # an HTTP date far away: a wait RetryPolicy refuses
        assert got.error.retry_after_ms > 180_000


def test_error_event_and_response_failed_raise_classified():
    with ReplayServer([reply(DIR, "error_mid_stream"), reply(DIR, "failed")]) as server:
        error_event, failed = ours(server), ours(server)
    assert error_event.error.kind == "server" and "server had an error" in str(error_event.error)
    assert failed.error.kind == "rate_limit" and "Rate limit reached" in str(failed.error)


def test_sdk_sees_the_same_error_event():
    with ReplayServer([reply(DIR, "error_mid_stream")]) as server:
        client = sdk_client(server.url + "/v1")
        with client.responses.stream(model=MODEL, input="hi") as stream:
            types = [event.type for event in stream]
    assert types[-1] == "error"


def test_connection_dropped_mid_stream_is_transport():
    with ReplayServer([reply(DIR, "dropped_mid_stream", drop_after=99)]) as server:
        got = ours(server)
    assert got.error.kind == "transport" and got.calls == [] and "response.completed" in str(got.error)


def test_unreachable_server_is_transport_within_the_connect_timeout():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    provider = OpenAIResponsesProvider(MODEL, KEY, base_url=url, timeout=2.0)
    started = time.monotonic()
    got = run(collect_stream(provider))
    assert time.monotonic() - started < 2.5
    assert got.error.kind == "transport" and url + "/responses" in str(got.error) and KEY not in str(got.error)


def test_bad_settings_and_tools():
    for args in [("", KEY), ("m", 42), ("m", KEY, "ws://x")]:
        with pytest.raises(ProviderConfigError):
            OpenAIResponsesProvider(*args)
    provider = OpenAIResponsesProvider(MODEL, KEY, base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ToolDefinitionError, match="#0"):
        provider.build_body([], tools=[{"type": "custom"}])
    assert isinstance(LLMError, type)


def test_keyless_local_server_gets_no_authorization_header():
    with ReplayServer([reply(DIR, "text")]) as server:
        run(collect_stream(OpenAIResponsesProvider(MODEL, None, base_url=server.url + "/v1")))
        assert "authorization" not in server.requests[0].headers


def test_tool_choice_is_converted_per_wire_and_a_bad_one_refused():
    from steerable_agent_runtime.llm import OpenAICompatProvider

    named = {"type": "function", "function": {"name": "read_file"}}
    responses = OpenAIResponsesProvider(MODEL, KEY, base_url="http://127.0.0.1:1/v1")
    chat = OpenAICompatProvider(MODEL, base_url="http://127.0.0.1:1/v1")
    assert responses.build_body([], tools=TOOLS, tool_choice=named)["tool_choice"] == {"type": "function",
                                                                                        "name": "read_file"}
    assert chat.build_body([], tools=TOOLS, tool_choice=named)["tool_choice"] == named
    assert chat.build_body([], tools=TOOLS, tool_choice="required")["tool_choice"] == "required"
    for provider in (responses, chat):
        with pytest.raises(ProviderConfigError, match="tool_choice"):
            provider.build_body([], tools=TOOLS, tool_choice="sometimes")


def test_assistant_calls_in_openai_form_are_read_too():
    from steerable_agent_runtime.models import LLMMessage

    message = LLMMessage(role="assistant", content=None, tool_calls=[
        {"id": "call_9", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}])
    body = OpenAIResponsesProvider(MODEL, KEY, base_url="http://127.0.0.1:1/v1").build_body([message])
    assert body["input"] == [{"type": "function_call", "call_id": "call_9", "name": "read_file",
                              "arguments": '{"path": "a"}'}]


def test_tools_go_non_strict_unless_the_definition_says_strict():
    # Responses reads a function tool without `strict` as strict: it normalises the schema
    # (additionalProperties false, every property required), so an optional argument of a
    # ToolRouter tool (a default value, `x: int | None = None`) became one the model must always
    # send. OpenAI-form tools mean what chat/completions makes of them, non-strict unless they say
    # strict; the SDK's FunctionToolParam has `strict` required for this reason.
    strict = {"type": "function", "function": {"name": "lookup", "strict": True, "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}}}
    provider = OpenAIResponsesProvider(MODEL, KEY, base_url="http://127.0.0.1:1/v1")
    tools = provider.build_body([], tools=[*TOOLS, strict])["tools"]
    assert [(t["name"], t["strict"]) for t in tools] == [("get_weather", False), ("read_file", False),
                                                          ("lookup", True)]
