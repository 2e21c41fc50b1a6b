"""Property: for any mix of chats, archive moves exactly the chats the eligibility rule names,
whole and byte-identical, and every row ends up in exactly one file."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.models import AgentSession, ChatMessage, HarnessTrace
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests.maintenance.storemaker import NOW, assert_moved_exactly_once, rows_of

PARTS = ("session", "message", "history", "trace")
AGE = st.sampled_from([timedelta(days=400), timedelta(days=31), timedelta(days=29), timedelta(hours=1)])
CHAT = st.fixed_dictionaries({"active": st.booleans(), "ages": st.fixed_dictionaries({p: AGE for p in PARTS}),
                              "has": st.fixed_dictionaries({p: st.booleans() for p in PARTS})})


async def _write(path: Path, chats: list[dict]) -> None:
    store = SqliteStorage(path, synchronous="NORMAL")
    try:
        for i, chat in enumerate(chats):
            cid, at = f"c{i}", {p: (NOW - chat["ages"][p]).isoformat() for p in PARTS}
            if chat["has"]["session"]:
                await store.upsert_session(AgentSession(session_id=f"s{i}", user_id="u", chat_id=cid, current_stage="x",
                                                        is_active=chat["active"], created_at=at["session"],
                                                        updated_at=at["session"]))
            if chat["has"]["message"]:
                await store.append_message(ChatMessage(id=f"m{i}", chat_id=cid, role="user", content=f"hello {i}",
                                                       created_at=at["message"]))
            if chat["has"]["history"]:
                await store.append_history(cid, [{"type": "item", "at": at["history"],
                                                  "message": {"role": "user", "content": "x"}}])
            if chat["has"]["trace"]:
                await store.upsert_trace(HarnessTrace(trace_id=f"t{i}", session_id=f"s{i}", chat_id=cid, user_id="u",
                                                      started_at=at["trace"]))
    finally:
        await store.close()


def _should_move(chat: dict, include_active: bool) -> bool:
    parts = [p for p in PARTS if chat["has"][p]]
    if not parts:
        return False  # nothing of it exists: not a chat
    if chat["has"]["session"] and chat["active"] and not include_active:
        return False
    return all(chat["ages"][p] > timedelta(days=30) for p in parts)


@given(chats=st.lists(CHAT, min_size=1, max_size=8), include_active=st.booleans(), batch=st.integers(1, 4))
def test_archive_moves_exactly_the_eligible_chats_whole(chats, include_active, batch):
    with tempfile.TemporaryDirectory() as tmp:
        store, target = Path(tmp) / "s.db", Path(tmp) / "a.db"
        asyncio.run(_write(store, chats))
        original = rows_of(store)
        report = archive(store, to=target, older_than=timedelta(days=30), now=NOW, include_active=include_active,
                         batch_size=batch)
        expected = {f"c{i}" for i, chat in enumerate(chats) if _should_move(chat, include_active)}
        moved = {_chat_of(key) for key in rows_of(target)}
        assert moved == expected and report.chats_moved == len(expected)
        assert_moved_exactly_once(original, store, target)


def _chat_of(key: tuple) -> str:
    table, k = key
    return k[0] if table == "history" else "c" + k[0][1:]
