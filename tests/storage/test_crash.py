"""Acknowledged appends survive SIGKILL at random moments."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steerable_agent_runtime import SqliteStorage
from tests.helpers import run

ROOT = Path(__file__).resolve().parents[2]


def kill_round(db: Path, rng: random.Random) -> int:
    """Run one appending child, SIGKILL it after a random delay; return the last acked seq."""
    child = subprocess.Popen([sys.executable, "-m", "tests.storage.children", "append", str(db), "c1"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(rng.uniform(0.0, 0.15))
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    acks = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack ")]
    return max(acks, default=0)


def verify(db: Path, acked: int) -> int:
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = SqliteStorage(db)
    entries = run(store.list_history("c1"))
    run(store.close())
    seqs = [e["seq"] for e in entries]
    assert seqs == list(range(1, len(seqs) + 1)), "seq must stay contiguous"
    assert len(seqs) >= acked, f"acknowledged seq {acked} lost; only {len(seqs)} survived"
    return len(seqs)


def crash_rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    db = tmp_path / "sessions.db"
    acked_ever = 0
    for _ in range(rounds):
        acked_ever = max(acked_ever, kill_round(db, rng))
        survived = verify(db, acked_ever)
        acked_ever = max(acked_ever, survived)
    assert acked_ever > 0


def test_acknowledged_appends_survive_sigkill_20_rounds(tmp_path):
    crash_rounds(tmp_path, rounds=20, seed=20261130)


@pytest.mark.soak
def test_acknowledged_appends_survive_sigkill_soak(tmp_path):
    crash_rounds(tmp_path, rounds=500, seed=7)
