"""provider.keepReasoning through the real sidecar binary (openai_responses over a replay server).

The param is strict (a JSON boolean or absent), refused for a kind that has no reasoning items,
and reaches OpenAIResponsesProvider: with it on, a model the name rule would leave off asks for
the encrypted reasoning and sends it back before its call on the next round; with it off, a
reasoning model name sends neither.
"""

from __future__ import annotations

from tests.llm.openai_cases import TOOLS, reply
from tests.replay_server import ReplayServer

MESSAGES = [{"role": "user", "content": "Weather in Lisbon?"}]


def stream_params(model: ReplayServer, name: str, **provider) -> dict:
    return {"chatId": "c1", "messages": MESSAGES, "tools": TOOLS,
            "provider": {"kind": "openai_responses", "model": name, "baseUrl": model.url + "/v1", **provider}}


def weather(method: str, params: dict) -> dict:
    assert method == "tool.invoke" and params["name"] == "get_weather"
    return {"success": True, "data": "21 C"}


def tool_turn(spawn, name: str, **provider) -> list:
    """A stream answered by the recorded reasoning + call, then a text: the two requests sent."""
    with ReplayServer([reply("openai_responses", "reasoning_tool_call"), reply("openai_responses", "text")]) as model:
        sc = spawn(on_reverse=weather)
        sc.wait_ready()
        stream_id = sc.call("agent.chat.stream", stream_params(model, name, **provider))["streamId"]
        assert sc.wait_done(stream_id)["status"] == "completed"
        sc.close_stdin()
        assert sc.exit_code() == 0
    assert len(model.requests) == 2
    return [r.json() for r in model.requests]


def test_keep_reasoning_on_sends_the_reasoning_back_before_its_call(spawn):
    first, second = tool_turn(spawn, "gpt-4.1-mini", keepReasoning=True)
    assert first["include"] == ["reasoning.encrypted_content"]
    kinds = [item.get("type") or item["role"] for item in second["input"]]
    assert kinds[:3] == ["user", "reasoning", "function_call"] and "function_call_output" in kinds
    assert second["input"][1]["encrypted_content"]


def test_keep_reasoning_off_sends_no_reasoning_even_for_a_reasoning_model(spawn):
    first, second = tool_turn(spawn, "gpt-5-mini", keepReasoning=False)
    assert "include" not in first and "include" not in second
    assert [item.get("type") or item["role"] for item in second["input"]] == ["user", "function_call",
                                                                             "function_call_output"]


def test_keep_reasoning_absent_decides_by_the_model_name(spawn):
    first, _ = tool_turn(spawn, "gpt-5-mini")
    assert first["include"] == ["reasoning.encrypted_content"]


def test_keep_reasoning_is_strict_and_only_for_openai_responses(spawn):
    sc = spawn()
    sc.wait_ready()
    base = {"kind": "openai_responses", "model": "gpt-5-mini", "baseUrl": "http://127.0.0.1:9/v1"}
    for value in ("true", 1, 0, "yes", "null", [True], {"on": True}):
        err = sc.request("agent.chat.stream", {"chatId": "c", "messages": MESSAGES,
                                               "provider": {**base, "keepReasoning": value}})["error"]
        assert err["code"] == -32602 and err["data"]["field"] == "provider.keepReasoning", (value, err)
        assert err["data"]["hint"]
    for kind in ("openai_compat", "anthropic", "gemini"):
        err = sc.request("agent.chat.stream", {"chatId": "c", "messages": MESSAGES,
                                               "provider": {**base, "kind": kind, "keepReasoning": True}})["error"]
        assert err["code"] == -32602 and err["data"]["field"] == "provider.keepReasoning", (kind, err)
        assert "openai_responses" in err["message"] and err["data"]["hint"]
    assert sc.notifications_of("stream.done") == []  # nothing was started
    sc.close_stdin()
    assert sc.exit_code() == 0
