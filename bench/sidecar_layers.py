"""Where a relayed chunk's time goes: the sidecar's path rebuilt layer by layer in one process,
CPU time per chunk of each layer and the increment over the one before (used by
``sidecar_bench.py --breakdown``; context for the relay figure, not a target).

Layers, each including the ones before it, all reading the same replayed stream over real HTTP:
1. ``http``: httpx streaming the body (``aiter_bytes``), nothing parsed;
2. ``sse``: + the SSE decoder (each event's data, ``feed_data``, not yet JSON; once the frame
   is learned from the first text chunk, as the provider learns it, the runs of events in
   that frame as lists of their texts: ``SSEDecoder.text_runs``);
3. ``provider``: OpenAICompatProvider.stream with a ``text_sink`` option like the one the
   relay's loop gives it, taking runs (``many``) (+ the frame learned; each chunk outside a
   run read through the stream's template or a full JSON parse; text-only chunks handed to
   the sink, the others yielded);
4. ``loop``: CoreLoop.run with a ``text_sink`` taking runs, on an InMemoryStorage (+ the text
   kept for the record, the cancel check, the other events);
5. ``relay``: the sidecar's StreamManager (+ trace recorder, session, the notification bytes
   queued and written by StdioJsonRpcTransport to /dev/null).

Also, outside that chain (``without_sink``): the provider yielding an LLMStreamChunk per
chunk, and CoreLoop yielding a ``content_delta`` LoopEvent per chunk, which is what a caller
without a sink gets. And ``per_stream_ms``: CPU milliseconds of a 3-chunk stream
(``small_url``) through the provider and through the relay: what a stream costs before its
chunks.
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
    from steerable_agent_runtime.llm.openai_compat import json_loader
    from steerable_agent_runtime.llm.openai_compat_template import learn, plain_content
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

    loads = json_loader()

    async def sse() -> None:
        decoder = SSEDecoder()  # what chat/completions reads: each event's data, runs in its frame whole
        learned = False
        async with client.stream("POST", url, content=b"{}") as response:
            async for data in response.aiter_bytes():
                out = decoder.feed_data(data)
                if not learned:  # as the provider does: the frame from the first chunk with text
                    for item in out:
                        if type(item) is str and item.startswith("{") and plain_content(obj := loads(item)):
                            template = learn(item, obj, loads)
                            if template is not None:
                                decoder.text_runs(template.head, template.tail)
                                learned = True
                                break

    def keep(texts: list[str]) -> Any:  # a sink taking runs too, as the relay's are (``many``)
        def take(text: str) -> None:
            texts.append(text)

        take.many = texts.extend  # type: ignore[attr-defined]
        return take

    def keep_kind(texts: list[str]) -> Any:  # the loop's sink: (kind, text), and (kind, texts)
        def take(kind: str, text: str) -> None:
            texts.append(text)

        take.many = lambda kind, more: texts.extend(more)  # type: ignore[attr-defined]
        return take

    async def provider(base: str = base_url, sink: bool = True) -> None:
        options = {"text_sink": keep([])} if sink else {}
        async for _ in OpenAICompatProvider("m", base, client=client).stream(messages, **options):
            pass

    async def loop(sink: bool = True) -> None:
        core = CoreLoop(OpenAICompatProvider("m", base_url, client=client), storage=InMemoryStorage(), record_id="r",
                        text_sink=keep_kind([]) if sink else None)
        async for _ in core.run(messages, chat_id="r"):
            pass

    async def provider_yielding() -> None:
        await provider(sink=False)

    async def loop_events() -> None:
        await loop(sink=False)

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
    aside = {"provider_yielding": provider_yielding, "loop_events": loop_events}
    spent: dict[str, list[float]] = {name: [] for name in [*stages, *aside]}
    for run in [*stages.values(), *aside.values()]:
        await run()  # warm: imports, the connection, the TLS context
    for _ in range(reps):
        for name, run in [*stages.items(), *aside.items()]:
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
    for name in stages:
        per = statistics.median(spent[name]) / chunks * 1e6
        out[name] = {"cumulative": round(per, 2), "added": round(per - before, 2)}
        before = per
    out["without_sink"] = {name: round(statistics.median(spent[name]) / chunks * 1e6, 2) for name in aside}
    return out
