"""InMemoryStorage: the StorageAdapter for tests and development.

Same contract as SqliteStorage (one contract suite runs against both, and a hypothesis
state machine checks they agree). Entities are kept as canonical JSON, so what comes back
is a fresh copy, exactly as it would be read from SQLite.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ..history import CHECKPOINT_TYPES, read_entry_text
from ..history_append import (ItemSnapshot, built_snapshot, item_snapshot, loop_item, prepare_append,
                              snapshot_text)
from ..errors import UsageError
from ..models import (AgentSession, ChatMessage, HarnessTrace, LLMMessage, TraceEvent, TraceSpan, WireModel,
                      has_lone_surrogate)
from .timebounds import time_bound

_time_ns = time.time_ns

M = TypeVar("M", bound=WireModel)


class InMemoryStorage:
    """A StorageAdapter that keeps everything in process memory. Not durable."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that overrides append_history (a host's spy, mirror or audit log) loses
        :meth:`append_items_now` (set to None), unless it overrides that too: the loop's record
        writer then awaits append_history at every flush, so no append goes around the override.
        :meth:`append_built_now` likewise, when either of the two is overridden and it is not."""
        super().__init_subclass__(**kwargs)
        if (cls.append_history is not InMemoryStorage.append_history
                and cls.append_items_now is InMemoryStorage.append_items_now):
            cls.append_items_now = None  # type: ignore[assignment]
        if (cls.append_built_now is InMemoryStorage.append_built_now
                and (cls.append_history is not InMemoryStorage.append_history
                     or cls.append_items_now is not InMemoryStorage.append_items_now)):
            cls.append_built_now = None  # type: ignore[assignment]  # (no append goes around an override)

    def __init__(self) -> None:
        self._sessions: dict[str, str] = {}
        self._messages: dict[str, str] = {}
        self._traces: dict[str, str] = {}
        self._spans: dict[str, tuple[str, str]] = {}
        self._events: dict[str, tuple[str, str]] = {}
        self._history: dict[str, list[str | ItemSnapshot]] = {}  # entry texts; the loop's items as snapshots
        self._checkpoints: dict[str, list[int]] = {}

    # sessions -------------------------------------------------------------------------
    async def upsert_session(self, session: AgentSession) -> AgentSession:
        self._sessions[session.session_id] = session.to_json()
        return _load(AgentSession, self._sessions[session.session_id])

    async def get_session(self, session_id: str) -> AgentSession | None:
        text = self._sessions.get(session_id)
        return None if text is None else _load(AgentSession, text)

    async def list_sessions(
        self, *, user_id: str | None = None, chat_id: str | None = None, active_only: bool = False
    ) -> list[AgentSession]:
        found = [_load(AgentSession, t) for t in self._sessions.values()]
        found = [s for s in found if (user_id is None or s.user_id == user_id)
                 and (chat_id is None or s.chat_id == chat_id) and (not active_only or s.is_active)]
        return sorted(found, key=lambda s: (s.created_at, s.session_id))

    # messages -------------------------------------------------------------------------
    async def append_message(self, message: ChatMessage) -> ChatMessage:
        self._messages[message.id] = message.to_json()  # dict order keeps first insertion
        return _load(ChatMessage, self._messages[message.id])

    async def list_messages(self, chat_id: str, *, limit: int | None = None) -> list[ChatMessage]:
        rows = [(i, _load(ChatMessage, t)) for i, t in enumerate(self._messages.values())]
        chat = sorted((r for r in rows if r[1].chat_id == chat_id), key=lambda r: (r[1].created_at, r[0]))
        found = [m for _, m in chat]
        return found if limit is None else found[max(0, len(found) - limit):]

    # traces ---------------------------------------------------------------------------
    async def upsert_trace(self, trace: HarnessTrace) -> HarnessTrace:
        self._traces[trace.trace_id] = trace.to_json()
        return _load(HarnessTrace, self._traces[trace.trace_id])

    async def get_trace(self, trace_id: str) -> HarnessTrace | None:
        text = self._traces.get(trace_id)
        return None if text is None else _load(HarnessTrace, text)

    async def list_traces(
        self, *, session_id: str | None = None, chat_id: str | None = None,
        since: str | None = None, until: str | None = None,
    ) -> list[HarnessTrace]:
        since, until = time_bound("since", since), time_bound("until", until)
        found = [_load(HarnessTrace, t) for t in self._traces.values()]
        found = [t for t in found if (session_id is None or t.session_id == session_id)
                 and (chat_id is None or t.chat_id == chat_id)
                 and (since is None or t.started_at >= since) and (until is None or t.started_at < until)]
        return sorted(found, key=lambda t: (t.started_at, t.trace_id))

    async def add_span(self, trace_id: str, span: TraceSpan) -> TraceSpan:
        _refuse_unholdable("spans", trace_id)
        self._spans[span.span_id] = (trace_id, span.to_json())
        return _load(TraceSpan, self._spans[span.span_id][1])

    async def add_event(self, trace_id: str, event: TraceEvent) -> TraceEvent:
        _refuse_unholdable("events", trace_id)
        self._events[event.event_id] = (trace_id, event.to_json())
        return _load(TraceEvent, self._events[event.event_id][1])

    async def list_spans(self, trace_id: str) -> list[TraceSpan]:
        found = [_load(TraceSpan, t) for tid, t in self._spans.values() if tid == trace_id]
        return sorted(found, key=lambda s: (s.start_at, s.span_id))

    async def list_events(self, trace_id: str, *, span_id: str | None = None) -> list[TraceEvent]:
        found = [_load(TraceEvent, t) for tid, t in self._events.values() if tid == trace_id]
        found = [e for e in found if span_id is None or e.span_id == span_id]
        return sorted(found, key=lambda e: (e.at, e.event_id))

    # history --------------------------------------------------------------------------
    async def append_history(self, record_id: str, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        log = self._history.get(record_id)
        if log is None:  # a new record: its id must be one a persistent store can hold
            _refuse_unholdable("history", record_id)
        if type(entries) is list and len(entries) == 1:
            # the loop's flush: one item holding an LLMMessage (history_append.loop_item: the same bytes
            # and dict as prepare_append; None when it is any other entry)
            item = loop_item(entries[0], 1 if log is None else len(log) + 1)
            if item is not None:
                if log is None:
                    log = self._history[record_id] = []
                log.append(item[0])
                return [item[1]]
        prepared = prepare_append(record_id, entries, 1 if log is None else len(log) + 1)
        if log is None:
            log = self._history[record_id] = []
        stored = []
        for p in prepared:
            log.append(p.data)
            if p.type in CHECKPOINT_TYPES:
                self._checkpoints.setdefault(record_id, []).append(p.seq)
            stored.append(p.wire)
        return stored

    def append_items_now(self, record_id: str, messages: Sequence[LLMMessage], *,
                         expect_seq: int | None = None) -> bool:
        """Append each of ``messages`` as an ``item`` entry, synchronously, returning no entries.

        Stores what ``append_history(record_id, [{"type": "item", "message": m} for m in
        messages])`` stores (list_history reads the same entries), all stamped with one time,
        atomic: True when all were appended; False, appending nothing, when any message is not
        exactly a sound LLMMessage with str or no content and valid Unicode text (the caller
        then calls append_history, which stores it or raises the usual error). Each is kept as
        its history_append.item_snapshot (immutable strs, the tool calls as text, the stamp as
        its clock reading) and written as text when read (snapshot_text: the text prepare_append
        stores for the stamp utc_now() gives for that reading; property tests hold them equal),
        so a later change to the message does not reach the record.
        ``expect_seq``: append only when it is the record's next seq (1: only to an empty
        record), else return False, appending nothing. The loop's record
        writer calls it at its flush points and for a new record's first messages
        (loop/record.py): the loop never reads the returned entries, and a coroutine per flush
        is what InMemoryStorage would add. A subclass that overrides append_history loses it
        (see ``__init_subclass__``).
        """
        log = self._history.get(record_id)
        seq = 1 if log is None else len(log) + 1
        if expect_seq is not None and expect_seq != seq:
            return False
        at = _time_ns()  # the stamp's clock reading: written as utc_now() would have written it when read
        if len(messages) == 1:  # the common flush
            entry = item_snapshot(messages[0], seq, at)
            if entry is None:
                return False
            if log is None:
                self._history[record_id] = [entry]
            else:
                log.append(entry)
            return True
        stored: list[str | ItemSnapshot] = []
        for message in messages:
            entry = item_snapshot(message, seq, at)
            if entry is None:
                return False
            stored.append(entry)
            seq += 1
        if log is None:
            self._history[record_id] = stored
        else:
            log.extend(stored)
        return True

    def append_built_now(self, record_id: str, role: str, content: str | None, call_id: str | None,
                         name: str | None, calls: list[dict[str, Any]] | None) -> bool:
        """``append_items_now(record_id, [m])`` for the one message ``m`` the loop has just built
        from exactly these values (history_append.built_snapshot says which builders and
        values; the caller vouches for their types): the same entry, stamped now, without
        checking those types again. False, nothing appended, when built_snapshot declines it (a
        lone surrogate): the caller then flushes the general way. None on a subclass that
        overrides append_history or append_items_now without overriding this (see
        ``__init_subclass__``)."""
        log = self._history.get(record_id)
        entry = built_snapshot(1 if log is None else len(log) + 1, _time_ns(), role, content, call_id, name, calls)
        if entry is None:
            return False
        if log is None:
            self._history[record_id] = [entry]
        else:
            log.append(entry)
        return True

    async def list_history(
        self, record_id: str, *, after_seq: int | None = None, until_seq: int | None = None,
        limit: int | None = None, reverse: bool = False,
    ) -> list[dict[str, Any]]:
        log = self._history.get(record_id, [])
        low = max(after_seq or 0, 0)
        high = len(log) if until_seq is None else max(min(until_seq, len(log)), low)
        seqs = range(high, low, -1) if reverse else range(low + 1, high + 1)
        if limit is not None:
            seqs = seqs[: max(limit, 0)]
        return [read_entry_text(_text(log[s - 1]), record_id=record_id, seq=s) for s in seqs]

    async def history_checkpoint(self, record_id: str) -> int | None:
        marks = self._checkpoints.get(record_id)
        return marks[-1] if marks else None

    async def close(self) -> None:
        """Nothing to release; kept for the uniform protocol."""


def _refuse_unholdable(table: str, key: Any) -> None:
    """UsageError for a key no persistent store can hold (a lone surrogate: SqliteStorage and
    SqlAlchemyStorage refuse it as well), so the stores agree."""
    if type(key) is str and has_lone_surrogate(key):
        raise UsageError(f"{table}: key {key!r} holds a lone UTF-16 surrogate (not a character): no row can hold it;"
                         " nothing was written", hint="pass ids as valid Unicode text")


def _text(stored: str | ItemSnapshot) -> str:
    """A stored entry's text (an item kept as its snapshot is written now)."""
    return stored if type(stored) is str else snapshot_text(stored)


def _load(model: type[M], text: str) -> M:
    return model.model_validate_json(text)
