"""Tracing glue: the loop's spans through a TraceRecorder run, or no-ops when there is none.

The no-op handles are plain classes (no generator-based context managers): a loop without a
recorder pays two attribute lookups per span, not a context-manager frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self


class NullSpan:
    """A span handle that records nothing (no recorder); also its own async context manager."""

    span_id = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def set_attrs(self, attrs: Mapping[str, Any]) -> None:
        """Ignore the attrs."""

    async def event(self, name: str, attrs: Mapping[str, Any] | None = None) -> None:
        """Ignore the event."""

    def approval(self, attrs: Mapping[str, Any] | None = None) -> NullSpan:
        return self


NULL_SPAN = NullSpan()
"""The one no-op span handle."""


class NullRun:
    """A run handle that records nothing; the methods of tracing.RunHandle the loop uses."""

    trace_id = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def set_outcome(self, outcome: str) -> None:
        """Ignore the outcome."""

    def llm_request(self, attrs: Mapping[str, Any] | None = None, *, attempt: int = 1) -> NullSpan:
        return NULL_SPAN

    def tool(self, name: str, attrs: Mapping[str, Any] | None = None) -> NullSpan:
        return NULL_SPAN


def null_run() -> NullRun:
    """The no-recorder stand-in for ``TraceRecorder.run(session)``."""
    return NullRun()
