"""The official ``google-genai`` SDK reads the same recorded bytes to the same answer as GoogleGenAIProvider.

``client.aio.models.generate_content_stream`` (http_options pointed at the replay server,
retries off, GOOGLE_* / GEMINI_* cleared) parses each fixture: the fixtures are real wire
format; our adapter gets the same text, reasoning, calls and usage. The request test builds
the same conversation in the SDK's own types and compares the two requests on the wire.
"""

from __future__ import annotations

import base64

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from steerable_agent_runtime.llm import GoogleGenAIProvider, LLMError, collect
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.llm.test_anthropic import CITIES_TOOL, PNG, WEATHER_TOOL, conversation
from tests.llm.wire_cases import GEMINI_KEY, case, drain, sdk_environment
from tests.replay_server import ReplayServer

FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter"}


@pytest.fixture(autouse=True)
def _no_sdk_env():
    with sdk_environment("GOOGLE_", "GEMINI_"):
        yield


def sdk_client(server: ReplayServer) -> genai.Client:
    options = types.HttpOptions(base_url=server.url, api_version="v1beta",
                                retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key=GEMINI_KEY, http_options=options)


async def sdk_chunks(server: ReplayServer, contents, config=None):
    stream = await sdk_client(server).aio.models.generate_content_stream(
        model="gemini-2.5-flash", contents=contents, config=config)
    return [chunk async for chunk in stream]


def sdk_view(chunks) -> dict:
    parts = [p for c in chunks if c.candidates for p in (c.candidates[0].content.parts or [])]
    usage = chunks[-1].usage_metadata
    calls = [(p.function_call.name, p.function_call.args) for p in parts if p.function_call]
    finish = chunks[-1].candidates[0].finish_reason.value
    return {
        "text": "".join(p.text for p in parts if p.text and not p.thought),
        "reasoning": "".join(p.text for p in parts if p.text and p.thought),
        "calls": calls,
        "usage": ((usage.prompt_token_count or 0) + (usage.tool_use_prompt_token_count or 0),
                  (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0),
                  usage.cached_content_token_count or 0),
        "finish": "tool_calls" if calls and finish == "STOP" else FINISH[finish],
    }


def our_view(chunks) -> dict:
    usage = chunks[-1].usage
    return {
        "text": "".join(c.content_delta or "" for c in chunks),
        "reasoning": "".join(c.reasoning_delta or "" for c in chunks),
        "calls": [(c.tool_call.name, c.tool_call.arguments) for c in chunks if c.tool_call],
        "usage": (usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens),
        "finish": chunks[-1].finish_reason,
    }


@pytest.mark.parametrize("name", ["text", "tool_calls", "thinking", "cache_usage", "safety"])
def test_sdk_and_adapter_read_the_same_bytes_to_the_same_answer(name):
    with ReplayServer([case("gemini", name)]) as server:
        sdk = sdk_view(run(sdk_chunks(server, "hi")))
        ours = our_view(run(drain(GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=server.url)
                                  .stream([LLMMessage(role="user", content="hi")]))))
    assert ours == sdk
    assert sdk["text"] or sdk["calls"]


def sdk_conversation() -> tuple[list[types.Content], types.GenerateContentConfig]:
    weather = WEATHER_TOOL["function"]
    contents = [
        types.Content(role="user", parts=[types.Part(text="Weather here and there?"),
                                          types.Part.from_bytes(data=base64.b64decode(PNG), mime_type="image/png")]),
        types.Content(role="model", parts=[
            types.Part(text="Checking both."),
            types.Part(function_call=types.FunctionCall(name="get_weather", args={"location": "Paris"})),
            types.Part(function_call=types.FunctionCall(name="get_weather", args={"location": "Zürich"}))]),
        types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(name="get_weather", response={"result": "18 C, sunny"})),
            types.Part(function_response=types.FunctionResponse(name="get_weather", response={"result": "9 C, rain"}))]),
        types.Content(role="user", parts=[types.Part(text="And tomorrow?")]),
    ]
    config = types.GenerateContentConfig(
        system_instruction="You are terse.", temperature=0.5, max_output_tokens=300,
        thinking_config=types.ThinkingConfig(thinking_budget=512, include_thoughts=True),
        tools=[types.Tool(function_declarations=[
            types.FunctionDeclaration(name="get_weather", description=weather["description"],
                                      parameters_json_schema=weather["parameters"]),
            types.FunctionDeclaration(name="list_cities", parameters_json_schema={"type": "object", "properties": {}})])],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="ANY")),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    return contents, config


_USER_DATA = frozenset({"parametersJsonSchema", "args", "response"})


def proto_json_names(value, inside_user_data=False):
    """``value`` with snake_case field names written in camelCase, user data (schemas, args) untouched.

    The API parses requests with the proto3 JSON mapping, which accepts either spelling of a
    field name; this SDK release writes a few in snake_case (``mime_type``,
    ``parameters_json_schema``) and the documented REST form is camelCase, which we send.
    """
    if isinstance(value, list):
        return [proto_json_names(v, inside_user_data) for v in value]
    if not isinstance(value, dict) or inside_user_data:
        return value
    out = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(word.capitalize() for word in rest)
        out[name] = proto_json_names(item, name in _USER_DATA)
    return out


def test_the_request_matches_the_sdks_for_the_same_conversation():
    contents, config = sdk_conversation()
    with ReplayServer([case("gemini", "text")]) as server:
        run(sdk_chunks(server, contents, config))
        ours = GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=server.url)
        run(collect(ours.stream(conversation(), tools=[WEATHER_TOOL, CITIES_TOOL], temperature=0.5, max_tokens=300,
                                tool_choice="required", thinking_budget=512)))
    sdk_sent, our_sent = server.requests
    assert (our_sent.method, our_sent.path, our_sent.query) == (sdk_sent.method, sdk_sent.path, sdk_sent.query)
    assert our_sent.json() == proto_json_names(sdk_sent.json())
    assert proto_json_names(our_sent.json()) == our_sent.json()
    assert our_sent.headers["x-goog-api-key"] == sdk_sent.headers["x-goog-api-key"] == GEMINI_KEY
    assert our_sent.headers["content-type"] == sdk_sent.headers["content-type"] == "application/json"


@pytest.mark.parametrize(("name", "sdk_error"), [
    ("overflow", genai_errors.ClientError),
    ("rate_limit", genai_errors.ClientError),
    ("server_error", genai_errors.ServerError),
    ("error_event", genai_errors.ServerError),
    ("error_raw_json", genai_errors.ClientError),  # the error as raw JSON lines, outside the SSE framing
])
def test_errors_the_sdk_raises_match_our_status(name, sdk_error):
    with ReplayServer([case("gemini", name)]) as server:
        with pytest.raises(sdk_error) as sdk:
            run(sdk_chunks(server, "hi"))
        with pytest.raises(LLMError) as ours:
            run(drain(GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=server.url)
                      .stream([LLMMessage(role="user", content="hi")])))
    assert ours.value.status_code == sdk.value.code
    assert sdk.value.message in str(ours.value)


def test_the_api_key_is_not_in_the_providers_repr():
    assert GEMINI_KEY not in repr(GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY))
