"""How a turn streams one provider attempt (rounds.py: ``async for`` over the provider's iterator,
an exception told apart by where it was raised):

- an exception the provider's iterator raises (its ``__anext__``: at the first chunk, mid-stream,
  a StreamCancelled from its text_sink) is the attempt's: the turn goes on (llm_response with
  errorKind, error, completion failed), or ends cancelled;
- an exception raised by the loop's own step on a chunk (a chunk whose field raises), or thrown
  into the turn's iterator at a yield, propagates out of the iterator unchanged and is never taken
  for a provider error; the provider's iterator is closed in every case;
- an object without ``__aiter__`` / ``__anext__`` from ``stream()`` is the attempt's error, the
  AttributeError it raises.
"""

from __future__ import annotations

import asyncio

import pytest
from steerable_agent_runtime.llm import LLMStreamChunk, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.llm.cancel import StreamCancelled
from steerable_agent_runtime.loop import CoreLoop

from tests.loop.kit import USER, drain, make_router


class Provider:
    """A provider whose stream yields ``chunks`` and then raises ``error`` (if any); it records whether
    its iterator was closed."""

    name, model = "test", "m"

    def __init__(self, chunks, error=None):
        self.chunks, self.error, self.closed = chunks, error, []

    def stream(self, messages, *, tools=None, **options):
        return self._gen()

    async def _gen(self):
        try:
            for chunk in self.chunks:
                yield chunk
            if self.error is not None:
                raise self.error
        finally:
            self.closed.append(True)


def _run(provider, consume=None):
    router, _ = make_router()
    loop = CoreLoop(provider, router)
    return asyncio.run((consume or drain)(loop.run(USER, chat_id="c1")))


@pytest.mark.parametrize("before", [0, 1, 2])
def test_an_error_of_the_providers_iterator_is_the_attempts(before):
    provider = Provider([LLMStreamChunk(content_delta="a")] * before, ValueError("broken stream"))
    events = _run(provider)
    response = next(e for e in events if e.kind == "llm_response")
    assert response.data["errorKind"] == "internal"
    assert [e.kind for e in events][-2:] == ["error", "completion"]
    assert events[-1].data["status"] == "failed" and "broken stream" in events[-1].data["reason"]
    assert [e.data["delta"] for e in events if e.kind == "content_delta"] == ["a"] * before
    assert provider.closed == [True]


def test_a_stream_cancelled_from_the_provider_ends_the_attempt_cancelled():
    provider = Provider([LLMStreamChunk(content_delta="a")], StreamCancelled("stop"))
    events = _run(provider)
    response = next(e for e in events if e.kind == "llm_response")
    assert response.data.get("cancelled") is True and "errorKind" not in response.data
    assert provider.closed == [True]


class BadChunk:
    """A chunk whose content_delta raises when the loop reads it."""

    @property
    def content_delta(self):
        raise KeyError("the chunk itself")


def test_an_exception_of_the_loops_own_step_on_a_chunk_propagates():
    provider = Provider([LLMStreamChunk(content_delta="a"), BadChunk()])
    with pytest.raises(KeyError, match="the chunk itself"):
        _run(provider)
    assert provider.closed == [True]


def test_an_exception_thrown_in_at_a_yield_propagates_and_is_not_the_providers():
    provider = Provider([LLMStreamChunk(content_delta="a"), LLMStreamChunk(content_delta="b")])

    async def consume(events):
        seen = []
        async for event in events:
            seen.append(event.kind)
            if event.kind == "content_delta":
                with pytest.raises(LookupError, match="thrown in"):
                    await events.athrow(LookupError("thrown in"))
                return seen
        return seen

    seen = _run(provider, consume)
    assert seen[-1] == "content_delta"
    assert provider.closed == [True]


class NotAnIterator:
    def __aiter__(self):
        return self  # no __anext__


@pytest.mark.parametrize("stream", [object(), NotAnIterator()])
def test_a_stream_that_is_not_an_async_iterator_is_the_attempts_attribute_error(stream):
    class Odd(Provider):
        def stream(self, messages, *, tools=None, **options):
            return stream

    events = _run(Odd([]))
    assert events[-1].data["status"] == "failed"
    error = next(e for e in events if e.kind == "error")
    assert "__aiter__" in error.data["message"] or "__anext__" in error.data["message"]
    assert "object has no attribute" in error.data["message"]


def test_a_scripted_error_after_chunks_is_the_attempts():
    router, _ = make_router()
    loop = CoreLoop(ScriptedProvider([ScriptedResponse(text="abc", chunk_chars=1, error=ValueError("late"),
                                                       error_after_chunks=2)]), router)
    events = asyncio.run(drain(loop.run(USER, chat_id="c1")))
    assert [e.data["delta"] for e in events if e.kind == "content_delta"] == ["a", "b"]
    assert events[-1].data["status"] == "failed"
