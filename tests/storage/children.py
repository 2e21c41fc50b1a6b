"""Child-process programs for lease and crash tests (run as ``python -m tests.storage.children``).

``hold DB``: open the store, print "ready <pid>", then sleep until killed.
``append DB RECORD``: append entries one call at a time forever; after each committed call
print "ack <seq>" (flushed), so the parent knows exactly which appends were acknowledged.
"""

from __future__ import annotations

import asyncio
import sys
import time

from steerable_agent_runtime import SqliteStorage


async def hold(db: str) -> None:
    store = SqliteStorage(db)
    print(f"ready {__import__('os').getpid()}", flush=True)
    while True:
        time.sleep(3600)
    await store.close()


async def append(db: str, record: str) -> None:
    store = SqliteStorage(db)
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        batch = [{"type": "item", "message": {"role": "user", "content": f"entry {n}.{i} " + "x" * (n % 50)}}
                 for i in range(1 + n % 3)]
        stored = await store.append_history(record, batch)
        print(f"ack {stored[-1]['seq']}", flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run({"hold": hold, "append": append}[command](*args))
