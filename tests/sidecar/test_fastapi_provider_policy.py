"""agent.chat.stream over HTTP may reach only the model URLs and read only the key variables the
operator allows (``create_app(..., provider_base_urls=[...], provider_key_envs=[...])``); with
nothing configured, a provider kind's official URL and its own key variable. Anything else is
-32007 (HTTP 403) before any environment variable is read and before any connection. create_app
on a real uvicorn; the model servers are real HTTP servers on 127.0.0.1 that record every
request. (The stdio sidecar still takes any baseUrl and apiKeyEnv: test_streams.py,
test_provider_errors_are_stream_errors_with_the_kind.)"""

from __future__ import annotations

import httpx
import pytest
from steerable_agent_runtime import InMemoryStorage
from steerable_agent_runtime.errors import ConfigValueError
from steerable_agent_runtime.transport import create_app

from tests.replay_server import ReplayServer

from .openai_sse import text_reply
from .served import Served, sse_frames

SECRET = "postgresql://app:s3cr3t-9d41be@db.internal:5432/app"
SECRET_VAR = "SECRET_DB_URL"


def _stream(client: httpx.Client, provider: dict, chat: str = "c1") -> httpx.Response:
    return client.post("/agent.chat.stream", json={"chatId": chat, "messages": [{"role": "user", "content": "go"}],
                                                    "provider": {"kind": "openai_compat", "model": "m", **provider}})


def _refusal(response: httpx.Response, field: str, parameter: str) -> dict:
    """The one error frame of a refused request, checked: 403, -32007, one line, ``data.field``
    and a hint naming the create_app ``parameter``."""
    frames = list(sse_frames(iter(response.text.splitlines())))
    assert response.status_code == 403 and [f["event"] for f in frames] == ["error"], (response.status_code, frames)
    error = frames[0]["data"]
    assert error["code"] == -32007 and "\n" not in error["message"], error
    assert error["data"]["field"] == field and parameter in error["data"]["hint"], error
    return error


def _nothing_written(client: httpx.Client, chat: str = "c1") -> None:
    for method, params, key in (("agent.history.get", {"recordId": chat}, "entries"),
                                ("agent.session.list", {}, "sessions")):
        frames = list(sse_frames(iter(client.post(f"/{method}", json=params).text.splitlines())))
        assert frames[0]["data"][key] == [], frames


def _seen_by(server: ReplayServer) -> bytes:
    """Every byte ``server`` received (headers, path, query, body)."""
    return b"".join(repr((r.method, r.path, r.query, r.headers)).encode() + r.body for r in server.requests)


def test_a_client_chosen_base_url_over_http_is_refused_and_connects_nowhere():
    with ReplayServer([text_reply(["hi"])]) as receiver, Served(create_app(InMemoryStorage())) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        for base_url in (receiver.url + "/v1", receiver.url, "http://169.254.169.254/latest/meta-data",
                         "https://api.anthropic.com"):  # another kind's official URL is not this kind's
            _refusal(_stream(client, {"baseUrl": base_url}), "provider.baseUrl", "provider_base_urls")
        _nothing_written(client)
        assert receiver.requests == []


def test_a_secret_named_as_api_key_env_over_http_reaches_no_one(monkeypatch):
    """The attack itself: a client's baseUrl and a server variable it names as the key. On the
    old code the receiver got ``Authorization: Bearer <the variable's value>``."""
    monkeypatch.setenv(SECRET_VAR, SECRET)
    with ReplayServer([text_reply(["hi"])]) as receiver, Served(create_app(InMemoryStorage())) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        response = _stream(client, {"baseUrl": receiver.url + "/v1", "apiKeyEnv": SECRET_VAR})
        _refusal(response, "provider.baseUrl", "provider_base_urls")
        assert SECRET.encode() not in response.content and b"s3cr3t" not in response.content
        assert receiver.requests == [] and b"s3cr3t" not in _seen_by(receiver)
        _nothing_written(client)


def test_an_api_key_env_the_operator_did_not_allow_is_refused_the_same_way_set_or_unset(monkeypatch):
    """With the receiver an allowed model URL, only the variable is refused: the server's
    secret, the same name once unset, another unset name and the official OPENAI_API_KEY (it
    goes only to OpenAI's own URL) all get the same refusal, bytes and all; the value appears
    nowhere."""
    monkeypatch.setenv(SECRET_VAR, SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-77f0")
    with ReplayServer([text_reply(["hi"])]) as receiver, \
            Served(create_app(InMemoryStorage(), provider_base_urls=[receiver.url + "/v1"])) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:

        def refused(name: str) -> bytes:
            response = _stream(client, {"baseUrl": receiver.url + "/v1", "apiKeyEnv": name})
            _refusal(response, "provider.apiKeyEnv", "provider_key_envs")
            return response.content

        while_set = refused(SECRET_VAR)
        assert SECRET.encode() not in while_set and b"s3cr3t" not in while_set and SECRET_VAR.encode() not in while_set
        monkeypatch.delenv(SECRET_VAR)
        assert refused(SECRET_VAR) == while_set  # nothing tells a set variable from an unset one
        assert refused("STEERABLE_TEST_NEVER_SET") == while_set
        assert refused("OPENAI_API_KEY") == while_set
        assert receiver.requests == [] and b"s3cr3t" not in _seen_by(receiver) and b"sk-official" not in _seen_by(receiver)
        _nothing_written(client)


def test_an_operator_allowed_base_url_and_key_env_work_end_to_end(monkeypatch):
    monkeypatch.setenv("RECEIVER_KEY", "sk-allowed-31c5")
    monkeypatch.setenv(SECRET_VAR, SECRET)
    with ReplayServer([text_reply(["Hello ", "there."])]) as receiver, ReplayServer([text_reply(["no"])]) as other, \
            Served(create_app(InMemoryStorage(), provider_base_urls=[receiver.url + "/v1"],
                              provider_key_envs=["RECEIVER_KEY"])) as served, \
            httpx.Client(base_url=served.url, timeout=30) as client:
        _refusal(_stream(client, {"baseUrl": other.url + "/v1", "apiKeyEnv": "RECEIVER_KEY"}), "provider.baseUrl",
                 "provider_base_urls")
        _refusal(_stream(client, {"baseUrl": receiver.url + "/v1", "apiKeyEnv": SECRET_VAR}), "provider.apiKeyEnv",
                 "provider_key_envs")
        assert receiver.requests == [] and other.requests == []

        spelt = receiver.url + "/v1/"  # the same URL, spelt with a trailing slash
        with client.stream("POST", "/agent.chat.stream", json={
                "chatId": "c1", "messages": [{"role": "user", "content": "go"}],
                "provider": {"kind": "openai_compat", "model": "m", "baseUrl": spelt, "apiKeyEnv": "RECEIVER_KEY"}}) as response:
            assert response.status_code == 200
            frames = [f for f in sse_frames(response.iter_lines()) if "event" in f]
        assert frames[-1]["event"] == "stream.done" and frames[-1]["data"]["status"] == "completed", frames[-1]
        assert "".join(f["data"].get("delta", "") for f in frames if f["event"] == "stream.chunk") == "Hello there."
        assert len(receiver.requests) == 1 and receiver.requests[0].path == "/v1/chat/completions"
        assert receiver.requests[0].headers["authorization"] == "Bearer sk-allowed-31c5"
        assert other.requests == [] and b"s3cr3t" not in _seen_by(receiver)


def test_an_allowed_key_env_that_is_unset_is_still_32602_and_a_malformed_base_url_still_32602():
    with ReplayServer([text_reply(["hi"])]) as receiver, \
            Served(create_app(InMemoryStorage(), provider_base_urls=[receiver.url + "/v1"],
                              provider_key_envs=["STEERABLE_TEST_NEVER_SET"])) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        for provider, field in (({"baseUrl": receiver.url + "/v1", "apiKeyEnv": "STEERABLE_TEST_NEVER_SET"},
                                 "provider.apiKeyEnv"),
                                ({"baseUrl": "http://127.0.0.1:99999/v1"}, "provider.baseUrl")):
            response = _stream(client, provider)
            error = list(sse_frames(iter(response.text.splitlines())))[0]["data"]
            assert response.status_code == 400 and error["code"] == -32602 and error["data"]["field"] == field, error
        assert receiver.requests == []


@pytest.mark.parametrize(("parameter", "value"), [
    ("provider_base_urls", "http://model:8000/v1"), ("provider_base_urls", ["ftp://model/v1"]),
    ("provider_base_urls", ["http://user:secret@model:8000/v1"]), ("provider_base_urls", [""]),
    ("provider_base_urls", ["http://model:99999/v1"]),
    ("provider_key_envs", "MODEL_KEY"), ("provider_key_envs", [""]), ("provider_key_envs", ["MODEL-KEY"]),
    ("provider_key_envs", ["A=B"]), ("provider_key_envs", [5]),
])
def test_create_app_refuses_provider_settings_it_could_not_use(parameter, value):
    with pytest.raises(ConfigValueError) as caught:
        create_app(InMemoryStorage(), **{parameter: value})
    assert caught.value.parameter == parameter and caught.value.hint
    assert "secret" not in caught.value.message


@pytest.mark.parametrize("configured", [{"provider_base_urls": None, "provider_key_envs": None},
                                        {"provider_base_urls": [], "provider_key_envs": []}])
def test_none_or_empty_provider_settings_mean_none_configured(configured):
    with ReplayServer([text_reply(["hi"])]) as receiver, Served(create_app(InMemoryStorage(), **configured)) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        _refusal(_stream(client, {"baseUrl": receiver.url + "/v1"}), "provider.baseUrl", "provider_base_urls")
        assert receiver.requests == []
