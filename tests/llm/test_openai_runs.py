"""Runs of chunks read whole (SSEDecoder.text_runs, a sink's ``many``): OpenAICompatProvider and
CoreLoop over a real replay server give the same texts, record, cancel point and errors with a
``many`` sink as with a sink called per chunk, and as without a sink."""

from __future__ import annotations

import asyncio
import json

from steerable_agent_runtime.history import resume_transcript
from steerable_agent_runtime.llm import OpenAICompatProvider
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.storage.memory import InMemoryStorage

from tests.llm.openai_cases import provider_read as read_stream
from tests.replay_server import Reply, ReplayServer

TEXTS = [f"w{i} " for i in range(150)] + ["line\nbreak", 'a "q"', "é世", "", "\x01", "tail"]


def chunk(delta, finish=None):
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


def body(texts):
    return [chunk({"role": "assistant", "content": ""}), *[chunk({"content": t}) for t in texts], chunk({}, "stop"),
            b"data: [DONE]\n\n"]


class ManySink:
    """A sink with ``many``: logs each text, and each call's kind (per chunk or per run)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.calls: list[tuple[str, int]] = []

    def __call__(self, text: str) -> None:
        self.log.append(text)
        self.calls.append(("one", 1))

    def many(self, texts: list[str]) -> None:
        assert texts and all(texts)
        self.log.extend(texts)
        self.calls.append(("many", len(texts)))


def two_reads(chunks: list[bytes]) -> Reply:
    """The first three events, then the rest (a pause between: two network reads)."""
    return Reply(chunks=[b"".join(chunks[:3]), b"".join(chunks[3:])], delay_s=0.05)


def provider_read(reply: Reply, sink, log: list[str]) -> list:
    """The chunks yielded; each text yielded is logged in arrival order with the sink's."""
    return read_stream(reply, {} if sink is None else {"text_sink": sink}, log)


def test_a_many_sink_gets_the_same_texts_in_runs():
    expected = [t for t in TEXTS if t]
    plain_log: list[str] = []
    plain = provider_read(two_reads(body(TEXTS)), None, plain_log)
    assert plain_log == expected
    log: list[str] = []
    sink = ManySink(log)
    chunks = provider_read(two_reads(body(TEXTS)), sink, log)
    assert log == expected
    yielded = [c.content_delta for c in chunks if c.content_delta]
    assert len(yielded) <= 2  # the chunk the frame was learned from (and at most one more) is yielded
    assert any(kind == "many" and n > 50 for kind, n in sink.calls)  # the run path was taken
    assert chunks[-1].finish_reason == plain[-1].finish_reason == "stop"


def loop_turn(reply: Reply, *, many: bool, cancel_after: int | None = None,
              expect_runs: bool = True) -> tuple[list[str], list, dict]:
    """A turn through CoreLoop(text_sink=...) with or without ``many``; ``cancel_after``: the
    sink schedules cancel() (it runs once the loop awaits again) when that many deltas arrived."""
    storage = InMemoryStorage()
    deltas: list[str] = []
    holder: dict = {}

    def check() -> None:
        if cancel_after is not None and len(deltas) >= cancel_after and "cancelled" not in holder:
            holder["cancelled"] = True
            asyncio.get_running_loop().call_soon(holder["loop"].cancel)

    def sink(kind, delta):
        assert kind == "content_delta"
        deltas.append(delta)
        check()

    if many:
        def run_of(kind, texts):
            assert kind == "content_delta"
            holder["runs"] = holder.get("runs", 0) + 1
            deltas.extend(texts)
            check()

        sink.many = run_of

    async def go():
        with ReplayServer([reply]) as server:
            provider = OpenAICompatProvider("m", server.url + "/v1")
            loop = holder["loop"] = CoreLoop(provider, storage=storage, record_id="r", text_sink=sink)
            try:
                events = [e async for e in loop.run([{"role": "user", "content": "go"}], chat_id="r")]
            finally:
                await provider.aclose()
        return events, await resume_transcript(storage, "r")

    events, record = asyncio.run(go())
    assert not (many and expect_runs) or holder.get("runs"), "the run path was not taken"
    return deltas, record, events[-1].data


def test_the_loop_relays_and_records_the_same_turn_with_runs():
    a_deltas, a_record, a_done = loop_turn(two_reads(body(TEXTS)), many=False)
    b_deltas, b_record, b_done = loop_turn(two_reads(body(TEXTS)), many=True)
    assert b_deltas == a_deltas == [t for t in TEXTS if t]
    assert a_done["status"] == b_done["status"] == "completed"
    assert [m.model_dump() for m in b_record] == [m.model_dump() for m in a_record]
    assert b_record[-1].content == "".join(TEXTS)


def test_a_cancel_made_between_reads_ends_the_wait_for_the_next_read(monkeypatch):
    """The cancel is set while the provider waits for the second network read (0.3 s away):
    the wait ends there (llm.cancel), so nothing of that read is relayed or kept, per chunk or
    per run alike; the record holds the first read's text."""
    from steerable_agent_runtime.llm.sse import SSEDecoder

    reads = []
    feed_data = SSEDecoder.feed_data

    def counted(self, chunk):
        reads.append(chunk)
        return feed_data(self, chunk)

    monkeypatch.setattr(SSEDecoder, "feed_data", counted)
    first, second = [f"a{i} " for i in range(10)], [f"b{i} " for i in range(60)]
    parts = body(first + second)
    reply = Reply(chunks=[b"".join(parts[:11]), b"".join(parts[11:])], delay_s=0.3)
    for many in (False, True):
        reads.clear()
        deltas, record, done = loop_turn(reply, many=many, cancel_after=10, expect_runs=False)
        assert done["status"] == "cancelled", (many, done)
        assert deltas == first, many
        assert not any(b"b0 " in chunk for chunk in reads)  # the second read never came
        assert record[-1].role == "assistant" and record[-1].content == "".join(first)

