"""GoogleGenAIProvider against a real HTTP server replaying recorded streamGenerateContent streams."""

from __future__ import annotations

import logging
import socket

import pytest
from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.llm import GoogleGenAIProvider, LLMError
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.llm.test_anthropic import CITIES_TOOL, PNG, WEATHER_TOOL, conversation
from tests.llm.wire_cases import GEMINI_KEY, case, drain
from tests.replay_server import ReplayServer, Reply

EXPECTED_CONTENTS = [
    {"role": "user", "parts": [{"text": "Weather here and there?"},
                               {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
    {"role": "model", "parts": [{"text": "Checking both."},
                                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}},
                                {"functionCall": {"name": "get_weather", "args": {"location": "Zürich"}}}]},
    # the function responses alone in their user content, the user's next words in the next one:
    # Gemini 3 refuses a function-response content that also holds text (docs/providers.md)
    {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "18 C, sunny"}}},
                               {"functionResponse": {"name": "get_weather", "response": {"result": "9 C, rain"}}}]},
    {"role": "user", "parts": [{"text": "And tomorrow?"}]},
]


def provider(server: ReplayServer, **kwargs) -> GoogleGenAIProvider:
    return GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=server.url, **kwargs)


def stream_case(name: str, messages=None, **options):
    with ReplayServer([case("gemini", name)]) as server:
        chunks = run(drain(provider(server).stream(messages or [LLMMessage(role="user", content="hi")], **options)))
        return chunks, server.requests


def test_request_path_header_and_body():
    with ReplayServer([case("gemini", "text")]) as server:
        run(drain(provider(server).stream(conversation(), tools=[WEATHER_TOOL, CITIES_TOOL], temperature=0.3,
                                          max_tokens=256, tool_choice="auto")))
    sent = server.requests[0]
    assert (sent.method, sent.path, sent.query) == ("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                                                    {"alt": ["sse"]})
    assert sent.headers["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in sent.headers
    assert sent.json() == {
        "contents": EXPECTED_CONTENTS,
        "systemInstruction": {"parts": [{"text": "You are terse."}], "role": "user"},
        "tools": [{"functionDeclarations": [
            {"name": "get_weather", "description": "Current weather for a city",
             "parametersJsonSchema": WEATHER_TOOL["function"]["parameters"]},
            {"name": "list_cities", "parametersJsonSchema": {"type": "object", "properties": {}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 256},
    }


def test_text_stream_and_usage():
    chunks, _ = stream_case("text")
    assert "".join(c.content_delta or "" for c in chunks) == "Hello! The capital of France is Paris — la Ville Lumière."
    assert chunks[-1].finish_reason == "stop"
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.cached_prompt_tokens) == (9, 14, 23, 0)
    assert [c for c in chunks[:-1] if c.finish_reason or c.usage] == []


def test_function_calls_get_ids_unique_within_the_response_and_finish_is_tool_calls():
    chunks, _ = stream_case("tool_calls")
    calls = [c.tool_call for c in chunks if c.tool_call is not None]
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}),
        ("get_weather", {"location": "Zürich", "days": [1, 2, 3], "detail": {"hourly": True}}),
        ("list_cities", {}),
    ]
    assert len({c.id for c in calls}) == 3 and all(c.id for c in calls)
    assert chunks[-1].finish_reason == "tool_calls"
    assert chunks[-1].usage.completion_tokens == 52 + 50


def test_ids_differ_between_responses():
    first, _ = stream_case("tool_calls")
    second, _ = stream_case("tool_calls")
    ids = [c.tool_call.id for c in first + second if c.tool_call]
    assert len(set(ids)) == 6


def test_thought_parts_become_reasoning_and_thought_tokens_count_as_completion():
    chunks, _ = stream_case("thinking")
    assert "".join(c.reasoning_delta or "" for c in chunks) == (
        "**Multiplying**\n\nThe user asks for 27 * 453. 27 * 453 = 10800 + 1431 = 12231.")
    assert "".join(c.content_delta or "" for c in chunks) == "27 × 453 = **12,231**"
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (12, 107)


def test_cached_content_tokens_and_max_tokens_is_length():
    chunks, _ = stream_case("cache_usage")
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens) == (10500, 10240, 64)
    assert chunks[-1].finish_reason == "length"


def test_safety_finish_is_content_filter():
    chunks, _ = stream_case("safety")
    assert chunks[-1].finish_reason == "content_filter"


@pytest.mark.parametrize(("reason", "finish"), [
    # IMAGE_OTHER: the finished image withheld by the output check (docs: IMAGE_* -> content_filter)
    ("IMAGE_OTHER", "content_filter"), ("IMAGE_SAFETY", "content_filter"),
    ("ESCALATION", "content_filter"), ("MODEL_ARMOR", "content_filter"), ("PUP_LIMITED_DISABLED", "content_filter"),
    ("CONTINUATION", "length"),  # the per-request token limit cut the answer: not a natural stop
    ("STOP", "stop"), ("OTHER", "stop"), ("FINISH_REASON_UNSPECIFIED", "stop"),
])
def test_finish_reasons_that_filter_or_cut_the_answer_are_not_stop(reason, finish):
    body = ('data: {"candidates":[{"content":{"parts":[{"text":"part"}],"role":"model"},"finishReason":"%s"}],'
            '"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":1}}\r\n\r\n' % reason).encode()
    with ReplayServer([Reply(chunks=[body])]) as server:
        chunks = run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert chunks[-1].finish_reason == finish


def test_blocked_prompt_is_content_filter():
    body = b'data: {"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":7}}\r\n\r\n'
    with ReplayServer([Reply(chunks=[body])]) as server:
        chunks = run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert chunks[-1].finish_reason == "content_filter" and chunks[-1].usage.prompt_tokens == 7


def test_thought_signature_is_sent_back_with_its_call():
    with ReplayServer([case("gemini", "tool_calls"), case("gemini", "text")]) as server:
        gemini = provider(server)
        message, _ = run(gemini.complete([LLMMessage(role="user", content="weather?")]))
        results = [LLMMessage(role="tool", tool_call_id=c["id"], content="ok") for c in message.tool_calls]
        run(drain(gemini.stream([LLMMessage(role="user", content="weather?"), message, *results])))
    model_turn = server.requests[1].json()["contents"][1]
    assert model_turn["role"] == "model"
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == "CiQB0e2Kb0wFvGq8w2kFi3c0nQx6sS1rB8Zl5r4fQmJ7ZtYk0vUKXgHR7Ypu"
    assert ["thoughtSignature" in p for p in calls] == [True, False, False]
    responses = server.requests[1].json()["contents"][2]["parts"]
    assert [p["functionResponse"]["name"] for p in responses] == ["get_weather", "get_weather", "list_cities"]


def test_tool_result_without_a_matching_call_is_refused_and_nothing_sent():
    messages = [LLMMessage(role="user", content="hi"), LLMMessage(role="tool", tool_call_id="nope", content="x")]
    with ReplayServer([case("gemini", "text")]) as server:
        with pytest.raises(SteerableError) as info:
            run(drain(provider(server).stream(messages)))
        assert server.requests == []
    assert "nope" in str(info.value) and info.value.hint


def test_a_tool_result_may_name_its_function_itself():
    messages = [LLMMessage(role="user", content="hi"),
                LLMMessage(role="tool", tool_call_id="elsewhere", name="lookup", content="x")]
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    body = GoogleGenAIProvider("gemini-2.5-flash", "k").build_body(
        messages, tools=[lookup], tool_choice={"type": "function", "function": {"name": "lookup"}})
    assert body["contents"][1] == {"role": "user",
                                   "parts": [{"functionResponse": {"name": "lookup", "response": {"result": "x"}}}]}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}}


def collect_error(name: str) -> tuple[LLMError, list]:
    seen: list = []
    with ReplayServer([case("gemini", name)]) as server:
        async def go():
            async for chunk in provider(server).stream([LLMMessage(role="user", content="hi")]):
                seen.append(chunk)
        with pytest.raises(LLMError) as info:
            run(go())
    return info.value, seen


def test_error_object_mid_stream_is_classified_by_its_code():
    error, seen = collect_error("error_event")
    assert (error.kind, error.status_code) == ("server", 503)
    assert "".join(c.content_delta or "" for c in seen) == "Let me think about"


def test_error_written_outside_the_sse_framing_is_classified_by_its_code():
    # Gemini ends a 200 stream it cannot finish (a mid-stream quota 429, an overload 503) with
    # the error as pretty-printed JSON lines, no "data:" prefix; google-genai reads them
    # (_RawJsonLineBuffer) and raises by the code. It was lost: "transport", no retry delay.
    error, seen = collect_error("error_raw_json")
    assert (error.kind, error.status_code, error.retry_after_ms) == ("rate_limit", 429, 21_000)
    assert "Resource exhausted" in str(error)
    assert "".join(c.content_delta or "" for c in seen) == "The first half of an answer"
    assert all(c.finish_reason is None for c in seen)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("size", [1, 7, 10_000])
def test_raw_error_lines_are_read_in_any_split_and_line_ending(newline, size):
    raw = ('{\n  "error": {\n    "code": 503,\n    "message": "The model is overloaded. {Try} \\"later\\".",\n'
           '    "status": "UNAVAILABLE"\n  }\n}').replace("\n", newline).encode()  # no newline after the last }
    with ReplayServer([Reply(chunks=[raw[i:i + size] for i in range(0, len(raw), size)])]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert (info.value.kind, info.value.status_code) == ("server", 503)
    assert 'The model is overloaded. {Try} "later".' in str(info.value)


def test_raw_error_then_a_dropped_connection_is_the_error_not_transport():
    raw = b'data: {"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"}}]}\r\n\r\n'
    err = b'{\r\n  "error": {\r\n    "code": 500,\r\n    "message": "Internal error",\r\n    "status": "INTERNAL"\r\n  }\r\n}\r\n'
    reply = Reply(chunks=[raw, err, b"never sent"], drop_after=2)
    reply.headers["content-length"] = "999"  # the body ends short: httpx reports a dropped connection
    with ReplayServer([reply]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert (info.value.kind, info.value.status_code) == ("server", 500) and "Internal error" in str(info.value)


def test_lines_outside_the_framing_that_are_no_error_object_change_nothing():
    body = (b'{"note": "not an error"}\r\nstray text\r\n'
            b'data: {"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP"}]}\r\n\r\n')
    with ReplayServer([Reply(chunks=[body])]) as server:
        chunks = run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert "".join(c.content_delta or "" for c in chunks) == "ok" and chunks[-1].finish_reason == "stop"


def test_connection_dropped_before_a_finish_reason_is_transport():
    error, seen = collect_error("dropped")
    assert error.kind == "transport"
    assert all(c.finish_reason is None and c.tool_call is None for c in seen)
    assert "".join(c.content_delta or "" for c in seen) == "I'll check the weather in both cities."


@pytest.mark.parametrize(("name", "kind", "status", "retry_after_ms"), [
    ("overflow", "context_overflow", 400, None),
    ("rate_limit", "rate_limit", 429, 13_000),
    ("server_error", "server", 500, None),
])
def test_http_errors_are_classified(name, kind, status, retry_after_ms):
    error, seen = collect_error(name)
    assert (error.kind, error.status_code, error.retry_after_ms, error.provider) == (kind, status, retry_after_ms,
                                                                                     "gemini")
    assert seen == []


def test_malformed_function_call_finish_is_a_retryable_error():
    body = b'data: {"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL"}]}\r\n\r\n'
    with ReplayServer([Reply(chunks=[body])]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "server" and "MALFORMED_FUNCTION_CALL" in str(info.value)


def test_malformed_json_in_a_data_line_is_a_clear_llm_error():
    with ReplayServer([Reply(chunks=[b'data: {"candidates": [\r\n\r\n'])]) as server:
        with pytest.raises(LLMError) as info:
            run(drain(provider(server).stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "invalid_request"


@pytest.mark.parametrize("name", ["overflow", "rate_limit", "server_error", "error_event", "error_raw_json", "dropped"])
def test_api_key_is_never_in_an_error_or_a_log_line(name, caplog):
    caplog.set_level(logging.DEBUG)
    error, _ = collect_error(name)
    everything = " ".join([str(error), error.hint, error.body or "", repr(error.to_dict()), caplog.text])
    assert GEMINI_KEY not in everything


def test_unreachable_server_is_transport_naming_the_url_without_the_key():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bad = GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=f"http://127.0.0.1:{port}", timeout=2.0)
    with pytest.raises(LLMError) as info:
        run(drain(bad.stream([LLMMessage(role="user", content="hi")])))
    assert info.value.kind == "transport"
    assert f"127.0.0.1:{port}" in str(info.value) and GEMINI_KEY not in str(info.value)


@pytest.mark.parametrize(("kwargs", "words"), [({"model": " "}, "model"), ({"base_url": "file:///tmp"}, "http")])
def test_bad_construction_is_a_steerable_error_with_a_hint(kwargs, words):
    with pytest.raises(SteerableError) as info:
        GoogleGenAIProvider(**{"model": "gemini-2.5-flash", "api_key": GEMINI_KEY, **kwargs})
    assert words in str(info.value) and info.value.hint


def test_thinking_budget_asks_for_thoughts():
    body = GoogleGenAIProvider("gemini-2.5-flash", "k").build_body([LLMMessage(role="user", content="hi")],
                                                                  thinking_budget=1024)
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}


def test_remote_images_are_file_data_with_a_mime_type_when_the_extension_names_one():
    content = [{"type": "image_url", "image_url": {"url": "https://example.com/a/cat.jpeg?size=2"}},
               {"type": "image_url", "image_url": {"url": "https://example.com/render"}}]
    body = GoogleGenAIProvider("gemini-2.5-flash", "k").build_body([LLMMessage(role="user", content=content)])
    assert body["contents"][0]["parts"] == [
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a/cat.jpeg?size=2"}},
        {"fileData": {"fileUri": "https://example.com/render"}}]


def test_models_prefix_is_accepted():
    gemini = GoogleGenAIProvider("models/gemini-2.5-pro", "k", base_url="http://127.0.0.1:9")
    assert gemini.url == "http://127.0.0.1:9/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def test_extra_headers_are_sent():
    with ReplayServer([case("gemini", "text")]) as server:
        run(drain(provider(server, extra_headers={"x-goog-user-project": "p1"}).stream(
            [LLMMessage(role="user", content="hi")])))
    assert server.requests[0].headers["x-goog-user-project"] == "p1"
    assert server.requests[0].headers["x-goog-api-key"] == GEMINI_KEY


def test_empty_text_is_not_sent_as_a_part_and_an_empty_turn_is_left_out():
    messages = [LLMMessage(role="user", content="hi"), LLMMessage(role="assistant", content=""),
                LLMMessage(role="user", content=[{"type": "text", "text": ""}, {"type": "text", "text": "again"}])]
    body = GoogleGenAIProvider("gemini-2.5-flash", "k").build_body(messages)
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}, {"text": "again"}]}]


def test_gemini_3_calls_of_the_current_turn_without_a_kept_signature_get_the_documented_skip():
    # Gemini 3 validates the thought signatures of the current turn's calls (every step since the
    # last user text) and answers 400 "Function call is missing a thought_signature" when the
    # first call of a step has none. A turn resumed from the record after a crash (loop.resume),
    # or a transcript handed over from another provider, has none: Google documents the value
    # "skip_thought_signature_validator" for exactly that. Earlier turns are not validated, and
    # a signature this provider kept is sent as before.
    def calls(*names):
        return [{"id": f"c_{n}", "name": "get_weather", "arguments": {"location": n}} for n in names]

    messages = [LLMMessage(role="user", content="Paris?"),
                LLMMessage(role="assistant", tool_calls=calls("Paris")),
                LLMMessage(role="tool", tool_call_id="c_Paris", content="18 C"),
                LLMMessage(role="assistant", content="18 C."),
                LLMMessage(role="user", content="Zürich and Bern?"),
                LLMMessage(role="assistant", content="Both.", tool_calls=calls("Zürich", "Bern")),
                LLMMessage(role="tool", tool_call_id="c_Zürich", content="9 C"),
                LLMMessage(role="tool", tool_call_id="c_Bern", content="8 C"),
                LLMMessage(role="assistant", tool_calls=calls("Basel"))]

    def signatures(model, kept=None):
        gemini = GoogleGenAIProvider(model, "k")
        gemini._signatures.update(kept or {})
        steps = [c["parts"] for c in gemini.build_body(messages)["contents"] if c["role"] == "model"]
        return [[p.get("thoughtSignature") for p in parts if "functionCall" in p] for parts in steps]

    skip = "skip_thought_signature_validator"
    assert signatures("gemini-3-pro-preview") == [[None], [], [skip, None], [skip]]
    assert signatures("models/gemini-3.1-flash") == [[None], [], [skip, None], [skip]]
    assert signatures("gemini-3-pro-preview", {"c_Zürich": "real"}) == [[None], [], ["real", None], [skip]]
    assert signatures("gemini-2.5-flash") == [[None], [], [None, None], [None]]


def test_a_content_with_function_responses_holds_nothing_else():
    # Gemini 3 answers a user content mixing functionResponse and text parts with 400 "Requests
    # ending with a model turn are not supported": text and images before or after the responses
    # of one step go in user contents of their own; the step's responses stay together
    call = {"id": "c1", "name": "lookup", "arguments": {}}
    messages = [LLMMessage(role="user", content="look it up"),
                LLMMessage(role="assistant", tool_calls=[call, {**call, "id": "c2"}]),
                LLMMessage(role="tool", tool_call_id="c1", content="one"),
                LLMMessage(role="tool", tool_call_id="c2", content="two"),
                LLMMessage(role="user", content="Also Berlin."),
                LLMMessage(role="user", content=[{"type": "text", "text": "And this:"},
                                                 {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]),
                LLMMessage(role="tool", tool_call_id="elsewhere", name="lookup", content="three")]
    with ReplayServer([case("gemini", "text")]) as server:
        run(drain(provider(server).stream(messages)))
    response = lambda text: {"functionResponse": {"name": "lookup", "response": {"result": text}}}  # noqa: E731
    assert server.requests[0].json()["contents"] == [
        {"role": "user", "parts": [{"text": "look it up"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}},
                                    {"functionCall": {"name": "lookup", "args": {}}}]},
        {"role": "user", "parts": [response("one"), response("two")]},
        {"role": "user", "parts": [{"text": "Also Berlin."}, {"text": "And this:"},
                                   {"inlineData": {"mimeType": "image/png", "data": PNG}}]},
        {"role": "user", "parts": [response("three")]},
    ]
