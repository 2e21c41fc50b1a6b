"""Write jobs on a store whose owner was SIGKILLed: committed rows only in the -wal count.

A killed app leaves its -wal and -shm behind with acknowledged commits not yet in the db
file. compact and archive must see those rows (prune/move them), and their dry runs must
leave the db and -wal bytes as they found them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from steerable_agent_runtime.maintenance.archive import archive
from steerable_agent_runtime.maintenance.compact import compact
from tests.maintenance.crashkit import REPO
from tests.maintenance.storemaker import NOW, OLD, ChatSpec, assert_healthy, file_bytes, make_store, rows_of

WRITER = """
import asyncio, sys
from steerable_agent_runtime.models import AgentSession, ChatMessage, HarnessTrace
from steerable_agent_runtime.storage.sqlite import SqliteStorage
old = sys.argv[2]
async def main():
    s = SqliteStorage(sys.argv[1])
    await s.upsert_session(AgentSession(session_id="s-wal", user_id="u", chat_id="chat-wal", current_stage="x",
                                        is_active=False, created_at=old, updated_at=old))
    await s.append_message(ChatMessage(id="m-wal", chat_id="chat-wal", role="user", content="walnut", created_at=old))
    await s.upsert_trace(HarnessTrace(trace_id="t-wal", session_id="s-wal", chat_id="chat-wal", user_id="u",
                                      started_at=old))
asyncio.run(main())
print("committed", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def crashed(tmp_path):
    """A store whose writer committed chat-wal (200 days old) and was then SIGKILLed."""
    store = make_store(tmp_path / "sessions.db", [ChatSpec(0)])
    old = (NOW - OLD).isoformat()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store), old], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "committed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert Path(f"{store}-wal").stat().st_size > 0
    return store


def test_archive_after_owner_crash_moves_rows_that_were_only_in_the_wal(crashed, tmp_path):
    original = rows_of(crashed)
    assert ("messages", ("m-wal",)) in original
    report = archive(crashed, to=tmp_path / "archive.db", older_than=timedelta(days=30), now=NOW)
    assert report.chats_moved == 2
    assert rows_of(tmp_path / "archive.db") == original and rows_of(crashed) == {}
    assert_healthy(crashed)
    assert_healthy(tmp_path / "archive.db")


def test_compact_after_owner_crash_prunes_a_trace_that_was_only_in_the_wal(crashed):
    report = compact(crashed, older_than=timedelta(days=30), now=NOW)
    assert report.traces == 3 and ("traces", ("t-wal",)) not in rows_of(crashed)
    assert ("messages", ("m-wal",)) in rows_of(crashed)


def test_dry_runs_after_owner_crash_see_the_wal_and_change_no_byte(crashed, tmp_path):
    before = file_bytes(crashed)
    dry_compact = compact(crashed, older_than=timedelta(days=30), now=NOW, dry_run=True)
    dry_archive = archive(crashed, to=tmp_path / "archive.db", older_than=timedelta(days=30), now=NOW, dry_run=True)
    assert dry_compact.traces == 3 and dry_archive.chats_moved == 2
    assert file_bytes(crashed) == before
