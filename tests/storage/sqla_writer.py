"""A writer process for the concurrent-writer tests (``python -m tests.storage.sqla_writer``).

``URL RECORD SESSION NAME CALLS``: after "go" on stdin, make CALLS appends of 1-4 entries
each to RECORD, then CALLS upserts of SESSION (stage_data {"writer": NAME, "i": i}); print one
JSON line per call: {"op": "append"|"upsert", "ack": [texts]} once acknowledged, or {"op":
.., "error": class, "steerable": bool, "texts": [texts]} when the call raised.
"""

from __future__ import annotations

import asyncio
import json
import sys

from steerable_agent_runtime import AgentSession, SteerableError
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage


def report(line: dict) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(url: str, record: str, session: str, name: str, calls: str) -> None:
    store = SqlAlchemyStorage(url)
    await store.open()
    report({"ready": name})
    sys.stdin.readline()  # "go": every writer starts at once
    for op in ("append", "upsert"):
        for i in range(int(calls)):
            if op == "append":
                texts = [f"{name}-{i}-{j}" for j in range(1 + (i * 7 + len(name)) % 4)]
                call = store.append_history(record, [{"type": "item", "message": {"role": "user", "content": t}}
                                                     for t in texts])
            else:
                texts = [f"{name}-{i}"]
                call = store.upsert_session(AgentSession(
                    session_id=session, user_id="u", chat_id="c", current_stage="S", is_active=True,
                    created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z",
                    stage_data={"writer": name, "i": i}))
            try:
                await call
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails on any
                report({"op": op, "error": type(exc).__name__, "steerable": isinstance(exc, SteerableError),
                        "texts": texts, "message": str(exc)})
                continue
            report({"op": op, "ack": texts})
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
