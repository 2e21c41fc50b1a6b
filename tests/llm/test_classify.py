"""classify_http_error / classify_error_body / transport errors: every kind, every overflow wording."""

from __future__ import annotations

import email.utils
import json
import time

import httpx
import pytest
from steerable_agent_runtime.llm import LLMError
from steerable_agent_runtime.llm.classify import (
    OVERFLOW_PHRASES,
    classify_error_body,
    classify_http_error,
    malformed_data_error,
    retry_after_ms,
    safe_url,
    stream_cut_error,
    transport_error,
)

RUNTIME_MD_WORDINGS = [
    "context length", "context window", "maximum context", "prompt is too long", "too many tokens",
    "exceeds the maximum allowed input length", "input token count", "request too large",
    "reduce the length", "Range of input length",
]


@pytest.mark.parametrize("wording", RUNTIME_MD_WORDINGS)
@pytest.mark.parametrize("status", [400, 413])
def test_every_overflow_wording_is_context_overflow(wording, status):
    body = {"error": {"message": f"Bad: {wording.upper()} exceeded for this model", "type": "invalid_request_error"}}
    err = classify_http_error(status, json.dumps(body), provider="openai_compat")
    assert (err.kind, err.status_code, err.retryable) == ("context_overflow", status, False)
    assert wording.upper() in str(err)


@pytest.mark.parametrize("body", [
    # OpenAI chat/completions, the Responses API, Anthropic (the prompt alone, and the prompt plus
    # max_tokens), Gemini, vLLM / DeepSeek, llama.cpp's llama-server: each provider's real 400 body
    {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
               "130512 tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
               "param": "messages", "code": "context_length_exceeded"}},
    {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try "
               "again.", "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}},
    {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210311 tokens > "
                                "200000 maximum"}},
    {"type": "error", "error": {"type": "invalid_request_error", "message": "input length and `max_tokens` exceed "
                                "context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and "
                                "try again"}},
    {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed "
               "(1048576).", "status": "INVALID_ARGUMENT"}},
    {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 4500 "
     "tokens (400 in the messages, 4100 in the completion). Please reduce the length of the messages or completion.",
     "type": "BadRequestError", "param": None, "code": 400},
    {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
               "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}},
], ids=["openai-chat", "openai-responses", "anthropic-prompt", "anthropic-prompt-plus-max-tokens", "gemini", "vllm",
        "llama-cpp"])
def test_each_providers_real_overflow_body_is_context_overflow(body):
    assert classify_http_error(400, json.dumps(body), provider="p").kind == "context_overflow"


def test_every_runtime_md_wording_is_in_the_table():
    assert all(w.lower() in OVERFLOW_PHRASES for w in RUNTIME_MD_WORDINGS)


def test_a_400_without_overflow_words_is_invalid_request_and_413_too():
    assert classify_http_error(400, '{"error":{"message":"unknown model"}}').kind == "invalid_request"
    assert classify_http_error(413, "payload").kind == "invalid_request"


@pytest.mark.parametrize("status,kind", [(401, "auth"), (403, "auth"), (408, "transport"), (404, "invalid_request"),
                                         (422, "invalid_request"), (500, "server"), (502, "server"),
                                         (503, "server"), (529, "server"), (429, "rate_limit")])
def test_status_kinds(status, kind):
    err = classify_http_error(status, b"{}", provider="p")
    assert err.kind == kind and err.status_code == status and err.provider == "p"
    assert err.hint


def test_429_retry_after_seconds_and_http_date_and_ms():
    assert classify_http_error(429, "{}", {"Retry-After": "7"}).retry_after_ms == 7000
    assert classify_http_error(429, "{}", {"retry-after": "0.5"}).retry_after_ms == 500
    assert classify_http_error(429, "{}", {"retry-after-ms": "1234", "retry-after": "9"}).retry_after_ms == 1234
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    ms = classify_http_error(429, "{}", {"Retry-After": date}).retry_after_ms
    assert 28_000 <= ms <= 30_000
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert retry_after_ms({"Retry-After": past}) == 0
    assert retry_after_ms({"Retry-After": "soon"}) is None
    assert classify_http_error(429, "{}").retry_after_ms is None


def test_api_key_never_in_message_or_body():
    key = "sk-secret-123456"
    body = {"error": {"message": f"Incorrect API key provided: {key}."}}
    err = classify_http_error(401, json.dumps(body), provider="p", url="http://h/v1?key=" + key, secrets=[key])
    assert key not in str(err) and key not in err.body and key not in json.dumps(err.to_dict())
    assert "[redacted]" in str(err)


def test_safe_url_drops_userinfo_and_key_params():
    assert safe_url("https://u:pw@h.example:8443/v1/x?alt=sse&key=abc") == "https://h.example:8443/v1/x?alt=sse&key=[redacted]"


@pytest.mark.parametrize("body,kind", [
    ({"error": {"message": "The server had an error", "type": "server_error"}}, "server"),
    ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "server"),
    ({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, "rate_limit"),
    ({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"}},
     "context_overflow"),
    ({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}, "rate_limit"),
    ({"error": {"code": 400, "message": "The input token count (1200000) exceeds", "status": "INVALID_ARGUMENT"}},
     "context_overflow"),
    ({"error": {"code": 503, "message": "unavailable"}}, "server"),
    ({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}, "auth"),
    ({"type": "error", "code": "context_length_exceeded", "message": "Your input exceeds the context window"},
     "context_overflow"),
    ({"what": "unknown"}, "server"),
])
def test_error_event_in_stream(body, kind):
    err = classify_error_body(body, provider="p")
    assert err.kind == kind
    assert "error event" in str(err)


def test_transport_errors_name_the_url_not_the_key():
    key = "sk-live-abcdef"
    req = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    for exc, words in [(httpx.ConnectError("refused", request=req), "cannot connect"),
                       (httpx.ConnectTimeout("slow", request=req), "connect timed out"),
                       (httpx.ReadTimeout("slow", request=req), "read timeout"),
                       (httpx.RemoteProtocolError("peer closed " + key, request=req), "dropped")]:
        err = transport_error(exc, url="http://127.0.0.1:9/v1/chat/completions", provider="p", secrets=[key])
        assert isinstance(err, LLMError) and err.kind == "transport" and err.retryable
        assert words in str(err) and "http://127.0.0.1:9/v1/chat/completions" in str(err) and key not in str(err)


def test_stream_cut_and_malformed_data():
    cut = stream_cut_error(url="http://h/x", provider="p", expected="[DONE]")
    assert cut.kind == "transport" and "[DONE]" in str(cut)
    bad = malformed_data_error("{not json", url="http://h/x", provider="p")
    assert bad.kind == "invalid_request" and "{not json" in str(bad)


def test_messages_are_one_line_however_the_body_is_laid_out():
    body = {"error": {"message": "line one\n\n  line two\t" + "x" * 1000}}
    for err in (classify_http_error(500, json.dumps(body)), classify_error_body(body)):
        assert "\n" not in str(err) and "line one line two" in str(err) and len(str(err)) < 600


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["inf", "Infinity", "-inf", "1e400"])
def test_a_retry_after_that_is_not_a_finite_number_is_unreadable_not_a_crash(header, value):
    # float() reads these; int() of the infinity they give raises OverflowError, which escaped
    # classify_http_error as a traceback instead of the 429's LLMError
    err = classify_http_error(429, "{}", {header: value})
    assert (err.kind, err.status_code, err.retry_after_ms) == ("rate_limit", 429, None)
    assert retry_after_ms({"retry-after-ms": value, "retry-after": "4"}) == 4000  # the next header decides
