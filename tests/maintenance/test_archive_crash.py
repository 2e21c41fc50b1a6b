"""Kill a real archive/restore process with SIGKILL at random points, re-run, lose nothing.

After every kill: every original row is in at least one of the two files, byte-identical
wherever it is. On every other archive round the app then revives one idle chat (a new
message) before the re-run, so a chat half-moved by the killed run may have to stay. After
the re-run: every original row is in exactly one file, byte-identical,
and both files pass PRAGMA integrity_check and check. Set CRASH_SEED to replay a failure.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from datetime import timedelta
from pathlib import Path

import pytest

from steerable_agent_runtime.maintenance.archive import archive, restore
from steerable_agent_runtime.models import ChatMessage
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests.maintenance import crashkit
from tests.maintenance.storemaker import (
    NOW, ChatSpec, assert_healthy, assert_moved_exactly_once, assert_nothing_lost, make_store, rows_of,
)

SEED = int(os.environ.get("CRASH_SEED", time.time_ns() % 2**32))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A small store: 16 idle chats (they move) and 2 recent ones (they stay)."""
    base = tmp_path_factory.mktemp("template")
    chats = [ChatSpec(i, messages=4, entries=4, traces=2, spans=2) for i in range(16)]
    chats += [ChatSpec(16, age=timedelta(days=1)), ChatSpec(17, age=timedelta(days=2))]
    return make_store(base / "sessions.db", chats)


def _revive(store: Path, index: int) -> dict:
    """As the app would: append a message from today to chat ``index``; return its new row."""
    async def append() -> None:
        s = SqliteStorage(store)
        try:
            await s.append_message(ChatMessage(id=f"m-{index}-revived", chat_id=f"chat-{index:04d}", role="user",
                                               content="back again", created_at=NOW.isoformat()))
        finally:
            await s.close()

    asyncio.run(append())
    return {k: v for k, v in rows_of(store, ("messages",)).items() if k == ("messages", (f"m-{index}-revived",))}


def _archive_rounds(template: Path, tmp_path: Path, rounds: int) -> None:
    rng = random.Random(SEED)
    calib = tmp_path / "calib"
    calib.mkdir()
    duration = crashkit.run_to_end("archive", crashkit.copy_store(template, calib / "s.db"), calib / "a.db", "1")
    original, interrupted = rows_of(template), 0
    for n in range(rounds):
        work = tmp_path / f"round{n}"
        work.mkdir()
        store, arc = crashkit.copy_store(template, work / "sessions.db"), work / "archive.db"
        proc = crashkit.start("archive", store, arc, str(rng.choice([1, 2, 5])))
        interrupted += crashkit.kill_after(proc, rng.uniform(0, duration * 0.9))
        assert_nothing_lost(original, store, arc)
        revived = _revive(store, rng.randrange(16)) if n % 2 else {}  # the app ran before the re-run
        archive(store, to=arc, older_than=timedelta(days=30), now=NOW)
        assert_moved_exactly_once({**original, **revived}, store, arc)
        left = rows_of(store)
        assert set(revived) <= set(left), f"seed {SEED} round {n}: a message from today was archived"
        assert {k[1][0] for k in left if k[0] == "sessions"} >= {"s-16-0", "s-17-0"}, f"seed {SEED} round {n}"
        assert_healthy(store)
        assert_healthy(arc)
    assert interrupted >= rounds // 3, f"only {interrupted} of {rounds} kills hit a running job (seed {SEED})"


def test_archive_rerun_after_kill_loses_nothing(template, tmp_path):
    _archive_rounds(template, tmp_path, rounds=20)


@pytest.mark.soak
def test_archive_rerun_after_kill_loses_nothing_soak(template, tmp_path):
    _archive_rounds(template, tmp_path, rounds=300)


@pytest.fixture(scope="module")
def restore_template(tmp_path_factory):
    """An archive holding one big chat (chat-0000) and a store with one other chat."""
    base = tmp_path_factory.mktemp("restore-template")
    store = make_store(base / "sessions.db", [ChatSpec(0, messages=120, entries=120, traces=10, spans=6),
                                              ChatSpec(1, age=timedelta(days=1))])
    archive(store, to=base / "archive.db", older_than=timedelta(days=30), now=NOW)
    return store, base / "archive.db"


def _restore_rounds(pair: tuple[Path, Path], tmp_path: Path, rounds: int) -> None:
    rng = random.Random(SEED + 1)
    calib = tmp_path / "calib"
    calib.mkdir()
    duration = crashkit.run_to_end("restore", crashkit.copy_store(pair[1], calib / "a.db"),
                                   crashkit.copy_store(pair[0], calib / "s.db"), "chat-0000")
    original = {**rows_of(pair[0]), **rows_of(pair[1])}
    interrupted = 0
    for n in range(rounds):
        work = tmp_path / f"round{n}"
        work.mkdir()
        store = crashkit.copy_store(pair[0], work / "sessions.db")
        arc = crashkit.copy_store(pair[1], work / "archive.db")
        proc = crashkit.start("restore", arc, store, "chat-0000")
        interrupted += crashkit.kill_after(proc, rng.uniform(0, duration * 0.9))
        assert_nothing_lost(original, store, arc)
        report = restore(arc, to=store, chat_id="chat-0000")
        assert report.exit_code == 0, f"seed {SEED} round {n}: {report.findings}"
        assert_moved_exactly_once(original, store, arc)
        assert not any(k[0] == "sessions" for k in rows_of(arc)), f"seed {SEED} round {n}"
        assert_healthy(store)
        assert_healthy(arc)
    assert interrupted >= rounds // 3, f"only {interrupted} of {rounds} kills hit a running job (seed {SEED})"


def test_restore_rerun_after_kill_loses_nothing(restore_template, tmp_path):
    _restore_rounds(restore_template, tmp_path, rounds=20)


@pytest.mark.soak
def test_restore_rerun_after_kill_loses_nothing_soak(restore_template, tmp_path):
    _restore_rounds(restore_template, tmp_path, rounds=300)
