"""Eight writer processes on one PostgreSQL database at once: nothing lost, nothing doubled,
seq contiguous from 1, no raw driver error (tests/storage/sqla_writer.py is the writer)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

from tests.helpers import run

WRITERS = 8
CALLS = 40


def run_writers(url: str) -> list[dict]:
    """Start WRITERS processes, release them together, return every line they printed."""
    procs = [subprocess.Popen([sys.executable, "-m", "tests.storage.sqla_writer", url, "shared", "s1", f"w{n}",
                               str(CALLS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for n in range(WRITERS)]
    for proc in procs:
        assert "ready" in json.loads(proc.stdout.readline())
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    lines: list[dict] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        lines.extend(json.loads(line) for line in out.splitlines())
    return lines


def test_eight_processes_append_to_one_record_and_upsert_one_session(postgres, pg_url):
    run(SqlAlchemyStorage(pg_url).create_schema())
    lines = run_writers(pg_url)
    appends = [line for line in lines if line["op"] == "append"]
    upserts = [line for line in lines if line["op"] == "upsert"]
    assert len(appends) == len(upserts) == WRITERS * CALLS
    # appends: a conflict may only surface as HistorySeqConflictError (never a raw driver error)
    errors = [line for line in appends if "error" in line]
    assert all(e["error"] == "HistorySeqConflictError" for e in errors), errors
    acked = [line["ack"] for line in appends if "ack" in line]
    stored = run(SqlAlchemyStorage(pg_url).list_history("shared"))
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    texts = [e["message"]["content"] for e in stored]
    assert Counter(texts) == Counter(t for call in acked for t in call)  # each acknowledged entry once
    position = {t: i for i, t in enumerate(texts)}
    for call in acked:  # one call's entries are contiguous, in order
        assert [position[t] for t in call] == list(range(position[call[0]], position[call[0]] + len(call)))
    # upserts of one session: every one acknowledged, one whole row left, a writer's last
    assert [line for line in upserts if "error" in line] == []
    rows = postgres.psql("SELECT data || chr(9) || crc FROM sessions", pg_url.rsplit("/", 1)[1]).splitlines()
    assert len(rows) == 1
    data, crc = rows[0].split("\t")
    assert row_crc("sessions", ("s1",), data) == int(crc)
    final = run(SqlAlchemyStorage(pg_url).get_session("s1"))
    assert final.stage_data["i"] == CALLS - 1
    print(f"{len(acked)} appends acknowledged, {len(errors)} raised HistorySeqConflictError")


def test_without_the_record_lock_conflicts_are_retried_not_raised(pg_url, monkeypatch, caplog):
    """The unique key alone (a writer that takes no advisory lock) still gives contiguous seq:
    the loser of each race gets a unique violation, which the call retries."""
    import asyncio

    from sqlalchemy import text

    from steerable_agent_runtime.storage import sqlalchemy as module

    monkeypatch.setattr(module, "_LOCK_RECORD", text("SELECT CAST(:r AS text)"))
    caplog.set_level("DEBUG", logger=module.__name__)

    async def race() -> tuple[list[list[str]], list[str]]:
        stores = [SqlAlchemyStorage(pg_url) for _ in range(WRITERS)]
        await stores[0].open()
        acked: list[list[str]] = []
        errors: list[str] = []

        async def writer(n: int, store: SqlAlchemyStorage) -> None:
            for i in range(15):
                texts = [f"w{n}-{i}-{j}" for j in range(1 + i % 3)]
                try:
                    await store.append_history("raced", [{"type": "item", "message": {"role": "user", "content": t}}
                                                         for t in texts])
                    acked.append(texts)
                except Exception as exc:  # noqa: BLE001 - the assertion below names it
                    errors.append(type(exc).__name__)

        await asyncio.gather(*(writer(n, s) for n, s in enumerate(stores)))
        for store in stores:
            await store.close()
        return acked, errors

    acked, errors = run(race())
    assert "met another writer" in caplog.text  # the race happened and was retried
    assert set(errors) <= {"HistorySeqConflictError"}, errors
    stored = run(SqlAlchemyStorage(pg_url).list_history("raced"))
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert Counter(e["message"]["content"] for e in stored) == Counter(t for call in acked for t in call)
