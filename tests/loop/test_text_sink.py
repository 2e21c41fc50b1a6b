"""CoreLoop(text_sink=...): the relay's hot path. The deltas go to the sink, in their place
among the other events, instead of coming as events; everything else (events, record, reply)
is what a run without a sink gives."""

from __future__ import annotations

import asyncio

from steerable_agent_runtime.history import resume_transcript
from steerable_agent_runtime.llm import ScriptedProvider
from steerable_agent_runtime.llm.scripted import ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.storage.memory import InMemoryStorage

from tests.loop.kit import make_router

SCRIPT = [ScriptedResponse(text="let me look", reasoning="think first", chunk_chars=3,
                           tool_calls=[{"id": "c1", "name": "read_note", "arguments": {"name": "a"}}]),
          ScriptedResponse(text="the note says: note a", chunk_chars=4)]


def turn(sink: bool) -> tuple[list[tuple], list, list]:
    """One two-round turn; the log of events and sink calls in the order they happened."""
    storage = InMemoryStorage()
    log: list[tuple] = []
    router, _ = make_router()
    loop = CoreLoop(ScriptedProvider(SCRIPT), router, storage=storage, record_id="r",
                    text_sink=(lambda kind, delta: log.append((kind, {"delta": delta}))) if sink else None)

    async def go():
        async for event in loop.run([{"role": "user", "content": "read note a"}], chat_id="r"):
            log.append((event.kind, event.data))
        return await resume_transcript(storage, "r")

    record = asyncio.run(go())
    return log, record, loop.transcript


def _stable(log):  # durations and trace ids differ between two runs
    return [(kind, {k: v for k, v in data.items() if k not in ("durationMs", "usage")}) for kind, data in log]


def test_the_sink_gets_every_delta_in_its_place_and_nothing_else_changes():
    with_events, record_a, transcript_a = turn(sink=False)
    with_sink, record_b, transcript_b = turn(sink=True)
    assert _stable(with_sink) == _stable(with_events)  # the same kinds, data and order
    deltas = [d["delta"] for k, d in with_sink if k == "content_delta"]
    assert "".join(deltas) == "let me lookthe note says: note a" and len(deltas) > 4
    assert "".join(d["delta"] for k, d in with_sink if k == "reasoning_delta") == "think first"
    assert [m.model_dump() for m in record_b] == [m.model_dump() for m in record_a]
    assert [m.model_dump() for m in transcript_b] == [m.model_dump() for m in transcript_a]


def test_with_a_sink_no_delta_event_is_yielded():
    log: list[str] = []
    loop = CoreLoop(ScriptedProvider(["one two three"]), text_sink=lambda kind, delta: log.append(delta))

    async def go():
        return [event.kind async for event in loop.run([{"role": "user", "content": "hi"}], chat_id="c")]

    kinds = asyncio.run(go())
    assert "content_delta" not in kinds and "reasoning_delta" not in kinds and kinds[-1] == "completion"
    assert "".join(log) == "one two three"


def _openai_body(pieces):
    import json

    def chunk(delta, finish=None):
        return f"data: {json.dumps({'id': 'x', 'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"

    body = chunk({"role": "assistant", "content": ""}) + "".join(chunk({"content": p}) for p in pieces)
    return (body + chunk({}, "stop") + "data: [DONE]\n\n").encode()


def real_turn(sink: bool, cancel_at: int | None = None) -> tuple[list[tuple], list, dict]:
    """A turn on OpenAICompatProvider over a real replay server, whose text_sink option the
    loop uses when it has a sink; ``cancel_at``: cancel() when that many deltas were seen."""
    from steerable_agent_runtime.llm import OpenAICompatProvider

    from tests.replay_server import Reply, ReplayServer

    pieces = [f"w{i} " for i in range(40)]
    storage = InMemoryStorage()
    log: list[tuple] = []
    holder: dict = {}

    def seen(kind, delta):
        log.append((kind, {"delta": delta}))
        if cancel_at is not None and sum(k == "content_delta" for k, _ in log) == cancel_at:
            holder["loop"].cancel()

    async def go():
        with ReplayServer([Reply(chunks=[_openai_body(pieces)])]) as server:
            provider = OpenAICompatProvider("m", server.url + "/v1")
            loop = holder["loop"] = CoreLoop(provider, storage=storage, record_id="r", text_sink=seen if sink else None)
            try:
                async for event in loop.run([{"role": "user", "content": "go"}], chat_id="r"):
                    if event.kind in ("content_delta", "reasoning_delta"):
                        seen(event.kind, event.data["delta"])
                    else:
                        log.append((event.kind, event.data))
            finally:
                await provider.aclose()
        return await resume_transcript(storage, "r")

    record = asyncio.run(go())
    return log, record, log[-1][1]


def test_a_provider_taking_text_sink_relays_the_same_turn():
    with_events, record_a, done_a = real_turn(sink=False)
    with_sink, record_b, done_b = real_turn(sink=True)
    assert _stable(with_sink) == _stable(with_events)
    assert sum(k == "content_delta" for k, _ in with_sink) == 40 and done_b["status"] == "completed"
    assert [m.model_dump() for m in record_b] == [m.model_dump() for m in record_a]


def test_a_cancel_stops_at_the_same_chunk_with_the_text_kept():
    """A cancel made while a delta is relayed stops the attempt right after that delta, with
    the sink as with events; the record keeps the partial text."""
    for sink in (False, True):
        log, record, done = real_turn(sink=sink, cancel_at=5)
        assert done["status"] == "cancelled", (sink, done)
        assert [d["delta"] for k, d in log if k == "content_delta"] == [f"w{i} " for i in range(5)]
        assert record[-1].role == "assistant" and record[-1].content == "w0 w1 w2 w3 w4 "


def test_a_sink_that_raises_fails_the_attempt_like_a_provider_error():
    for script in (["one two three"], [ScriptedResponse(text="abc", reasoning="think", chunk_chars=2)]):
        def sink(kind, delta):
            raise ValueError("sink broke")

        loop = CoreLoop(ScriptedProvider(script), text_sink=sink)

        async def go():
            return [event async for event in loop.run([{"role": "user", "content": "hi"}], chat_id="c")]

        events = asyncio.run(go())
        assert events[-1].kind == "completion" and events[-1].data["status"] == "failed"
        assert any(e.kind == "error" and "sink broke" in e.data["message"] for e in events)
        assert any(e.kind == "llm_response" and e.data.get("errorKind") == "internal" for e in events)
