"""The summary call is bounded: a summarizer that hangs costs ``summary_timeout_s``, not the run.

The summarizer is a real OpenAICompatProvider talking to a real server on 127.0.0.1 that takes
the request and never finishes its answer (tests/compaction/hanging.py): ``silent`` sends
nothing at all, ``keepalive`` streams SSE comments for ever (the client's read timeout never
fires). Each scenario runs on a fresh event loop watched for leaks (tests/llm/test_cancel_stream.py's
``Watched``: no task left pending, nothing reaching the loop's exception handler), and under an
outer bound of 30 s, so a summary call without a bound of its own fails the test instead of
hanging it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading

import pytest
from steerable_agent_runtime import InMemoryStorage, resume_transcript
from steerable_agent_runtime.compaction import SUMMARY_PREFIX, CompactionHooks
from steerable_agent_runtime.errors import ConfigValueError
from steerable_agent_runtime.llm import OpenAICompatProvider, ScriptedProvider
from steerable_agent_runtime.loop import ChainHooks, CoreLoop

from tests.llm.test_cancel_stream import Watched

from .hanging import HangingServer
from .test_loop_integration import TASK, file_router, long_chat, reads, rewrites
from .transcripts import agent_transcript, ctx

OUTER_BOUND_S = 30.0
MODES = ["silent", "keepalive"]


def summarizer_at(server: HangingServer) -> OpenAICompatProvider:
    return OpenAICompatProvider("gpt-4.1-mini", server.url + "/v1", api_key="sk-test")


def summary_of(messages) -> str:
    return next(m.content for m in messages if isinstance(m.content, str) and m.content.startswith(SUMMARY_PREFIX))


@pytest.mark.parametrize("mode", MODES)
def test_a_summarizer_that_never_answers_times_out_and_the_excerpt_summary_is_used(mode, caplog):
    with HangingServer(mode) as server:
        hooks = CompactionHooks(100_000, summarizer=summarizer_at(server), summary_timeout_s=0.3)

        async def scenario():
            return await asyncio.wait_for(hooks.compact_now(agent_transcript(8), ctx()), OUTER_BOUND_S)

        with caplog.at_level(logging.WARNING):
            rewrite = Watched().run(scenario)
        # the call was cancelled: its connection closed, not left open to the silent server
        assert server.client_closed.wait(5) and server.closed_by_client == 1
        assert len(server.bodies) == 1 and b"# file 0" in server.bodies[0]
    summary = summary_of(rewrite.messages)
    assert summary.splitlines()[0].endswith("earlier messages, excerpts]")  # the excerpt, as for a failure
    assert summary.splitlines()[1].startswith("[assistant] read_file(")
    assert "(excerpt; the summarizer timed out after 0.3 s)" in rewrite.reason  # the hook_action's reason
    assert "compaction summarizer timed out after 0.3 s" in caplog.text


def test_in_the_loop_a_hanging_summarizer_costs_the_timeout_and_the_run_completes():
    """A pressure compaction inside a real CoreLoop with a record (a long chat of text turns:
    folding alone cannot help, the middle must be summarised): each summary attempt times out,
    the excerpt is used, the turn completes, every rewrite event says why, and resume from the
    store gives the transcript the loop holds."""
    store = InMemoryStorage()
    with HangingServer("keepalive") as server:
        hooks = CompactionHooks(8000, summarizer=summarizer_at(server), summary_timeout_s=0.2)
        loop = CoreLoop(ScriptedProvider(reads(3)), file_router(), hooks=hooks, storage=store)

        async def scenario():
            async def drive():
                return [event async for event in loop.run(long_chat(), chat_id="c1")]
            return await asyncio.wait_for(drive(), OUTER_BOUND_S)

        events = Watched().run(scenario)
        asked = len(server.bodies)
    assert events[-1].kind == "completion" and events[-1].data["status"] == "completed"
    done = rewrites(events)
    summarised = [d for d in done if "summarised" in d["reason"]]
    assert summarised and len(summarised) == asked  # one (timed-out) call per summary
    assert all("(excerpt; the summarizer timed out after 0.2 s)" in d["reason"] for d in summarised)
    assert summary_of(loop.transcript).splitlines()[0].endswith("excerpts]")
    assert asyncio.run(resume_transcript(store, "c1")) == loop.transcript


@pytest.mark.parametrize("mode", MODES)
def test_a_cancel_of_the_run_during_a_hanging_summary_call_ends_it_at_once(mode):
    """The timeout is long (60 s); loop.cancel() from another thread while the summarizer's
    request hangs ends the call (its connection closed) and the turn (cancelled), well inside
    the outer bound, with no task left behind."""
    with HangingServer(mode) as server:
        compaction = CompactionHooks(1_000_000, summarizer=summarizer_at(server), summary_timeout_s=60)
        provider = ScriptedProvider(reads(4) + reads(0, "not reached"))
        loop = CoreLoop(provider, file_router(), hooks=ChainHooks(compaction))

        async def first():
            return [event async for event in loop.run(TASK, chat_id="c1")]

        Watched().run(first)
        before = [m.to_wire() for m in loop.transcript]
        loop.request_compact()

        async def second():
            async def cancel_when_asked():
                await asyncio.to_thread(server.asked.wait, OUTER_BOUND_S)
                threading.Thread(target=loop.cancel).start()  # from another thread, as a host would

            canceller = asyncio.create_task(cancel_when_asked())
            events = [event async for event in loop.run([*before, {"role": "user", "content": "and now?"}],
                                                         chat_id="c1")]
            await canceller
            return events

        async def bounded():
            return await asyncio.wait_for(second(), OUTER_BOUND_S)

        events = Watched().run(bounded)
        assert server.client_closed.wait(5) and server.closed_by_client == 1
    [done] = [e for e in events if e.kind == "completion"]
    assert done.data["status"] == "cancelled"
    assert all(m.content != "not reached" for m in loop.transcript)


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, True, "5", None])
def test_summary_timeout_must_be_a_positive_finite_number(value):
    with pytest.raises(ConfigValueError) as raised:
        CompactionHooks(100_000, summary_timeout_s=value)
    assert raised.value.parameter == "summary_timeout_s" and "summary_timeout_s" in str(raised.value)


def test_the_default_summary_timeout_is_two_minutes():
    assert CompactionHooks(100_000).summary_timeout_s == 120.0
