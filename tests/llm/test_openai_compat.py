"""OpenAICompatProvider over real HTTP: the recorded streams parse as the official SDK parses them."""

from __future__ import annotations

import json
import time

import openai
import pytest
from steerable_agent_runtime.llm import (
    LLMError,
    OpenAICompatProvider,
    ProviderConfigError,
    ToolDefinitionError,
)
from steerable_agent_runtime.llm.types import LLMUsage
from steerable_agent_runtime.models import LLMMessage

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
from tests.replay_server import Reply, ReplayServer

DIR = "openai_compat"
MODEL = "gpt-4.1-mini"


def ours(server: ReplayServer, **kwargs):
    provider = OpenAICompatProvider(MODEL, base_url=server.url + "/v1", api_key=KEY)
    return run(collect_stream(provider, **kwargs))


def sdk(server: ReplayServer, messages=None, tools=None):
    """What the SDK's stream accumulator assembles: text, reasoning, calls, usage, finish."""
    client = sdk_client(server.url + "/v1")
    kwargs = {"tools": tools} if tools else {}
    reasoning = []
    with client.chat.completions.stream(model=MODEL, messages=messages or [{"role": "user", "content": "hi"}],
                                        stream_options={"include_usage": True}, **kwargs) as stream:
        for event in stream:
            if event.type == "chunk" and event.chunk.choices:
                extra = event.chunk.choices[0].delta.model_extra or {}
                reasoning.append(extra.get("reasoning_content") or "")
        final = stream.get_final_completion()
    message = final.choices[0].message
    calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    return message.content or "", "".join(reasoning), calls, final.usage, final.choices[0].finish_reason


def usage_of(sdk_usage) -> LLMUsage:
    details = sdk_usage.prompt_tokens_details
    return LLMUsage(sdk_usage.prompt_tokens, sdk_usage.completion_tokens, sdk_usage.total_tokens,
                    details.cached_tokens if details else 0, 0)


@pytest.mark.parametrize("case", ["text", "tool_calls", "reasoning", "usage_cached"])
def test_fixture_parses_like_the_sdk(case):
    with ReplayServer([reply(DIR, case)]) as server:
        got = ours(server, tools=TOOLS)
        text, reasoning, calls, usage, finish = sdk(server, tools=TOOLS)
    assert got.error is None
    assert got.text == text and got.reasoning == reasoning
    assert [(c.id, c.name, c.arguments) for c in got.calls] == calls
    assert got.usage == usage_of(usage)
    assert got.finish == finish


def test_parallel_fragmented_calls_are_each_emitted_once_whole_before_the_finish():
    with ReplayServer([reply(DIR, "tool_calls")]) as server:
        got = ours(server, tools=TOOLS)
    assert [c.name for c in got.calls] == ["get_weather", "read_file"]
    assert got.calls[1].arguments == {"path": "notes/trip.md", "lines": [1, 40], "query": 'hôtel "Avenida"'}
    assert (got.finish, got.usage.prompt_tokens, got.usage.completion_tokens) == ("tool_calls", 310, 58)


def test_cached_tokens_are_part_of_prompt_tokens():
    with ReplayServer([reply(DIR, "usage_cached")]) as server:
        got = ours(server)
    assert (got.usage.prompt_tokens, got.usage.cached_prompt_tokens, got.usage.total_tokens) == (1240, 1152, 1254)


def test_request_matches_what_the_sdk_sends_for_the_same_conversation():
    native = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [{"type": "text", "text": "What is in this image, and the weather?"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_prev1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": '{"city": "Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "call_prev1", "content": '{"tempC": 21}'},
        {"role": "user", "content": "And tomorrow?"},
    ]
    with ReplayServer([reply(DIR, "text")]) as server:
        ours(server, messages=CONVERSATION, tools=TOOLS, temperature=0.2, max_tokens=300)
        client = sdk_client(server.url + "/v1")
        with client.chat.completions.stream(model=MODEL, messages=native, tools=TOOLS, temperature=0.2,
                                            max_tokens=300, stream_options={"include_usage": True}) as stream:
            stream.until_done()
        mine, theirs = server.requests
    assert mine.path == theirs.path == "/v1/chat/completions"
    assert mine.json() == theirs.json()
    for header in ("authorization", "content-type"):
        assert mine.headers[header] == theirs.headers[header]
    assert mine.headers["authorization"] == f"Bearer {KEY}"


def test_no_api_key_sends_no_authorization():
    with ReplayServer([reply(DIR, "text")]) as server:
        run(collect_stream(OpenAICompatProvider(MODEL, base_url=server.url + "/v1")))
        assert "authorization" not in server.requests[0].headers


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
    assert KEY not in str(got.error)
    if kind == "rate_limit":
        assert got.error.retry_after_ms == 20_000


def test_error_event_mid_stream_raises_like_the_sdk():
    with ReplayServer([reply(DIR, "error_mid_stream")]) as server:
        got = ours(server)
        with pytest.raises(openai.APIError, match="server had an error"):
            sdk(server)
    assert got.error.kind == "server" and got.text == "Here is the first part of"


def test_connection_dropped_mid_stream_is_transport_not_a_short_answer():
    # The server closes the connection after the recorded events: no finish, no [DONE].
    with ReplayServer([reply(DIR, "dropped_mid_stream", drop_after=99)]) as server:
        got = ours(server)
    assert got.error is not None and got.error.kind == "transport" and "[DONE]" in str(got.error)
    assert got.text == "Lisbon is the capital of " and got.finish is None


def test_malformed_json_in_a_data_line_is_a_clear_error():
    with ReplayServer([reply(DIR, "malformed")]) as server:
        got = ours(server)
    assert got.error.kind == "invalid_request" and "malformed stream data" in str(got.error)


def test_unreachable_server_is_transport_within_the_connect_timeout():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    provider = OpenAICompatProvider(MODEL, base_url=url, api_key=KEY, timeout=2.0)
    started = time.monotonic()
    got = run(collect_stream(provider))
    assert time.monotonic() - started < 2.5
    assert got.error.kind == "transport" and url + "/chat/completions" in str(got.error) and KEY not in str(got.error)


@pytest.mark.parametrize("kwargs", [{"model": "", "base_url": "http://127.0.0.1:1/v1"},
                                    {"model": "m", "base_url": "ftp://x"}, {"model": "m", "base_url": "127.0.0.1/v1"}])
def test_bad_settings_raise_a_config_error_with_a_hint(kwargs):
    with pytest.raises(ProviderConfigError) as info:
        OpenAICompatProvider(**kwargs)
    assert info.value.hint


def test_a_tool_not_in_function_form_is_refused_naming_it_and_nothing_is_sent():
    with ReplayServer([reply(DIR, "text")]) as server:
        provider = OpenAICompatProvider(MODEL, base_url=server.url + "/v1")
        bad = [TOOLS[0], {"name": "lookup", "input_schema": {"type": "object"}}]
        with pytest.raises(ToolDefinitionError, match="lookup"):
            run(collect_stream(provider, tools=bad))
        assert server.requests == []


def test_complete_assembles_one_message():
    with ReplayServer([reply(DIR, "tool_calls")]) as server:
        provider = OpenAICompatProvider(MODEL, base_url=server.url + "/v1")
        message, usage = run(provider.complete([], tools=TOOLS))
    assert message.role == "assistant" and [c["id"] for c in message.tool_calls] == [
        "call_Ab12Cd34Ef56Gh78", "call_Zy98Xw76Vu54Ts32"]
    assert usage.total_tokens == 368
    assert isinstance(LLMError, type)


def test_error_null_in_every_chunk_and_a_missing_done_after_the_finish_are_accepted():
    from tests.replay_server import Reply

    chunks = [b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}],"error":null}\n\n',
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"error":null}\n\n']
    with ReplayServer([Reply(chunks=chunks)]) as server:
        got = ours(server)
    assert (got.error, got.text, got.finish, got.usage) == (None, "ok", "length", None)


def _text_stream(text: str) -> list[bytes]:
    return [f'data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}\n\n'.encode(),
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]


def test_after_done_the_body_is_read_to_its_end_so_the_next_request_reuses_the_connection():
    from tests.replay_server import Reply

    with ReplayServer([Reply(chunks=_text_stream("one")), Reply(chunks=_text_stream("two"))]) as server:
        provider = OpenAICompatProvider(MODEL, base_url=server.url + "/v1")

        async def text() -> str:
            return "".join([c.content_delta async for c in provider.stream([LLMMessage(role="user", content="hi")])
                            if c.content_delta])

        async def twice() -> list[str]:
            try:
                return [await text(), await text()]
            finally:
                await provider.aclose()

        assert run(twice()) == ["one", "two"]
    peers = [r.peer for r in server.requests]
    assert peers[0] is not None and peers[0] == peers[1], peers  # one TCP connection for both


def test_a_body_left_open_after_done_costs_at_most_the_grace_not_the_read_timeout():
    from tests.replay_server import Reply

    chunks = [*_text_stream("held"), b'data: {"choices":[{"index":0,"delta":{"content":"late"}}]}\n\n']
    with ReplayServer([Reply(chunks=chunks, stall_after=3, stall_s=60.0)]) as server:
        started = time.monotonic()
        got = ours(server)
        elapsed = time.monotonic() - started
    assert (got.error, got.text, got.finish) == (None, "held", "stop")  # what followed [DONE] is ignored
    assert elapsed < 30, elapsed  # the 1 s grace, not the 60 s stall nor the 300 s read timeout


def _chunk(tool_calls=None, finish=None) -> bytes:
    delta = {"tool_calls": tool_calls} if tool_calls else {}
    return ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m",
                                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n").encode()


def _whole(call_id, name, args, index=None) -> dict:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return call if index is None else {"index": index, **call}


@pytest.mark.parametrize(("shape", "finish"), [
    ("index 0 for every call (Ollama, a model with its own tool parser)", "tool_calls"),
    ("no index at all (Gemini's OpenAI-compatible endpoint)", "stop"),
])
def test_parallel_calls_sent_whole_at_one_index_or_none_are_each_their_own_call(shape, finish):
    # Each call arrives whole in its own chunk with its own id, at index 0 or without an index.
    # They were merged into one call: the last id and name, the arguments run together (so
    # {"__raw_arguments__": ...}), the other calls lost.
    index = 0 if shape.startswith("index 0") else None
    calls = [("call_a1", "get_weather", {"city": "Paris"}), ("call_b2", "get_weather", {"city": "Oslo"}),
             ("call_c3", "read_file", {"path": "x.md"})]
    chunks = [_chunk([_whole(*call, index=index)]) for call in calls]
    chunks += [_chunk(finish=finish), b"data: [DONE]\n\n"]
    with ReplayServer([Reply(chunks=chunks)]) as server:
        got = ours(server, tools=TOOLS)
    assert got.error is None
    assert [(c.id, c.name, c.arguments) for c in got.calls] == calls
    assert got.finish == "tool_calls"


def test_indexless_fragments_without_an_id_continue_the_call_being_streamed():
    chunks = [_chunk([{"id": "call_a1", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}]),
              _chunk([{"function": {"arguments": 'ty": "Par'}}]),
              _chunk([{"function": {"arguments": 'is"}'}}]),
              _chunk([{"id": "call_b2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]),
              _chunk(finish="stop"), b"data: [DONE]\n\n"]
    with ReplayServer([Reply(chunks=chunks)]) as server:
        got = ours(server, tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in got.calls] == [("call_a1", "get_weather", {"city": "Paris"}),
                                                                 ("call_b2", "read_file", {})]


def test_a_fragment_repeating_the_call_or_changing_only_its_id_stays_in_that_call():
    # Servers that repeat id and name on every fragment, and one (Poolside) whose continuation
    # fragments carry another id but no name: still one call, whole.
    chunks = [_chunk([{"index": 0, "id": "call_a1", "type": "function",
                       "function": {"name": "get_weather", "arguments": '{"city"'}}]),
              _chunk([{"index": 0, "id": "call_a1", "type": "function",
                       "function": {"name": "get_weather", "arguments": ': "Pa'}}]),
              _chunk([{"index": 0, "id": "call_zz", "function": {"arguments": 'ris"}'}}]),
              _chunk(finish="tool_calls"), b"data: [DONE]\n\n"]
    with ReplayServer([Reply(chunks=chunks)]) as server:
        got = ours(server, tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in got.calls] == [("call_a1", "get_weather", {"city": "Paris"})]


def test_a_refusal_streams_as_the_answer_text_as_the_sdk_keeps_it_and_as_responses_does():
    # OpenAI streams a refusal (structured outputs, safety) in delta.refusal, not delta.content;
    # it was dropped, so the reply came back empty with "stop". The SDK keeps it as
    # message.refusal; OpenAIResponsesProvider passes response.refusal.delta as text.
    def delta_chunk(delta, finish=None):
        return ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                + "\n\n").encode()

    chunks = [delta_chunk({"role": "assistant", "content": None, "refusal": ""}),
              delta_chunk({"refusal": "I'm sorry, "}), delta_chunk({"refusal": "I can't help with that."}),
              delta_chunk({}, finish="stop"), b"data: [DONE]\n\n"]
    with ReplayServer([Reply(chunks=chunks), Reply(chunks=chunks)]) as server:
        got = ours(server)
        client = sdk_client(server.url + "/v1")
        with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "hi"}]) as stream:
            final = stream.get_final_completion()
    assert got.error is None and final.choices[0].message.refusal == "I'm sorry, I can't help with that."
    assert got.text == final.choices[0].message.refusal and got.finish == "stop"


@pytest.mark.parametrize("model,field", [
    ("o4-mini", "max_completion_tokens"), ("o3", "max_completion_tokens"), ("gpt-5.1", "max_completion_tokens"),
    ("gpt-5-mini-2025-08-07", "max_completion_tokens"), ("gpt-4.1-mini", "max_tokens"),
    ("qwen2.5:7b", "max_tokens"), ("openai/gpt-5", "max_tokens"),
])
def test_max_tokens_is_max_completion_tokens_for_openai_reasoning_models(model, field):
    # OpenAI's o-series and gpt-5 models refuse max_tokens on chat/completions: 400 "Unsupported
    # parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
    # instead." A routed name ("openai/gpt-5") goes to a router that takes max_tokens and maps it.
    with ReplayServer([reply(DIR, "text"), reply(DIR, "text")]) as server:
        provider = OpenAICompatProvider(model, base_url=server.url + "/v1", api_key=KEY)
        run(collect_stream(provider, max_tokens=300))
        with sdk_client(server.url + "/v1").chat.completions.stream(
                model=model, messages=[{"role": "user", "content": "hi"}],
                stream_options={"include_usage": True}, **{field: 300}) as stream:
            stream.until_done()
        mine, theirs = server.requests
    assert mine.json() == theirs.json()
    assert mine.json()[field] == 300 and len({"max_tokens", "max_completion_tokens"} & set(mine.json())) == 1
