"""TraceRecorder: one HarnessTrace per run of the loop, with llm/tool/approval spans.

Usage::

    recorder = TraceRecorder(store, sample_rate=0.25)
    async with recorder.run(session) as run:
        async with run.llm_request({"llm.model": "m"}, attempt=1) as llm:
            await llm.event("first_token")
        async with run.tool("read_file", {"path": "README.md"}) as tool:
            async with tool.approval({"approval.mode": "ask"}):
                ...

Guarantees:
- Trace ids are 32 lowercase hex digits, span and event ids 16; none is ever all zero.
- The trace is persisted (``upsert_trace``) when the run starts and again when it ends, with
  ``ended_at`` and ``outcome`` set whether the body returns (``ok``), raises (``error``) or is
  cancelled (``cancelled``). An outcome set with ``run.set_outcome`` (e.g.
  ``budget_exhausted``) wins, except that ``ok`` never survives an exception.
- Every span is written when it opens and re-written with ``end_at`` when it closes, also when
  its body raises (then its attrs carry ``error.type``). ``approval.wait`` spans are children of
  their tool span.
- Head sampling: a run is recorded iff ``is_sampled(trace_id, sample_rate)``, a pure function
  of the trace id (the OpenTelemetry consistent-probability rule), so every process decides the
  same way for the same trace. An unsampled run writes nothing; its handles are no-ops.
- Span and event attrs pass through ``redaction.redact`` before they are stored: secret-looking keys at
  any depth have their values replaced by ``REDACTED``, and so do the credentials inside a string
  (a Bearer/Basic token, a URL's password, a secret query parameter such as ``?key=``), the rest
  of the text kept.
- A lone UTF-16 surrogate in a span or event name or in attrs (keys and values, any depth) is
  stored as U+FFFD: no store can encode one, and a tool's error message or a name the model sent
  may hold one (a surrogateescape'd file name, a ``\\ud800`` escape).
- Storage errors propagate (tracing never fails silently).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ..errors import UsageError
from ..models import (AgentSession, HarnessTrace, SpanKind, TraceEvent, TraceOutcome, TraceSpan, normalize_timestamp,
                      replace_lone_surrogates, utc_now)
from ..storage import StorageAdapter
from .redaction import redact

_RANDOMNESS_BITS = 56
_RANDOMNESS_MASK = (1 << _RANDOMNESS_BITS) - 1

_HEX = re.compile(r"[0-9a-fA-F]+")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def new_trace_id() -> str:
    """A random trace id: 32 lowercase hex digits, never all zero."""
    return _random_hex(16)


def new_span_id() -> str:
    """A random span (or event) id: 16 lowercase hex digits, never all zero."""
    return _random_hex(8)


def _random_hex(nbytes: int) -> str:
    while True:
        value = secrets.token_hex(nbytes)
        if int(value, 16) != 0:
            return value


def rejection_threshold(sample_rate: float) -> int:
    """The OpenTelemetry rejection threshold T for ``sample_rate``: round((1 - p) * 2**56).

    A trace is kept iff its randomness R (the low 56 bits of the trace id) is >= T, so
    p = 1 keeps every trace (T = 0) and p = 0 keeps none (T = 2**56 exceeds every R).
    Raises UsageError unless 0 <= sample_rate <= 1.
    """
    if not 0.0 <= sample_rate <= 1.0:
        raise UsageError(f"sample_rate must be between 0 and 1, got {sample_rate!r}",
                         hint="pass a probability such as 0.1 (10% of runs)")
    return round((1.0 - sample_rate) * (1 << _RANDOMNESS_BITS))


def is_sampled(trace_id: str, sample_rate: float) -> bool:
    """Whether the consistent-probability rule keeps ``trace_id`` at ``sample_rate``.

    Deterministic per trace id, and monotone: a trace kept at rate p is kept at every rate
    above p. Raises UsageError for a rate outside [0, 1] or a trace id that is not hex.
    """
    threshold = rejection_threshold(sample_rate)
    if not _HEX.fullmatch(trace_id):
        raise UsageError(f"trace id {trace_id!r} is not hexadecimal", hint="trace ids are 32 lowercase hex digits")
    return (int(trace_id, 16) & _RANDOMNESS_MASK) >= threshold


def _clean_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attrs as they are stored: redacted, then each lone surrogate replaced by U+FFFD (UTF-8,
    and so every store, refuses one; redact turns tuples into lists, which this walks)."""
    return replace_lone_surrogates(redact(dict(attrs)))


def _later(start: str, end: str) -> str:
    """``end``, or ``start`` when the wall clock stepped back (normalised text order)."""
    return end if end >= start else start


class SpanHandle:
    """An open span: add events and attrs while its ``async with`` block runs."""

    def __init__(self, run: RunHandle, span: TraceSpan) -> None:
        self._run = run
        self.span = span

    @property
    def span_id(self) -> str:
        """This span's id (16 hex digits)."""
        return self.span.span_id

    def set_attrs(self, attrs: Mapping[str, Any]) -> None:
        """Merge attrs (redacted) into the span; they are stored when the span closes."""
        merged = dict(self.span.attrs or {})
        merged.update(_clean_attrs(attrs))
        self.span = self.span.model_copy(update={"attrs": merged})

    async def event(self, name: str, attrs: Mapping[str, Any] | None = None) -> TraceEvent:
        """Record a point-in-time event inside this span (stored at once, attrs redacted)."""
        return await self._run.add_event(self.span_id, name, attrs)

    @asynccontextmanager
    async def approval(self, attrs: Mapping[str, Any] | None = None) -> AsyncIterator[SpanHandle]:
        """An ``approval.wait`` span parented to this (tool) span."""
        async with self._run.span("approval.wait", "approval", attrs, parent_id=self.span_id) as h:
            yield h


class RunHandle:
    """One recorded run: opens spans, records events, carries the outcome."""

    def __init__(self, recorder: TraceRecorder, trace: HarnessTrace, sampled: bool) -> None:
        self._recorder = recorder
        self.trace = trace
        self.sampled = sampled
        self._outcome: TraceOutcome | None = None

    @property
    def trace_id(self) -> str:
        """This run's trace id (32 hex digits), also when the run is not sampled."""
        return self.trace.trace_id

    def set_outcome(self, outcome: TraceOutcome) -> None:
        """Set the outcome recorded when the run ends (e.g. ``budget_exhausted``)."""
        self._outcome = outcome

    @asynccontextmanager
    async def span(self, name: str, kind: SpanKind, attrs: Mapping[str, Any] | None = None, *,
                   parent_id: str | None = None) -> AsyncIterator[SpanHandle]:
        """A span of ``kind`` around the block; closed (``end_at`` set) however it exits."""
        clock = self._recorder.now
        span = TraceSpan(span_id=new_span_id(), name=replace_lone_surrogates(name), start_at=clock(), kind=kind,
                         parent_id=parent_id, attrs=_clean_attrs(attrs) if attrs else None)
        handle = SpanHandle(self, span)
        await self._store_span(span)
        try:
            yield handle
        except BaseException as exc:
            handle.set_attrs({"error.type": type(exc).__name__})
            raise
        finally:
            closed = handle.span.model_copy(update={"end_at": _later(span.start_at, clock())})
            handle.span = closed
            await self._store_span(closed)

    @asynccontextmanager
    async def llm_request(self, attrs: Mapping[str, Any] | None = None, *,
                          attempt: int = 1) -> AsyncIterator[SpanHandle]:
        """An ``llm.request`` span for one provider attempt (``llm.attempt`` = attempt)."""
        async with self.span("llm.request", "llm", {"llm.attempt": attempt, **(attrs or {})}) as h:
            yield h

    @asynccontextmanager
    async def tool(self, name: str, attrs: Mapping[str, Any] | None = None) -> AsyncIterator[SpanHandle]:
        """A ``tool`` span named after the tool."""
        async with self.span(name, "tool", attrs) as h:
            yield h

    async def add_event(self, span_id: str, name: str, attrs: Mapping[str, Any] | None) -> TraceEvent:
        """Record an event in span ``span_id`` (attrs redacted); stored only when sampled."""
        event = TraceEvent(event_id=new_span_id(), span_id=span_id, name=replace_lone_surrogates(name),
                           at=self._recorder.now(), attrs=_clean_attrs(attrs) if attrs else None)
        if self.sampled:
            await self._recorder.storage.add_event(self.trace_id, event)
        return event

    async def _store_span(self, span: TraceSpan) -> None:
        if self.sampled:
            await self._recorder.storage.add_span(self.trace_id, span)

    def final_outcome(self, exc: BaseException | None) -> TraceOutcome:
        """The outcome to record: the explicit one, else derived from how the run ended."""
        if exc is None:
            return self._outcome or "ok"
        if self._outcome not in (None, "ok"):
            return self._outcome
        if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
            return "cancelled"
        return "error"


class TraceRecorder:
    """Starts and persists HarnessTraces through a StorageAdapter, with head sampling."""

    def __init__(self, storage: StorageAdapter, *, sample_rate: float = 1.0,
                 clock: Callable[[], str] = utc_now) -> None:
        rejection_threshold(sample_rate)  # validate early: a bad rate is a usage error
        self.storage = storage
        self.sample_rate = sample_rate
        self.clock = clock

    def now(self) -> str:
        """The recorder clock's current time, normalised (UTC ``...Z``)."""
        return normalize_timestamp(self.clock())

    @asynccontextmanager
    async def run(self, session: AgentSession, *, trace_id: str | None = None) -> AsyncIterator[RunHandle]:
        """Record one run of ``session`` around the block.

        The trace ends (``ended_at``, ``outcome``) when the block returns or raises; the
        exception is re-raised unchanged. ``trace_id`` defaults to a fresh random id; a
        given one must be 32 lowercase hex digits, not all zero (else UsageError).
        """
        if trace_id is not None and not (_TRACE_ID.fullmatch(trace_id) and int(trace_id, 16)):
            raise UsageError(f"trace id {trace_id!r} is not 32 lowercase hex digits (not all zero)",
                             hint="omit trace_id to get a fresh random one")
        trace = HarnessTrace(trace_id=trace_id or new_trace_id(), session_id=session.session_id,
                             chat_id=session.chat_id, user_id=session.user_id, started_at=self.now())
        handle = RunHandle(self, trace, is_sampled(trace.trace_id, self.sample_rate))
        await self._store(handle, trace)
        try:
            yield handle
        except BaseException as exc:
            await self._finish(handle, exc)
            raise
        await self._finish(handle, None)

    async def _finish(self, handle: RunHandle, exc: BaseException | None) -> None:
        ended = _later(handle.trace.started_at, self.now())
        handle.trace = handle.trace.model_copy(
            update={"ended_at": ended, "outcome": handle.final_outcome(exc)})
        await self._store(handle, handle.trace)

    async def _store(self, handle: RunHandle, trace: HarnessTrace) -> None:
        if handle.sampled:
            await self.storage.upsert_trace(trace)
