"""Cancel while the model is silent: every provider, over a real replay server on 127.0.0.1.

The server sends the first text event of a recorded stream and then holds the connection open,
silent, for a minute (``stall_after``). ``CoreLoop.cancel()`` from another task, or a
``CancelSignal`` handed to ``provider.stream``, must end the stream at once (not at the next
chunk, which never comes), close the connection (the server sees it closed during the stall),
leave no task behind and no exception unhandled, and leave the record RUNTIME.md describes: the
partial assistant text, no tool call without a result, no half-assembled call.

The bound asserted (5 s against a 60 s silence) is a correctness bound, not a benchmark: a
cancel that waits for the server fails it by a factor of ten.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
from typing import Any

import pytest
from steerable_agent_runtime import InMemoryStorage, resume_transcript
from steerable_agent_runtime.llm import (
    AnthropicProvider,
    CacheControlProvider,
    GoogleGenAIProvider,
    OpenAICompatProvider,
    OpenAIResponsesProvider,
)
from steerable_agent_runtime.llm.cancel import CancelSignal, StreamCancelled
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.models import LLMMessage

from tests.llm.wire_cases import ANTHROPIC_KEY, GEMINI_KEY, STREAMS
from tests.replay_server import ReplayServer, Reply

SILENCE_S = 60.0
BOUND_S = 5.0
USER = [LLMMessage(role="user", content="hi")]

# wire -> (provider on a base URL, the first text it streams)
WIRES: dict[str, tuple[Any, str]] = {
    "openai_compat": (lambda url: OpenAICompatProvider("gpt-4.1-mini", url + "/v1", api_key="sk-test"), "Lisbo"),
    "openai_responses": (lambda url: OpenAIResponsesProvider("gpt-4.1-mini", "sk-test", base_url=url + "/v1"),
                         "Lisbon"),
    "anthropic": (lambda url: CacheControlProvider(AnthropicProvider("claude-sonnet-4-5", ANTHROPIC_KEY, base_url=url)),
                  "Hello"),
    "gemini": (lambda url: GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=url), "Hello"),
}


def recorded(wire: str, name: str) -> Reply:
    """The recorded stream ``name`` of ``wire``, one SSE event per write."""
    return Reply.sse_file(STREAMS / wire / f"{name}.sse")


def silent_after(wire: str, name: str, marker: bytes) -> Reply:
    """Case ``name`` of ``wire`` cut silent (for a minute) right after the first event holding ``marker``."""
    reply = recorded(wire, name)
    first = next(i for i, chunk in enumerate(reply.chunks) if marker in chunk)
    reply.stall_after, reply.stall_s = first + 1, SILENCE_S
    return reply


class Watched:
    """Runs a scenario on a fresh event loop and notes what a leak would show: exceptions the
    loop's handler got (an unhandled task exception, 'Task was destroyed but it is pending')
    and tasks still pending at the end."""

    def __init__(self) -> None:
        self.handled: list[dict[str, Any]] = []
        self.leftover: list[asyncio.Task] = []

    def run(self, scenario):
        async def main():
            asyncio.get_running_loop().set_exception_handler(lambda _loop, context: self.handled.append(context))
            try:
                return await scenario()
            finally:
                await asyncio.sleep(0)
                gc.collect()  # an async generator left suspended is closed by a task asyncio makes:
                for _ in range(3):  # let those run (their failures reach the handler)
                    await asyncio.sleep(0)
                self.leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

        result = asyncio.run(main())
        gc.collect()
        assert self.handled == [], self.handled
        assert self.leftover == []
        return result


async def cancel_loop_on_first_delta(loop: CoreLoop) -> tuple[list[Any], float]:
    """Run a turn; another task cancels it once the first content delta arrived. Returns the
    events and the seconds from cancel() to the turn's last event."""
    first_delta = asyncio.Event()
    events: list[Any] = []
    took: list[float] = []

    async def consume():
        async for event in loop.run(USER, chat_id="c1"):
            events.append(event)
            if event.kind == "content_delta":
                first_delta.set()

    async def canceller():
        await first_delta.wait()
        await asyncio.sleep(0.05)  # the loop is back waiting on the silent server
        started = time.monotonic()
        loop.cancel()
        await consumer
        took.append(time.monotonic() - started)

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(canceller(), SILENCE_S / 2)
    return events, took[0]


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_cancel_while_the_model_is_silent_ends_the_turn_at_once(wire):
    make, first_text = WIRES[wire]
    with ReplayServer([silent_after(wire, "text", first_text.encode())]) as server:
        store = InMemoryStorage()
        loop = CoreLoop(make(server.url), storage=store)
        watched = Watched()
        events, took = watched.run(lambda: cancel_loop_on_first_delta(loop))
        assert took < BOUND_S, f"cancel took {took:.1f} s: it waited for the silent server"
        done = events[-1]
        assert done.kind == "completion" and done.data["status"] == "cancelled", done
        assert [e.data["delta"] for e in events if e.kind == "content_delta"] == [first_text]
        responses = [e.data for e in events if e.kind == "llm_response"]
        assert len(responses) == 1 and responses[0].get("cancelled") is True
        assert [e for e in events if e.kind == "error"] == []
        transcript = asyncio.run(resume_transcript(store, "c1"))
        assert transcript == [*USER, LLMMessage(role="assistant", content=first_text)]
        deadline = time.monotonic() + BOUND_S  # the server notices the close at its next poll
        while server.closed_in_stall < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.closed_in_stall == 1, "the connection to the silent server was left open"
        assert not loop.running


@pytest.mark.parametrize("wire", ["openai_compat", "anthropic"])
def test_a_cancel_in_the_middle_of_a_tool_call_leaves_no_call_in_the_record(wire):
    """Silent after the first fragment of a call's arguments: the half call is dropped, the
    record holds no tool call at all (so none without a result)."""
    marker = {"openai_compat": b'"arguments":"{', "anthropic": b'"partial_json":"{'}[wire]
    reply = silent_after(wire, "tool_calls", marker)
    make, _ = WIRES[wire]
    with ReplayServer([reply]) as server:
        store = InMemoryStorage()
        loop = CoreLoop(make(server.url), storage=store)

        async def scenario():
            events = []
            task = asyncio.create_task(_collect(loop, events))
            deadline = time.monotonic() + BOUND_S
            while not server.requests and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # the first fragment is in, the server silent
            started = time.monotonic()
            loop.cancel()
            await asyncio.wait_for(task, SILENCE_S / 2)
            return events, time.monotonic() - started

        events, took = Watched().run(scenario)
        assert took < BOUND_S
        assert events[-1].data["status"] == "cancelled"
        assert [e for e in events if e.kind.startswith("tool_call")] == []
        transcript = asyncio.run(resume_transcript(store, "c1"))
        assert all(not m.tool_calls for m in transcript) and [m.role for m in transcript if m.role == "tool"] == []


async def _collect(loop: CoreLoop, events: list) -> None:
    async for event in loop.run(USER, chat_id="c1"):
        events.append(event)


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_cancel_signal_ends_a_silent_provider_stream_with_stream_cancelled(wire):
    make, first_text = WIRES[wire]
    with ReplayServer([silent_after(wire, "text", first_text.encode())]) as server:
        provider = make(server.url)
        signal = CancelSignal()

        async def scenario():
            texts = []
            stream = provider.stream(USER, cancel=signal)
            started = None
            with pytest.raises(StreamCancelled):
                async for chunk in stream:
                    if chunk.content_delta:
                        texts.append(chunk.content_delta)
                        asyncio.get_running_loop().call_later(0.05, signal.set)
                        started = time.monotonic() + 0.05
            return texts, time.monotonic() - started

        texts, took = Watched().run(scenario)
        assert texts == [first_text] and took < BOUND_S
        deadline = time.monotonic() + BOUND_S
        while server.closed_in_stall < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.closed_in_stall == 1


def test_a_signal_set_from_another_thread_stops_the_read():
    make, first_text = WIRES["openai_compat"]
    with ReplayServer([silent_after("openai_compat", "text", first_text.encode())]) as server:
        provider = make(server.url)
        signal = CancelSignal()

        async def scenario():
            started = None
            with pytest.raises(StreamCancelled):
                async for chunk in provider.stream(USER, cancel=signal):
                    if chunk.content_delta and started is None:
                        threading.Timer(0.05, signal.set).start()
                        started = time.monotonic()
            return time.monotonic() - started

        assert Watched().run(scenario) < BOUND_S


def test_a_signal_set_before_the_request_sends_nothing():
    make, _ = WIRES["openai_compat"]
    with ReplayServer([recorded("openai_compat", "text")]) as server:
        signal = CancelSignal()
        signal.set()

        async def scenario():
            with pytest.raises(StreamCancelled):
                async for _ in make(server.url).stream(USER, cancel=signal):
                    pass

        Watched().run(scenario)
        assert server.requests == []


def test_cancelling_the_task_itself_still_raises_cancelled_error():
    """The signal's interruption is told apart from a cancellation of the reading task by
    someone else (a shutdown): that one propagates as CancelledError, the signal untouched."""
    make, first_text = WIRES["openai_compat"]
    with ReplayServer([silent_after("openai_compat", "text", first_text.encode())]) as server:
        provider = make(server.url)
        signal = CancelSignal()

        async def read():
            async for _ in provider.stream(USER, cancel=signal):
                pass

        async def scenario():
            task = asyncio.create_task(read())
            while not server.requests:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not signal.is_set

        Watched().run(scenario)


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("with_signal", [True, False])
def test_an_uncancelled_stream_reads_to_its_end_and_the_connection_is_reused(wire, with_signal):
    """A signal that is never set changes nothing: the whole answer, and on every wire the
    body is read to its end after the terminal event, so the next request reuses the pooled
    connection (no new TCP and TLS handshake per round)."""
    make, first = WIRES[wire]
    with ReplayServer([recorded(wire, "text")]) as server:
        provider = make(server.url)

        async def scenario():
            out = []
            for _ in range(2):
                options = {"cancel": CancelSignal()} if with_signal else {}
                out.append("".join([c.content_delta async for c in provider.stream(USER, **options)
                                    if c.content_delta]))
            await provider.aclose()
            return out

        texts = Watched().run(scenario)
        assert texts[0] == texts[1] and texts[0].startswith(first)
        assert server.requests[0].peer == server.requests[1].peer  # one connection, reused


def test_cancel_while_waiting_for_the_response_headers():
    """A server that takes the request and never answers (a real listener on 127.0.0.1): the
    cancel ends the wait for the headers too, and the connection is closed (the server reads
    the end of it)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    loop = CoreLoop(OpenAICompatProvider("m", f"http://127.0.0.1:{listener.getsockname()[1]}/v1"))
    events: list[Any] = []

    async def scenario():
        task = asyncio.create_task(_collect(loop, events))
        deadline = time.monotonic() + BOUND_S
        while not accepted and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the request is sent; no answer comes
        started = time.monotonic()
        loop.cancel()
        await asyncio.wait_for(task, SILENCE_S / 2)
        return time.monotonic() - started

    try:
        took = Watched().run(scenario)
        assert took < BOUND_S and events[-1].data["status"] == "cancelled"
        assert [e.kind for e in events if e.kind in ("content_delta", "error")] == []
        conn = accepted[0]
        conn.settimeout(BOUND_S)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
        assert received.startswith(b"POST /v1/chat/completions")  # then the end: the client closed it
        conn.close()
    finally:
        listener.close()


@pytest.mark.parametrize("wire", ["openai_compat", "anthropic"])
def test_the_next_turn_after_a_cancel_runs_on_the_same_provider(wire):
    """The cancelled response's connection is closed, not left in the pool half read: the next
    turn on the same provider (and client) gets its whole answer."""
    make, first_text = WIRES[wire]
    with ReplayServer([silent_after(wire, "text", first_text.encode()), recorded(wire, "text")]) as server:
        loop = CoreLoop(make(server.url))

        async def scenario():
            events, _ = await cancel_loop_on_first_delta(loop)
            again = [e async for e in loop.run(USER, chat_id="c1")]
            return events, again

        events, again = Watched().run(scenario)
        assert events[-1].data["status"] == "cancelled"
        assert again[-1].data["status"] == "completed"
        text = "".join(e.data["delta"] for e in again if e.kind == "content_delta")
        assert text.startswith(first_text) and len(text) > len(first_text)
        assert len(server.requests) == 2 and server.requests[0].peer != server.requests[1].peer
