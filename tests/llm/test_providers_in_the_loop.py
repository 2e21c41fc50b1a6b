"""AnthropicProvider (under CacheControlProvider) and GoogleGenAIProvider driving a real CoreLoop.

Round 1 replays the recorded parallel tool calls, the loop runs the tools, round 2 replays a
text answer: the second request must carry the calls and their results in each wire's form.
"""

from __future__ import annotations

import asyncio

from steerable_agent_runtime.llm import (
    AnthropicProvider,
    CacheControlProvider,
    GoogleGenAIProvider,
)
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.tools import ToolRouter, tool

from tests.llm.wire_cases import ANTHROPIC_KEY, GEMINI_KEY, case
from tests.replay_server import ReplayServer

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Weather in SF and Zürich?"}]


def weather_router() -> ToolRouter:
    router = ToolRouter()

    @tool(router=router, description="Current weather for a city", mode="read")
    async def get_weather(location: str, unit: str = "celsius", days: list[int] | None = None,
                          detail: dict | None = None) -> str:
        return f"{location}: 18 {unit}"

    @tool(router=router, description="Cities we know", mode="read")
    async def list_cities() -> list[str]:
        return ["San Francisco", "Zürich"]

    return router


def run_loop(provider) -> list:
    async def go():
        return [e async for e in CoreLoop(provider, weather_router()).run(MESSAGES, chat_id="c1")]
    return asyncio.run(go())


def test_anthropic_round_trip_through_the_loop_with_breakpoints():
    with ReplayServer([case("anthropic", "tool_calls"), case("anthropic", "text")]) as server:
        provider = CacheControlProvider(AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=server.url))
        events = run_loop(provider)
    assert events[-1].kind == "completion" and events[-1].data["status"] == "completed"
    assert [e.data["name"] for e in events if e.kind == "tool_call_result" and e.data["success"]] == [
        "get_weather", "get_weather", "list_cities"]
    second = server.requests[1].json()
    assistant, results = second["messages"][1], second["messages"][2]
    assert [b["id"] for b in assistant["content"] if b["type"] == "tool_use"] == [
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01AbCdEfGhIjKlMnOpQrStUv", "toolu_01NoArgs000000000000000"]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == [b["id"] for b in assistant["content"][1:]]
    assert "San Francisco, CA: 18 celsius" in str(results["content"][0]["content"])
    assert results["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert second["tools"][-1]["cache_control"] == {"type": "ephemeral"}


def test_gemini_round_trip_through_the_loop_names_each_function_response():
    with ReplayServer([case("gemini", "tool_calls"), case("gemini", "text")]) as server:
        events = run_loop(GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=server.url))
    assert events[-1].data["status"] == "completed"
    second = server.requests[1].json()
    model_turn, results = second["contents"][1], second["contents"][2]
    assert [p["functionCall"]["name"] for p in model_turn["parts"] if "functionCall" in p] == [
        "get_weather", "get_weather", "list_cities"]
    assert [p["functionResponse"]["name"] for p in results["parts"]] == ["get_weather", "get_weather", "list_cities"]
    assert "thoughtSignature" in model_turn["parts"][1]


def test_gemini_a_steer_after_the_tool_results_goes_in_a_user_content_of_its_own():
    async def go(provider):
        loop = CoreLoop(provider, weather_router())
        events = []
        async for event in loop.run(MESSAGES, chat_id="c1"):
            events.append(event)
            if event.kind == "tool_call_result" and not loop.steer_pending and len(events) < 40:
                loop.steer("Also Berlin, please.")
        return events

    with ReplayServer([case("gemini", "tool_calls"), case("gemini", "text")]) as server:
        events = asyncio.run(go(GoogleGenAIProvider("gemini-3-flash-preview", GEMINI_KEY, base_url=server.url)))
    assert events[-1].data["status"] == "completed"
    assert [e.data["content"] for e in events if e.kind == "steer"] == ["Also Berlin, please."]
    contents = server.requests[1].json()["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "user"]
    assert [list(p) for p in contents[2]["parts"]] == [["functionResponse"]] * 3
    assert contents[3]["parts"] == [{"text": "Also Berlin, please."}]
