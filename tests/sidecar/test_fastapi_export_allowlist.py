"""trace.export over HTTP posts only to the collector endpoints the operator configured
(``create_app(..., export_endpoints=[...])``): any other endpoint, and every endpoint when none
is configured, is refused -32007 (HTTP 403) before a connection is made. create_app on a real
uvicorn; the collectors are real HTTP servers on 127.0.0.1 that record every request."""

from __future__ import annotations

import httpx
import pytest
from steerable_agent_runtime import InMemoryStorage
from steerable_agent_runtime.errors import ConfigValueError
from steerable_agent_runtime.transport import create_app

from tests.helpers import run, span, trace
from tests.replay_server import Reply, ReplayServer

from .served import Served, sse_frames


TRACE_ID = "0af7651916cd43dd8448eb211c80319c"  # W3C form: OTLP carries it as it is


def _storage_with_a_trace() -> InMemoryStorage:
    storage = InMemoryStorage()
    run(storage.upsert_trace(trace(TRACE_ID)))
    run(storage.add_span(TRACE_ID, span("sp1")))
    return storage


def _export(client: httpx.Client, endpoint: str) -> tuple[int, dict]:
    response = client.post("/trace.export", json={"traceId": TRACE_ID, "endpoint": endpoint})
    frames = list(sse_frames(iter(response.text.splitlines())))
    assert len(frames) == 1, frames
    return response.status_code, frames[0]


@pytest.mark.parametrize("configured", [{}, {"export_endpoints": []}, {"export_endpoints": None}])
def test_trace_export_over_http_without_configured_endpoints_is_refused_and_connects_nowhere(configured):
    with ReplayServer([Reply.json(200, {})]) as receiver, \
            Served(create_app(_storage_with_a_trace(), **configured)) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        for endpoint in (receiver.url, receiver.url + "/v1/traces", "http://169.254.169.254/latest/meta-data"):
            status, frame = _export(client, endpoint)
            assert status == 403 and frame["event"] == "error", (status, frame)
            error = frame["data"]
            assert error["code"] == -32007 and "\n" not in error["message"], error
            assert "export_endpoints" in error["data"]["hint"] and error["data"]["field"] == "endpoint", error
        assert receiver.requests == []


def test_trace_export_over_http_posts_only_to_a_configured_endpoint():
    with ReplayServer([Reply.json(200, {})]) as allowed, ReplayServer([Reply.json(200, {})]) as other, \
            Served(create_app(_storage_with_a_trace(), export_endpoints=[allowed.url])) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        for endpoint in (other.url, other.url + "/v1/traces", allowed.url + "/elsewhere",
                         allowed.url.replace("127.0.0.1", "localhost"), "http://169.254.169.254/"):
            status, frame = _export(client, endpoint)
            assert status == 403 and frame["data"]["code"] == -32007, (endpoint, status, frame)
            assert frame["data"]["data"]["hint"], frame
        assert other.requests == [] and allowed.requests == []

        status, frame = _export(client, allowed.url)
        assert status == 200 and frame["event"] == "result" and frame["data"]["outcome"] == "success", frame
        assert len(allowed.requests) == 1 and allowed.requests[0].path == "/v1/traces"
        assert allowed.requests[0].json()["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == TRACE_ID
        status, frame = _export(client, allowed.url + "/v1/traces")  # the same collector, spelt in full
        assert status == 200 and len(allowed.requests) == 2
        assert other.requests == []


def test_a_malformed_endpoint_over_http_is_still_32602_and_a_missing_trace_still_32001():
    with ReplayServer([Reply.json(200, {})]) as allowed, \
            Served(create_app(_storage_with_a_trace(), export_endpoints=[allowed.url])) as served, \
            httpx.Client(base_url=served.url, timeout=20) as client:
        status, frame = _export(client, "ftp://127.0.0.1/")
        assert status == 400 and frame["data"]["code"] == -32602, frame
        response = client.post("/trace.export", json={"traceId": "nope", "endpoint": allowed.url})
        error = list(sse_frames(iter(response.text.splitlines())))[0]["data"]
        assert response.status_code == 404 and error["code"] == -32001, error
        assert allowed.requests == []


@pytest.mark.parametrize("endpoints", [["ftp://collector:4318"], ["http://user:secret@collector:4318"], [""],
                                       "http://collector:4318"])
def test_create_app_refuses_export_endpoints_it_could_not_use(endpoints):
    with pytest.raises(ConfigValueError) as caught:
        create_app(InMemoryStorage(), export_endpoints=endpoints)
    assert caught.value.parameter == "export_endpoints" and caught.value.hint
    assert "secret" not in caught.value.message
