"""The StorageAdapter protocol: the contract every store implements, and nothing else.

Every method is ``async`` (uniformly; SqliteStorage does its short local I/O inline).
Both implementations (``memory.InMemoryStorage``, ``sqlite.SqliteStorage``) pass one
shared contract suite (tests/storage/test_contract.py).

Common guarantees:
- A returned model is a fresh copy; mutating it never changes what is stored.
- Timestamps are normalised to UTC ``...Z`` (see models.normalize_timestamp).
- Upserts are idempotent: writing the same entity twice leaves one row equal to it.
- Every write is atomic: it happens whole or not at all.
- Reads of rows this build cannot read fail closed (SteerableError subclasses); nothing is
  skipped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from ..models import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan


@runtime_checkable
class StorageAdapter(Protocol):
    """Persistence for sessions, chat messages, traces and the history record."""

    async def upsert_session(self, session: AgentSession) -> AgentSession:
        """Insert or replace the session keyed by ``session_id``; return it as stored."""
        ...

    async def get_session(self, session_id: str) -> AgentSession | None:
        """The session with this id, or None when there is none."""
        ...

    async def list_sessions(
        self, *, user_id: str | None = None, chat_id: str | None = None, active_only: bool = False
    ) -> list[AgentSession]:
        """Sessions matching every given filter, ordered by (created_at, session_id)."""
        ...

    async def append_message(self, message: ChatMessage) -> ChatMessage:
        """Add a chat message; an existing ``id`` is replaced in place (idempotent retry)."""
        ...

    async def list_messages(self, chat_id: str, *, limit: int | None = None) -> list[ChatMessage]:
        """The chat's messages oldest first, ordered by (created_at, first insertion).

        With ``limit`` only the newest ``limit`` messages (the tail), still oldest first.
        """
        ...

    async def upsert_trace(self, trace: HarnessTrace) -> HarnessTrace:
        """Insert or replace the trace keyed by ``trace_id``; return it as stored."""
        ...

    async def get_trace(self, trace_id: str) -> HarnessTrace | None:
        """The trace with this id, or None."""
        ...

    async def list_traces(
        self, *, session_id: str | None = None, chat_id: str | None = None,
        since: str | None = None, until: str | None = None,
    ) -> list[HarnessTrace]:
        """Traces matching every filter (``since`` inclusive, ``until`` exclusive on
        started_at), ordered by (started_at, trace_id). A bound is an ISO 8601 instant (any
        offset; no zone: UTC), compared as that instant (storage/timebounds.py); anything else
        raises UsageError."""
        ...

    async def add_span(self, trace_id: str, span: TraceSpan) -> TraceSpan:
        """Insert or replace the span keyed by ``span_id`` under ``trace_id`` (re-adding a
        span with its end time set is how a span is closed)."""
        ...

    async def add_event(self, trace_id: str, event: TraceEvent) -> TraceEvent:
        """Insert or replace the event keyed by ``event_id`` under ``trace_id``."""
        ...

    async def list_spans(self, trace_id: str) -> list[TraceSpan]:
        """The trace's spans ordered by (start_at, span_id)."""
        ...

    async def list_events(self, trace_id: str, *, span_id: str | None = None) -> list[TraceEvent]:
        """The trace's events (only ``span_id``'s when given), ordered by (at, event_id)."""
        ...

    async def append_history(self, record_id: str, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append entries to the record; atomic per call (all or none).

        Entries are dicts without ``seq``; ``at`` is stamped when absent. An item's ``message``
        may be an LLMMessage instance (stored exactly as its ``to_wire()``). Storage assigns
        contiguous seq from 1 per record and stamps ``v`` = RECORD_FORMAT_VERSION (an entry
        re-appended after a read is stamped anew). Returns the entries as stored.
        Raises HistorySeqConflictError when an entry carries a seq other than the next one
        (two writers), RecordFormatError when an entry does not parse or is newer than
        this build. On error nothing of the call is written.
        """
        ...

    async def list_history(
        self, record_id: str, *, after_seq: int | None = None, until_seq: int | None = None,
        limit: int | None = None, reverse: bool = False,
    ) -> list[dict[str, Any]]:
        """Entries with after_seq < seq <= until_seq, ascending (descending with
        ``reverse``), at most ``limit`` of them, upgraded in memory to the current
        version. Raises RecordFormatError (fail closed) when any entry it would return
        cannot be read; nothing is returned then and nothing is modified.
        """
        ...

    async def history_checkpoint(self, record_id: str) -> int | None:
        """The seq of the record's newest ``compaction_boundary`` or ``seed``, or None.

        An index lookup: it reads no entry. resume_transcript starts its tail read here.
        """
        ...

    async def close(self) -> None:
        """Release resources (for SqliteStorage: the connection and the write lease).
        Idempotent."""
        ...

__all__ = ["StorageAdapter"]
