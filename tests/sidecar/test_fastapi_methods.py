"""create_app over a real uvicorn: the non-streaming methods and their errors as SSE responses."""

from __future__ import annotations

import httpx
from steerable_agent_runtime import InMemoryStorage
from steerable_agent_runtime.transport import create_app

from .served import Served, sse_frames


def post(client: httpx.Client, method: str, params: object = None) -> tuple[int, list[dict]]:
    response = client.post(f"/{method}", json=params if params is not None else {})
    assert response.headers["content-type"].startswith("text/event-stream")
    return response.status_code, list(sse_frames(iter(response.text.splitlines())))


def test_sessions_over_http_sse():
    with Served(create_app(InMemoryStorage())) as served, httpx.Client(base_url=served.url, timeout=20) as client:
        status, frames = post(client, "agent.session.create", {"chatId": "c1", "userId": "u1"})
        assert status == 200 and frames[0]["event"] == "result"
        sid = frames[0]["data"]["sessionId"]
        status, frames = post(client, "agent.session.get", {"sessionId": sid})
        assert frames[0]["data"]["chatId"] == "c1"
        status, frames = post(client, "agent.session.end", {"sessionId": sid})
        assert frames[0]["data"]["isActive"] is False
        status, frames = post(client, "system.ping")
        assert status == 200 and frames[0]["data"]["pong"] is True


def test_errors_over_http_carry_the_json_rpc_error_and_a_matching_status():
    with Served(create_app(InMemoryStorage())) as served, httpx.Client(base_url=served.url, timeout=20) as client:
        status, frames = post(client, "agent.session.get", {"sessionId": "missing"})
        assert status == 404 and frames[0]["event"] == "error" and frames[0]["data"]["code"] == -32001
        status, frames = post(client, "agent.session.create", {"chatId": 5})
        assert status == 400 and frames[0]["data"]["code"] == -32602 and frames[0]["data"]["data"]["field"] == "chatId"
        status, frames = post(client, "no.such.method")
        assert status == 404 and frames[0]["data"]["code"] == -32601
        status, frames = post(client, "system.shutdown")
        assert status == 404 and frames[0]["data"]["code"] == -32601
        response = client.post("/agent.session.list", content=b"{not json")
        assert response.status_code == 400 and list(sse_frames(iter(response.text.splitlines())))[0]["data"]["code"] == -32700
        for body, code in [(b'{"chatId": "c", "stageData": {"x": NaN}}', -32700),
                           (b'{"chatId": "c", "stageData": {"x": "\\ud800"}}', -32602)]:
            response = client.post("/agent.session.create", content=body)  # read as strictly as a stdio frame
            error = list(sse_frames(iter(response.text.splitlines())))[0]["data"]
            assert response.status_code == 400 and error["code"] == code, error
        assert post(client, "agent.session.list")[1][0]["data"]["sessions"] == []
        status, frames = post(client, "rpc.reply", {"id": "rv-404", "result": {}})
        assert status == 200 and frames[0]["data"] == {"delivered": False}
        for frame in frames:
            assert frame["data"]
