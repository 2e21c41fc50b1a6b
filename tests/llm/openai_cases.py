"""Shared pieces of the OpenAI wire tests: fixtures as replies, our stream collected, the SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steerable_agent_runtime.llm import LLMError
from steerable_agent_runtime.models import LLMMessage, ToolCall

from tests.replay_server import Reply, ReplayServer

STREAMS = Path(__file__).resolve().parent / "streams"
KEY = "sk-test-Zq81secretkey0000"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                                     "unit": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

CONVERSATION = [
    LLMMessage(role="system", content="You are terse."),
    LLMMessage(role="user", content=[{"type": "text", "text": "What is in this image, and the weather?"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]),
    LLMMessage(role="assistant", content="Checking.", tool_calls=[
        ToolCall(id="call_prev1", name="get_weather", arguments={"city": "Lisbon"}).to_wire()]),
    LLMMessage(role="tool", tool_call_id="call_prev1", content='{"tempC": 21}'),
    LLMMessage(role="user", content="And tomorrow?"),
]


def reply(provider_dir: str, case: str, **kwargs: Any) -> Reply:
    """The fixture ``case`` (``.sse`` streamed one event per chunk, or an HTTP error ``.json``)."""
    sse = STREAMS / provider_dir / f"{case}.sse"
    if sse.exists():
        return Reply.sse_file(sse, **kwargs)
    spec = json.loads((STREAMS / provider_dir / f"{case}.json").read_text())
    return Reply.json(spec["status"], spec["body"], spec["headers"])


@dataclass
class Collected:
    text: str = ""
    reasoning: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Any = None
    finish: str | None = None
    error: LLMError | None = None
    chunks: int = 0


async def collect_stream(provider: Any, messages: list[LLMMessage] | None = None, **kwargs: Any) -> Collected:
    """Drain ``provider.stream`` keeping everything; an LLMError is kept, not raised."""
    out = Collected()
    try:
        async for chunk in provider.stream(messages or [LLMMessage(role="user", content="hi")], **kwargs):
            out.chunks += 1
            out.text += chunk.content_delta or ""
            out.reasoning += chunk.reasoning_delta or ""
            if chunk.tool_call is not None:
                out.calls.append(chunk.tool_call)
            if chunk.usage is not None:
                out.usage = chunk.usage
            if chunk.finish_reason is not None:
                out.finish = chunk.finish_reason
    except LLMError as exc:
        out.error = exc
    finally:
        await provider.aclose()
    return out


def sdk_client(base_url: str) -> Any:
    """The official SDK pointed at the replay server: no retries, no OPENAI_* environment."""
    import openai

    for name in [n for n in os.environ if n.startswith("OPENAI_")]:
        del os.environ[name]
    return openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=10.0)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def provider_read(reply: Reply, options: dict[str, Any], log: list[str]) -> list[Any]:
    """The chunks OpenAICompatProvider yields for ``reply`` (served by a ReplayServer) with the
    stream ``options``; the text of each yielded chunk is appended to ``log`` as it arrives
    (a ``text_sink`` in ``options`` that appends to ``log`` gives every text in arrival order)."""
    from steerable_agent_runtime.llm import OpenAICompatProvider

    async def go() -> list[Any]:
        with ReplayServer([reply]) as server:
            provider = OpenAICompatProvider("m", server.url + "/v1")
            out = []
            try:
                async for chunk in provider.stream([LLMMessage(role="user", content="go")], **options):
                    out.append(chunk)
                    if chunk.content_delta:
                        log.append(chunk.content_delta)
                return out
            finally:
                await provider.aclose()

    return asyncio.run(go())
