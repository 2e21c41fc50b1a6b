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
