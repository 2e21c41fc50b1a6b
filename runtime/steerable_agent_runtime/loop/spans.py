"""Tracing glue: the loop's spans through a TraceRecorder run, or no-ops when there is none."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any


class NullSpan:
    """A span handle that records nothing (no recorder, or an unsampled run)."""

    span_id = None

    def set_attrs(self, attrs: Mapping[str, Any]) -> None:
        """Ignore the attrs."""

    async def event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        """Ignore the event."""

    @asynccontextmanager
    async def approval(self, attrs: Mapping[str, Any] | None = None) -> AsyncIterator[NullSpan]:
        yield self


class NullRun:
    """A run handle that records nothing; the same methods as tracing.RunHandle uses here."""

    trace_id = None

    def set_outcome(self, outcome: str) -> None:
        """Ignore the outcome."""

    @asynccontextmanager
    async def llm_request(self, attrs: Mapping[str, Any] | None = None, *, attempt: int = 1) -> AsyncIterator[NullSpan]:
        yield NullSpan()

    @asynccontextmanager
    async def tool(self, name: str, attrs: Mapping[str, Any] | None = None) -> AsyncIterator[NullSpan]:
        yield NullSpan()


@asynccontextmanager
async def null_run() -> AsyncIterator[NullRun]:
    """The no-recorder stand-in for ``TraceRecorder.run``."""
    yield NullRun()
