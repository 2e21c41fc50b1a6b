"""Small helpers shared by the tests: run a coroutine, build models, hash files."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path
from typing import Any, Coroutine, TypeVar

from steerable_agent_runtime import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan

T = TypeVar("T")

BASE = "2026-01-01T00:00:00.000000Z"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion (the storages' async methods do inline I/O)."""
    return asyncio.run(coro)


def ts(minute: int) -> str:
    """A normalised timestamp ``minute`` minutes after 2026-01-01 00:00 UTC."""
    return f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00.000000Z"


def session(sid: str, chat: str = "c1", user: str = "u1", active: bool = True, minute: int = 0) -> AgentSession:
    return AgentSession(session_id=sid, user_id=user, chat_id=chat, current_stage="PLANNING",
                        is_active=active, created_at=ts(minute), updated_at=ts(minute))


def message(mid: str, chat: str = "c1", content: str = "hello", minute: int = 0) -> ChatMessage:
    return ChatMessage(id=mid, chat_id=chat, role="user", content=content, created_at=ts(minute))


def trace(tid: str, sid: str = "s1", chat: str = "c1", minute: int = 0) -> HarnessTrace:
    return HarnessTrace(trace_id=tid, session_id=sid, chat_id=chat, user_id="u1", started_at=ts(minute))


def span(sid: str, minute: int = 0, parent: str | None = None) -> TraceSpan:
    return TraceSpan(span_id=sid, name="llm.request", start_at=ts(minute), parent_id=parent, kind="llm")


def event(eid: str, span_id: str, minute: int = 0) -> TraceEvent:
    return TraceEvent(event_id=eid, span_id=span_id, name="llm.token", at=ts(minute))


def item(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "item", "message": {"role": role, "content": text}}


def boundary(*texts: str) -> dict[str, Any]:
    return {"type": "compaction_boundary", "trigger": "pressure", "preTokens": 1000, "postTokens": 100,
            "replacement": [{"role": "system", "content": t} for t in texts]}


def seed(*texts: str) -> dict[str, Any]:
    return {"type": "seed", "messages": [{"role": "user", "content": t} for t in texts]}


def digest_files(directory: Path) -> dict[str, str]:
    """sha256 of every file in ``directory`` (name -> hex): to prove nothing changed."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


from contextlib import contextmanager  # noqa: E402
import os  # noqa: E402


@contextmanager
def unprivileged():
    """Run the block without root's power to read anything: as root, switch the effective
    uid to nobody (65534) and back; as a normal user, do nothing (permissions already bite)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def wal_only_copy(source: Path, db: Path, statement: str) -> Path:
    """Copy the store ``source`` to ``db`` with ``statement`` committed to its ``-wal`` only, as
    a writer that died leaves it: no checkpoint, no ``-shm``. Returns ``db``."""
    import shutil
    import sqlite3

    template = db.with_name(f"template-{db.name}")
    shutil.copyfile(source, template)
    conn = sqlite3.connect(template, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute(statement)
    shutil.copyfile(template, db)
    shutil.copyfile(f"{template}-wal", f"{db}-wal")
    conn.close()
    for leftover in db.parent.glob(f"{template.name}*"):
        leftover.unlink()
    return db


def plant_history_row(db: Path | str, record_id: str, seq: int, v: int, raw: str, *, checkpoint: bool = False) -> None:
    """Write ``raw`` as history row ``(record_id, seq)`` of version ``v`` (type ``item``) with the
    checksum this build computes, as another SQLite client (or a newer build) would: sound on
    disk, whatever ``raw`` holds. ``checkpoint``: move it from the -wal into the db file."""
    from steerable_agent_runtime.storage.checksum import row_crc

    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, 'item', ?, ?, ?)",
                     (record_id, seq, v, BASE, raw, row_crc("history", (record_id, seq), raw)))
        conn.commit()
        if checkpoint:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
