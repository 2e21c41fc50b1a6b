"""A real app stand-in for the read-only tests, run as a child process.

``python writer_child.py DB`` opens DB with SqliteStorage (taking the lease), turns
automatic checkpoints off so every commit stays in the ``-wal``, writes one chat and prints
``ready``. Then it obeys one command per stdin line:

- ``write N``: N times: append a history entry and a message, and upsert the chat's one
  session with ``stageData.writes`` = entries so far; print ``wrote TOTAL``;
- ``run``: keep writing like ``write 1`` until ``pause``;
- ``pause``: stop, print ``paused OK FAILED`` (commits made and commits that raised);
- ``checkpoint``: copy the -wal into the db file (PASSIVE), print ``checkpointed FRAMES``;
- ``exit``: close cleanly (SQLite checkpoints and removes the -wal) and exit 0.

A child killed with SIGKILL leaves its ``-wal`` and ``-shm`` behind, as a crashed app does.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtime"))

from steerable_agent_runtime import AgentSession, ChatMessage, SqliteStorage  # noqa: E402

CHAT = "chat-live"
STAMP = "2026-02-01T00:00:00.000000Z"


class Writer:
    def __init__(self, db: str) -> None:
        self.store = SqliteStorage(db)
        self.store.conn.execute("PRAGMA wal_autocheckpoint = 0")
        self.total, self.ok, self.failed = 0, 0, 0

    async def start(self) -> None:
        await self.one()

    async def one(self) -> None:
        try:
            self.total += 1
            text = f"live message number {self.total} marmalade"
            await self.store.append_history(CHAT, [{"type": "item", "at": STAMP,
                                                    "message": {"role": "user", "content": text}}])
            await self.store.append_message(ChatMessage(id=f"m-live-{self.total}", chat_id=CHAT, role="user",
                                                        content=text, created_at=STAMP))
            await self.store.upsert_session(AgentSession(session_id="s-live", user_id="u-live", chat_id=CHAT,
                                                         current_stage="run", is_active=True, created_at=STAMP,
                                                         updated_at=STAMP, stage_data={"writes": self.total}))
            self.ok += 1
        except Exception as exc:  # every failed write is counted and reported to the test
            self.failed += 1
            print(f"failed {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


async def main(db: str) -> None:
    writer = Writer(db)
    await writer.start()
    print("ready", flush=True)
    stop = threading.Event()
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "write":
            for _ in range(int(cmd[1])):
                await writer.one()
            print(f"wrote {writer.total}", flush=True)
        elif cmd[0] == "run":
            stop.clear()
            waiter = threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True)
            waiter.start()
            while not stop.is_set():
                await writer.one()
                await asyncio.sleep(0.002)
            print(f"paused {writer.ok} {writer.failed}", flush=True)
        elif cmd[0] == "checkpoint":
            busy, frames, done = writer.store.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            print(f"checkpointed {done}", flush=True)
        elif cmd[0] == "exit":
            break
    await writer.store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
