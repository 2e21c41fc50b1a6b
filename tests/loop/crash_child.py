"""A child process for the loop's kill -9 tests: runs (or resumes) a multi-round loop against an
OpenAI-compatible SSE model at BASE_URL with SqliteStorage at DB, and acknowledges every flush.

    python -m tests.loop.crash_child DB BASE_URL [--max-rounds N]

stdout: ``STARTED`` with the loop's first event, then ``ACK <n> <sha256>`` after each round: the record
now holds the first n transcript messages, whose canonical JSON hashes to sha256 (what the parent
checks after the kill: no acknowledged item lost). The tool ``step`` does a real side effect (a file
under DB's directory) and takes a few milliseconds, so kills land inside tools too.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from pathlib import Path

from steerable_agent_runtime import SqliteStorage, resume_transcript
from steerable_agent_runtime.llm import OpenAICompatProvider
from steerable_agent_runtime.loop import CoreLoop, LoopConfig
from steerable_agent_runtime.tools import ToolRouter

from tests.loop.kit import transcript_digest


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("base_url")
    parser.add_argument("--max-rounds", type=int, default=10_000)
    args = parser.parse_args()
    effects = Path(args.db).parent / "effects"
    effects.mkdir(exist_ok=True)
    router = ToolRouter()

    async def step(i: int) -> dict:
        await asyncio.sleep(random.uniform(0, 0.01))
        (effects / f"{i}").write_text("done")
        return {"step": i}

    router.register(step, description="Do step i", mode="safe_write")
    store = SqliteStorage(args.db)
    provider = OpenAICompatProvider("replay-model", base_url=args.base_url)
    loop = CoreLoop(provider, router, storage=store, config=LoopConfig(max_rounds=args.max_rounds, tool_dedup=False))
    existing = await resume_transcript(store, "chat")
    events = loop.resume("chat") if existing else loop.run([{"role": "user", "content": "do the steps"}],
                                                           chat_id="chat")
    status = None
    started = False
    async for event in events:
        if not started:
            print("STARTED", flush=True)
            started = True
        if event.kind == "stage_complete":
            print("ACK", len(loop.transcript), transcript_digest(loop.transcript), flush=True)
        if event.kind == "completion":
            status = event.data["status"]
    await store.close()
    print("DONE", status, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
