"""Transcript builders shared by the compaction tests (plain LLMMessages, nothing faked)."""

from __future__ import annotations

from steerable_agent_runtime.loop.hooks import LoopContext
from steerable_agent_runtime.models import LLMMessage, ToolCall


def system(text: str = "You are a careful agent.") -> LLMMessage:
    return LLMMessage(role="system", content=text)


def user(text: str) -> LLMMessage:
    return LLMMessage(role="user", content=text)


def assistant(text: str = "", *calls: ToolCall) -> LLMMessage:
    return LLMMessage(role="assistant", content=text or None, tool_calls=[c.to_wire() for c in calls] or None)


def result(call_id: str, text: str) -> LLMMessage:
    return LLMMessage(role="tool", content=text, tool_call_id=call_id)


def tool_round(n: int, size: int = 4000) -> list[LLMMessage]:
    """One assistant message calling read_file, and its (large) result."""
    call = ToolCall(id=f"call_{n}", name="read_file", arguments={"path": f"/src/file_{n}.py"})
    return [assistant("", call), result(call.id, f"# file {n}\n" + "x = 1\n" * (size // 6))]


def agent_transcript(rounds: int, size: int = 4000) -> list[LLMMessage]:
    """system, the task, then ``rounds`` tool rounds."""
    messages = [system(), user("Refactor the parser module and keep the tests green.")]
    for n in range(rounds):
        messages += tool_round(n, size)
    return messages


def ctx(round_index: int = 1, **kwargs) -> LoopContext:
    return LoopContext(chat_id="c1", round_index=round_index, **kwargs)


def well_formed(messages: list[LLMMessage]) -> bool:
    """Every tool result follows an assistant message that holds its call."""
    seen: set[str] = set()
    for message in messages:
        for call in message.tool_calls or ():
            seen.add(call["id"])
        if message.role == "tool" and message.tool_call_id not in seen:
            return False
    return True
