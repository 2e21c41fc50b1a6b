"""Build small real stores for the write-job tests (and the benchmark) through SqliteStorage.

Every chat ``chat-NNNN`` has ``sessions`` sessions, ``messages`` messages, a history record
of ``entries`` entries and ``traces`` traces with ``spans`` spans and one event per span.
All its timestamps are ``age`` before NOW (plus small offsets), so a test can put chats on
either side of a cutoff. ``rows_of`` snapshots every row with its exact data bytes.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from steerable_agent_runtime.models import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan
from steerable_agent_runtime.storage.schema import TABLES
from steerable_agent_runtime.storage.sqlite import SqliteStorage

NOW = datetime.now(timezone.utc).replace(microsecond=0)
"""The clock the stores are built against; CLI tests run on the real clock, so this is now."""
OLD = timedelta(days=200)
NEW = timedelta(days=1)


@dataclass(frozen=True)
class ChatSpec:
    """One chat to write: its index, age and shape."""

    index: int
    age: timedelta = OLD
    active: bool = False
    sessions: int = 1
    messages: int = 3
    entries: int = 3
    traces: int = 2
    spans: int = 2
    trace_age: timedelta | None = None

    @property
    def chat_id(self) -> str:
        return f"chat-{self.index:04d}"


def make_store(path: Path, chats: list[ChatSpec]) -> Path:
    """Write ``chats`` into a new store at ``path`` and return the path (WAL checkpointed)."""
    asyncio.run(_write(path, chats))
    return path


async def _write(path: Path, chats: list[ChatSpec]) -> None:
    store = SqliteStorage(path, synchronous="NORMAL")
    try:
        for chat in chats:
            await _write_chat(store, chat)
    finally:
        await store.close()


def _ts(chat: ChatSpec, offset_s: int, age: timedelta | None = None) -> str:
    return (NOW - (age or chat.age) + timedelta(seconds=offset_s)).isoformat()


async def _write_chat(store: SqliteStorage, chat: ChatSpec) -> None:
    cid, i = chat.chat_id, chat.index
    for s in range(chat.sessions):
        await store.upsert_session(AgentSession(
            session_id=f"s-{i}-{s}", user_id=f"user-{i % 7}", chat_id=cid, current_stage="plan",
            is_active=chat.active and s == 0, created_at=_ts(chat, s), updated_at=_ts(chat, 10 + s),
            stage_data={"note": f"päckchen {i}/{s} ✓"}))
    for m in range(chat.messages):
        await store.append_message(ChatMessage(id=f"m-{i}-{m}", chat_id=cid, role="user" if m % 2 == 0 else "assistant",
                                               content=f"message {m} of chat {i} about widget{i}", created_at=_ts(chat, 20 + m)))
    if chat.entries:
        await store.append_history(cid, [{"type": "item", "at": _ts(chat, 40 + e),
                                          "message": {"role": "user", "content": f"entry {e} of {i}"}}
                                         for e in range(chat.entries)])
    for t in range(chat.traces):
        await _write_trace(store, chat, t)


async def _write_trace(store: SqliteStorage, chat: ChatSpec, t: int) -> None:
    i, age = chat.index, chat.trace_age or chat.age
    tid = f"t-{i}-{t}"
    await store.upsert_trace(HarnessTrace(trace_id=tid, session_id=f"s-{i}-0", chat_id=chat.chat_id,
                                          user_id=f"user-{i % 7}", started_at=_ts(chat, 60 + t, age), outcome="ok"))
    for s in range(chat.spans):
        span_id = f"sp-{i}-{t}-{s}"
        await store.add_span(tid, TraceSpan(span_id=span_id, name="llm.request", start_at=_ts(chat, 61 + t, age),
                                            kind="llm", attrs={"tokens": s}))
        await store.add_event(tid, TraceEvent(event_id=f"ev-{i}-{t}-{s}", span_id=span_id, name="retry",
                                              at=_ts(chat, 62 + t, age)))


def rows_of(path: Path, tables: tuple[str, ...] = tuple(TABLES)) -> dict[tuple[str, tuple], tuple]:
    """Every row of ``tables``: (table, key) -> all stored columns, ``data`` as raw bytes.

    Opens a private copy (db + -wal) so reading cannot change the files it inspects.
    """
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.db"
        shutil.copyfile(path, copy)
        wal = Path(f"{path}-wal")
        if wal.exists():
            shutil.copyfile(wal, f"{copy}-wal")
        conn = sqlite3.connect(copy)
        try:
            return {row_key: row for table in tables for row_key, row in _table_rows(conn, table)}
        finally:
            conn.close()


def _table_rows(conn: sqlite3.Connection, table: str):
    spec = TABLES[table]
    cols = [c if c != "data" else "CAST(data AS BLOB)" for c in spec.all_columns]
    names = list(spec.all_columns)
    for row in conn.execute(f"SELECT {', '.join(cols)} FROM {table}"):
        values = dict(zip(names, row))
        yield (table, tuple(values[k] for k in spec.key)), row


def file_bytes(path: Path) -> dict[str, bytes | None]:
    """The raw bytes of the db and its -wal (None where absent), to prove nothing changed."""
    out: dict[str, bytes | None] = {}
    for suffix in ("", "-wal"):
        p = Path(f"{path}{suffix}")
        out[suffix or "db"] = p.read_bytes() if p.exists() else None
    return out


def integrity(path: Path) -> str:
    """PRAGMA integrity_check of a private copy of ``path`` (db + -wal)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.db"
        shutil.copyfile(path, copy)
        if Path(f"{path}-wal").exists():
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        conn = sqlite3.connect(copy)
        try:
            return "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
        finally:
            conn.close()


def assert_healthy(path: Path) -> None:
    """The store passes PRAGMA integrity_check and steerable-maint's check with no error finding."""
    from steerable_agent_runtime.maintenance.check import check

    assert integrity(path) == "ok", path
    report = check(path)
    assert not report.has_errors, [f.model_dump() for f in report.findings]


def assert_moved_exactly_once(original: dict, first: Path, second: Path) -> None:
    """Every original row is in exactly one of the two stores, byte-identical; no other row exists."""
    a, b = rows_of(first), rows_of(second)
    both = set(a) & set(b)
    assert not both, f"rows in both files: {sorted(both)[:5]}"
    assert {**a, **b} == original


def assert_nothing_lost(original: dict, first: Path, second: Path) -> None:
    """Every original row is in at least one store, and wherever it is, it is byte-identical.

    ``second`` may not exist yet (a kill before the archive file was created).
    """
    a, b = rows_of(first), rows_of(second) if second.exists() else {}
    for key, row in original.items():
        assert key in a or key in b, f"lost {key}"
        assert a.get(key, row) == row and b.get(key, row) == row, f"changed {key}"
    assert set(a) | set(b) == set(original)
