"""A tool_choice on a request without tools: one rule for every wire, over real HTTP.

The APIs refuse a tool_choice with no tools (Anthropic: 400 "tool_choice may only be specified
while providing tools"; chat/completions: 400 "'tool_choice' is only allowed when 'tools' are
specified"; Gemini: 400 "Function calling config is set without function_declarations"). So with
no tools, "auto" and "none" are left out of the body (without tools the model calls none either
way), and "required" or a named function, which no request without tools can honour, raise
ProviderConfigError before anything is sent. A CoreLoop whose host registered no tools runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from steerable_agent_runtime.llm import (
    AnthropicProvider,
    GoogleGenAIProvider,
    OpenAICompatProvider,
    OpenAIResponsesProvider,
    ProviderConfigError,
)
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.models import LLMMessage
from steerable_agent_runtime.tools import ToolRouter

from tests.helpers import run
from tests.llm.openai_cases import KEY, TOOLS, reply
from tests.llm.wire_cases import ANTHROPIC_KEY, GEMINI_KEY, case, drain
from tests.replay_server import ReplayServer, Reply

NAMED = {"type": "function", "function": {"name": "read_file"}}
CHOICE_KEYS = ("tool_choice", "toolConfig")


def anthropic(url: str) -> AnthropicProvider:
    return AnthropicProvider("claude-sonnet-4-6", ANTHROPIC_KEY, base_url=url)


def gemini(url: str) -> GoogleGenAIProvider:
    return GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=url)


def chat(url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider("gpt-4.1-mini", base_url=url + "/v1", api_key=KEY)


def responses(url: str) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider("gpt-4.1-mini", KEY, base_url=url + "/v1")


#: (provider factory, the reply of a plain text answer on its wire)
WIRES: dict[str, tuple[Callable[[str], Any], Callable[[], Reply]]] = {
    "anthropic": (anthropic, lambda: case("anthropic", "text")),
    "gemini": (gemini, lambda: case("gemini", "text")),
    "openai_compat": (chat, lambda: reply("openai_compat", "text")),
    "openai_responses": (responses, lambda: reply("openai_responses", "text")),
}


def sent_body(wire: str, tools: Any, **options: Any) -> dict[str, Any]:
    make, answer = WIRES[wire]
    with ReplayServer([answer()]) as server:
        run(drain(make(server.url).stream([LLMMessage(role="user", content="hi")], tools=tools, **options)))
    assert len(server.requests) == 1
    return server.requests[0].json()


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("tools", [None, []])
@pytest.mark.parametrize("choice", ["auto", "none"])
def test_auto_or_none_without_tools_is_left_out_of_the_body(wire, tools, choice):
    body = sent_body(wire, tools, tool_choice=choice)
    assert [key for key in CHOICE_KEYS if key in body] == []
    assert "tools" not in body


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("choice", ["required", NAMED])
def test_a_choice_that_needs_tools_without_tools_raises_and_sends_nothing(wire, choice):
    make, answer = WIRES[wire]
    with ReplayServer([answer()]) as server:
        with pytest.raises(ProviderConfigError) as info:
            run(drain(make(server.url).stream([LLMMessage(role="user", content="hi")], tools=[], tool_choice=choice)))
        assert server.requests == []
    error = info.value
    assert "\n" not in str(error) and "tool_choice" in str(error) and "no tools" in str(error)
    assert "tools=" in error.hint and "'auto'" in error.hint
    assert error.provider == make("http://127.0.0.1:1").name


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_choice_that_is_not_understood_raises_also_without_tools(wire):
    make, answer = WIRES[wire]
    with ReplayServer([answer()]) as server:
        with pytest.raises(ProviderConfigError, match="sometimes"):
            run(drain(make(server.url).stream([LLMMessage(role="user", content="hi")], tool_choice="sometimes")))
        assert server.requests == []


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("choice", ["auto", "required", "none", NAMED])
def test_with_tools_every_choice_is_still_sent(wire, choice):
    body = sent_body(wire, TOOLS, tool_choice=choice)
    assert [key for key in CHOICE_KEYS if key in body] != []


class WithToolChoice:
    """A host's provider wrapper that asks every request for one tool_choice."""

    def __init__(self, inner: Any, tool_choice: Any) -> None:
        self.inner, self.tool_choice = inner, tool_choice
        self.name, self.model = inner.name, inner.model

    def stream(self, messages, *, tools=None, temperature=None, **options):
        return self.inner.stream(messages, tools=tools, temperature=temperature, tool_choice=self.tool_choice,
                                 **options)


def run_loop(provider: Any) -> list:
    async def go():
        loop = CoreLoop(provider, ToolRouter())  # a host that registered no tools
        return [e async for e in loop.run([{"role": "user", "content": "hi"}], chat_id="c1")]
    return asyncio.run(go())


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_loop_with_no_tools_and_tool_choice_auto_completes(wire):
    make, answer = WIRES[wire]
    with ReplayServer([answer()]) as server:
        events = run_loop(WithToolChoice(make(server.url), "auto"))
    assert events[-1].kind == "completion" and events[-1].data["status"] == "completed"
    assert len(server.requests) == 1
    body = server.requests[0].json()
    assert [key for key in ("tools", *CHOICE_KEYS) if key in body] == []


def test_a_loop_with_no_tools_and_tool_choice_required_fails_with_the_hint_and_sends_nothing():
    with ReplayServer([case("anthropic", "text")]) as server:
        events = run_loop(WithToolChoice(anthropic(server.url), "required"))
        assert server.requests == []
    errors = [e for e in events if e.kind == "error"]
    assert len(errors) == 1 and "no tools" in errors[0].data["message"] and "tools=" in errors[0].data["hint"]
    assert events[-1].kind == "completion" and events[-1].data["status"] == "failed"


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_named_function_that_is_not_among_the_tools_raises_and_sends_nothing(wire):
    """Every API refuses a tool_choice naming a function it was not given (a 400): the adapter
    says so before sending, naming the tools it has."""
    make, answer = WIRES[wire]
    choice = {"type": "function", "function": {"name": "delete_everything"}}
    with ReplayServer([answer()]) as server:
        with pytest.raises(ProviderConfigError) as info:
            run(drain(make(server.url).stream([LLMMessage(role="user", content="hi")], tools=TOOLS,
                                              tool_choice=choice)))
        assert server.requests == []
    message = str(info.value)
    assert "\n" not in message and "delete_everything" in message and "read_file" in message
    assert "name one of" in info.value.hint


def _called(tool_call_id: str, name: str) -> list[LLMMessage]:
    """An assistant turn calling ``name`` and its result."""
    call = {"id": tool_call_id, "type": "function", "function": {"name": name, "arguments": '{"path": "a"}'}}
    return [LLMMessage(role="assistant", content=None, tool_calls=[call]),
            LLMMessage(role="tool", content="contents of a", tool_call_id=tool_call_id)]


TRANSCRIPT = [LLMMessage(role="user", content="read a, then b"), *_called("c1", "read_file"),
              *_called("c2", "grep"), *_called("c3", "read_file"), LLMMessage(role="user", content="summarise")]
"""A chat whose earlier turns called tools, resumed by a host that offers none now."""


@pytest.mark.parametrize("tools", [None, []])
@pytest.mark.parametrize("choice", [None, "auto", "none"])
def test_anthropic_without_tools_declares_the_transcripts_tools_unavailable(tools, choice):
    """Anthropic refuses tool_use / tool_result blocks in a request that defines no tools
    (400 "Requests which include tool_use or tool_result blocks must define tools",
    anthropics/anthropic-sdk-python#494): the tools the transcript called are declared, as
    unavailable, with tool_choice none; the messages are those sent with the tools."""
    options = {} if choice is None else {"tool_choice": choice}
    with ReplayServer([case("anthropic", "text"), case("anthropic", "text")]) as server:
        run(drain(anthropic(server.url).stream(TRANSCRIPT, tools=tools, **options)))
        run(drain(anthropic(server.url).stream(TRANSCRIPT, tools=TOOLS)))
    without, with_tools = (request.json() for request in server.requests)
    assert [t["name"] for t in without["tools"]] == ["grep", "read_file"]  # sorted: the set decides
    assert all(t["input_schema"] == {"type": "object"} and "not available" in t["description"].lower()
               for t in without["tools"])
    assert without["tool_choice"] == {"type": "none"}
    assert without["messages"] == with_tools["messages"]
    assert [b["type"] for b in without["messages"][1]["content"]] == ["tool_use"]


def test_anthropic_without_tools_a_transcript_without_tool_calls_sends_no_tools():
    body = sent_body("anthropic", None, tool_choice="auto")
    assert "tools" not in body and "tool_choice" not in body


def test_anthropic_without_tools_a_required_choice_still_raises_with_tool_calls_in_the_transcript():
    with ReplayServer([case("anthropic", "text")]) as server:
        with pytest.raises(ProviderConfigError, match="no tools"):
            run(drain(anthropic(server.url).stream(TRANSCRIPT, tools=None, tool_choice="required")))
        assert server.requests == []


def test_a_resumed_chat_with_tool_calls_runs_on_anthropic_with_no_tools_registered():
    """The loop's own request: a history holding tool calls, a host with no tools."""
    history = [m.to_wire() for m in TRANSCRIPT[:-1]]

    async def go(url: str) -> list:
        loop = CoreLoop(anthropic(url), ToolRouter())
        return [e async for e in loop.run([*history, {"role": "user", "content": "summarise"}], chat_id="c1")]

    with ReplayServer([case("anthropic", "text")]) as server:
        events = asyncio.run(go(server.url))
    assert events[-1].kind == "completion" and events[-1].data["status"] == "completed", events[-1].data
    body = server.requests[0].json()
    assert body["tool_choice"] == {"type": "none"} and [t["name"] for t in body["tools"]] == ["grep", "read_file"]
