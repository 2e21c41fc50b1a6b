"""The shared HTTP plumbing against a real server on 127.0.0.1 (and a closed port)."""

from __future__ import annotations

import socket
import time

import pytest
from steerable_agent_runtime.llm import (
    LLMError,
    ProviderConfigError,
    ToolDefinitionError,
)
from steerable_agent_runtime.llm.http import (
    ClientCache,
    make_client,
    redact_headers,
    require_model,
    stream_sse,
    validate_base_url,
)
from steerable_agent_runtime.llm.tooldefs import function_tools

from tests.helpers import run
from tests.replay_server import ReplayServer, Reply

KEY = "sk-test-key-0123456789"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def events(url: str, *, timeout: float | None = None) -> list:
    async with make_client(timeout) as client:
        return [m async for m in stream_sse(client, url, headers={"authorization": f"Bearer {KEY}"},
                                            body={"x": 1}, provider="p", secrets=[KEY])]


@pytest.mark.parametrize("bad", ["", None, "ftp://host/v1", "localhost:8080/v1", "file:///etc", "http://",
                                 "http://[::1/v1", "http://127.0.0.1:99999/v1", "http://h:port/v1"])
def test_bad_base_url_is_a_config_error_with_hint(bad):
    with pytest.raises(ProviderConfigError) as info:
        validate_base_url(bad, provider="p")
    assert info.value.hint and "\n" not in str(info.value)


def test_base_url_trailing_slash_dropped_and_model_required():
    assert validate_base_url("http://127.0.0.1:8000/v1/", provider="p") == "http://127.0.0.1:8000/v1"
    assert require_model(" m ", provider="p") == "m"
    for bad in ("", "  ", None):
        with pytest.raises(ProviderConfigError, match="model"):
            require_model(bad, provider="p")


def test_redact_headers():
    out = redact_headers({"Authorization": "Bearer x", "x-api-key": "k", "x-goog-api-key": "g", "accept": "a"})
    assert out == {"Authorization": "[redacted]", "x-api-key": "[redacted]", "x-goog-api-key": "[redacted]",
                   "accept": "a"}


def test_stream_sse_yields_events_and_sends_json():
    with ReplayServer([Reply(chunks=[b"data: 1\n\n", b"data: 2\n\n"])]) as server:
        msgs = run(events(server.url + "/v1/x"))
        [req] = server.requests
    assert [m.data for m in msgs] == ["1", "2"]
    assert req.path == "/v1/x" and req.json() == {"x": 1}
    assert req.headers["content-type"] == "application/json" and req.headers["accept"] == "text/event-stream"


def test_http_error_status_is_classified_with_retry_after():
    reply = Reply.json(429, {"error": {"message": "slow down"}}, {"retry-after": "3"})
    with ReplayServer([reply]) as server, pytest.raises(LLMError) as info:
        run(events(server.url + "/v1/x"))
    assert (info.value.kind, info.value.status_code, info.value.retry_after_ms) == ("rate_limit", 429, 3000)
    assert "slow down" in str(info.value)


def test_json_error_where_a_stream_was_expected():
    reply = Reply.json(200, {"error": {"message": "overloaded", "type": "server_error"}})
    with ReplayServer([reply]) as server, pytest.raises(LLMError) as info:
        run(events(server.url + "/v1/x"))
    assert info.value.kind == "server"


def test_dropped_connection_is_transport():
    reply = Reply(chunks=[b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"], drop_after=1)
    reply.headers["content-length"] = "999"
    with ReplayServer([reply]) as server, pytest.raises(LLMError) as info:
        run(events(server.url + "/v1/x"))
    assert info.value.kind == "transport" and "dropped" in str(info.value)


def test_unreachable_server_is_transport_within_connect_timeout_without_key():
    url = f"http://127.0.0.1:{closed_port()}/v1/x"
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        run(events(url, timeout=2.0))
    assert time.monotonic() - started < 2.5
    assert info.value.kind == "transport" and url in str(info.value) and KEY not in str(info.value)


def test_client_cache_makes_one_client_per_loop():
    cache = ClientCache()

    async def get():
        first, second = cache.get(), cache.get()
        assert first is second
        return first

    one, two = run(get()), run(get())
    assert one is not two


def test_tool_definitions_must_be_function_form_naming_the_tool():
    ok = function_tools([{"type": "function", "function": {"name": "read", "description": "d",
                                                            "parameters": {"type": "object"}}}], provider="p")
    assert ok == [{"name": "read", "description": "d", "parameters": {"type": "object"}}]
    with pytest.raises(ToolDefinitionError, match="get_weather") as info:
        function_tools([{"name": "get_weather", "input_schema": {}}], provider="p")
    assert info.value.tool == "get_weather"
    with pytest.raises(ToolDefinitionError, match="#1"):
        function_tools([ok and {"type": "function", "function": {"name": "a"}}, "nope"], provider="p")
    with pytest.raises(ToolDefinitionError, match="twice"):
        function_tools([{"type": "function", "function": {"name": "a"}}] * 2, provider="p")


def test_debug_log_of_a_request_shows_no_key(caplog):
    caplog.set_level("DEBUG", logger="steerable_agent_runtime.llm")
    with ReplayServer([Reply(chunks=[b"data: 1\n\n"])]) as server:
        run(events(server.url + "/v1/x"))
    assert "POST" in caplog.text and "[redacted]" in caplog.text and KEY not in caplog.text


def test_clients_share_one_tls_context_per_ca_setting(monkeypatch):
    import certifi
    from steerable_agent_runtime.llm.http import make_client, ssl_context

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first = ssl_context()
    assert ssl_context() is first and first.verify_mode.name == "CERT_REQUIRED" and first.check_hostname
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())  # another CA setting: its own context
    other = ssl_context()
    assert other is not first and ssl_context() is other
    client = make_client()
    run(client.aclose())


@pytest.mark.parametrize("body", [[1], [], ["error"], 7, None])
def test_a_json_body_that_is_not_an_error_object_where_a_stream_was_expected_is_malformed(body):
    # a JSON list of non-objects raised TypeError ("argument of type 'int' is not iterable")
    with ReplayServer([Reply.json(200, body)]) as server, pytest.raises(LLMError) as info:
        run(events(server.url + "/v1/x"))
    assert info.value.kind == "invalid_request" and "JSON body where an event stream was expected" in str(info.value)
