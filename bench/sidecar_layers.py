"""Where a relayed chunk's time goes: the sidecar's path rebuilt layer by layer in one process,
CPU time per chunk of each layer and the increment over the one before (used by
``sidecar_bench.py --breakdown``; context for the relay figure, not a target).

Layers, each including the ones before it, all reading the same replayed stream over real HTTP:
1. ``http``: httpx streaming the body (``aiter_bytes``), nothing parsed;
2. ``sse``: + the SSE decoder (each event's data, ``feed_data``, not yet JSON);
3. ``provider``: OpenAICompatProvider.stream (+ the chunk read through its template or a full
   JSON parse, LLMStreamChunk, its iterator);
4. ``loop``: CoreLoop.run on an InMemoryStorage (+ the loop's events and the record);
5. ``relay``: the sidecar's StreamManager (+ trace recorder, session, the notification bytes
   queued and written by StdioJsonRpcTransport to /dev/null).

Plus ``per_stream_ms``: CPU milliseconds of a 3-chunk stream (``small_url``) through the
provider and through the relay: what a stream costs before its chunks.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any


def layers(base_url: str, chunks: int, *, reps: int = 5, small_url: str | None = None) -> dict[str, Any]:
    """CPU microseconds per chunk by layer (medians of ``reps``), see the module docstring."""
    return asyncio.run(_layers(base_url, chunks, reps, small_url))


async def _layers(base_url: str, chunks: int, reps: int, small_url: str | None) -> dict[str, Any]:
    from steerable_agent_runtime.llm import OpenAICompatProvider
    from steerable_agent_runtime.llm.http import make_client
    from steerable_agent_runtime.llm.sse import SSEDecoder
    from steerable_agent_runtime.loop import CoreLoop
    from steerable_agent_runtime.models import LLMMessage
    from steerable_agent_runtime.sidecar import params
    from steerable_agent_runtime.sidecar.streams import StreamManager
    from steerable_agent_runtime.storage.memory import InMemoryStorage
    from steerable_agent_runtime.transport.stdio import StdioJsonRpcTransport

    client = make_client()
    url = base_url + "/chat/completions"
    messages = [LLMMessage(role="user", content="go")]

    async def http() -> None:
        async with client.stream("POST", url, content=b"{}") as response:
            async for _ in response.aiter_bytes():
                pass

    async def sse() -> None:
        decoder = SSEDecoder()
        async with client.stream("POST", url, content=b"{}") as response:
            async for data in response.aiter_bytes():
                decoder.feed_data(data)  # what chat/completions reads: each event's data

    async def provider(base: str = base_url) -> None:
        async for _ in OpenAICompatProvider("m", base, client=client).stream(messages):
            pass

    async def loop() -> None:
        core = CoreLoop(OpenAICompatProvider("m", base_url, client=client), storage=InMemoryStorage(), record_id="r")
        async for _ in core.run(messages, chat_id="r"):
            pass

    devnull = os.open(os.devnull, os.O_WRONLY)
    transport = StdioJsonRpcTransport(0, devnull)
    manager = StreamManager(InMemoryStorage(), notify=transport.emit, reverse=transport.request,
                            text_writer=transport.text_chunk_writer)
    count = [0]

    async def relay(base: str = base_url) -> None:
        count[0] += 1
        args = params.ChatStream.model_validate({"chatId": f"c{count[0]}", "messages": [{"role": "user", "content": "go"}],
                                                 "provider": {"kind": "openai_compat", "model": "m", "baseUrl": base}})
        started = await manager.start(args)
        stream = manager.running.get(started["streamId"])
        if stream is not None:
            await stream.done.wait()
        transport.flush()

    stages = {"http": http, "sse": sse, "provider": provider, "loop": loop, "relay": relay}
    spent: dict[str, list[float]] = {name: [] for name in stages}
    for run in stages.values():
        await run()  # warm: imports, the connection, the TLS context
    for _ in range(reps):
        for name, run in stages.items():
            cpu = time.process_time()
            await run()
            spent[name].append(time.process_time() - cpu)
    fixed: dict[str, list[float]] = {"provider": [], "relay": []}
    if small_url is not None:
        for _ in range(reps):
            for name, run in (("provider", provider), ("relay", relay)):
                cpu = time.process_time()
                await run(small_url)
                fixed[name].append(time.process_time() - cpu)
    await manager.aclose()
    await client.aclose()
    os.close(devnull)
    out: dict[str, Any] = {}
    if small_url is not None:
        out["per_stream_ms"] = {name: round(statistics.median(v) * 1e3, 2) for name, v in fixed.items()}
    before = 0.0
    for name, values in spent.items():
        per = statistics.median(values) / chunks * 1e6
        out[name] = {"cumulative": round(per, 2), "added": round(per - before, 2)}
        before = per
    return out
