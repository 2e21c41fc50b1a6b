"""The loop offline, no API key: a scripted model, one tool, two rounds, the record in SQLite.

    python examples/offline_demo.py [DB]          # default: demo.db in the current directory
    steerable-maint history DB demo-chat          # the record the loop wrote

Round 1: the model calls ``weather(city="Lisbon")``; the tool runs; round 2: the model answers.
Swap the ScriptedProvider for a real one (see docs/loop.md) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import sys

from steerable_agent_runtime import CoreLoop, SqliteStorage, ToolRouter, tool
from steerable_agent_runtime.llm import ScriptedProvider, ScriptedResponse

router = ToolRouter()


@tool(router=router, description="Today's weather in a city", mode="read")
async def weather(city: str) -> dict:
    return {"city": city, "sky": "sunny", "celsius": 24}


async def main(db: str) -> None:
    provider = ScriptedProvider([
        ScriptedResponse(text="Let me check. ", tool_calls=[{"name": "weather", "arguments": {"city": "Lisbon"}}]),
        ScriptedResponse(text="It is sunny in Lisbon, 24 degrees.", chunk_chars=8),
    ])
    store = SqliteStorage(db)
    try:
        loop = CoreLoop(provider, router, storage=store)
        async for event in loop.run([{"role": "user", "content": "What is the weather in Lisbon?"}],
                                    chat_id="demo-chat"):
            if event.kind == "content_delta":
                print(event.data["delta"], end="", flush=True)
            elif event.kind == "tool_call_start":
                print(f"\n[tool] {event.data['name']}({event.data['arguments']})")
            elif event.kind == "tool_call_result":
                print(f"[tool] ok={event.data['success']}")
            elif event.kind == "completion":
                print(f"\n[done] {event.data['status']} after {event.data['rounds']} rounds")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "demo.db"))
