"""Shared pieces of the loop tests: a provider that checks the record at every request, tools."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from steerable_agent_runtime.history import resume_transcript
from steerable_agent_runtime.llm import ScriptedProvider
from steerable_agent_runtime.loop import CoreLoop, LoopEvent
from steerable_agent_runtime.tools import ToolRouter, tool


class RecordCheckingProvider(ScriptedProvider):
    """A ScriptedProvider that, at every request, reads the record back through a real
    resume_transcript and keeps it next to the messages it was sent."""

    def __init__(self, responses, storage, record_id: str) -> None:
        super().__init__(responses)
        self.storage = storage
        self.record_id = record_id
        self.snapshots: list[list[Any]] = []

    async def _replay(self, index, messages, cancel):
        self.snapshots.append(await resume_transcript(self.storage, self.record_id))
        async for chunk in super()._replay(index, messages, cancel):
            yield chunk


def make_router() -> tuple[ToolRouter, list[tuple[str, Any]]]:
    """A router with read / write / local / failing / hanging tools; returns it and the call log."""
    router = ToolRouter()
    log: list[tuple[str, Any]] = []

    @tool(router=router, description="Read a note", mode="read")
    async def read_note(name: str) -> dict:
        log.append(("read_note", name))
        return {"name": name, "text": f"note {name}"}

    @tool(router=router, description="Write a note", mode="safe_write")
    async def write_note(name: str, text: str) -> str:
        log.append(("write_note", name))
        return "written"

    @tool(router=router, description="Run a shell command", mode="local")
    async def shell(command: str) -> str:
        log.append(("shell", command))
        return "ran"

    @tool(router=router, description="Always fails", mode="read")
    async def broken() -> None:
        log.append(("broken", None))
        raise OSError("device not ready")

    @tool(router=router, description="Never returns", mode="safe_write")
    async def hang() -> None:
        log.append(("hang", None))
        await asyncio.sleep(3600)

    return router, log


async def drain(iterator) -> list[LoopEvent]:
    return [event async for event in iterator]


def kinds(events: list[LoopEvent]) -> list[str]:
    return [e.kind for e in events]


def completion(events: list[LoopEvent]) -> dict[str, Any]:
    assert events[-1].kind == "completion", kinds(events)
    return events[-1].data


def run_loop(loop: CoreLoop, messages, chat_id: str = "c1") -> list[LoopEvent]:
    return asyncio.run(drain(loop.run(messages, chat_id=chat_id)))


USER = [{"role": "user", "content": "go"}]


def transcript_digest(messages) -> str:
    """sha256 of a transcript's canonical JSON (the crash child and its parent compute the same)."""
    text = json.dumps([m.to_wire() for m in messages], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
