"""`steerable-maint repair DB`: back up, salvage, rebuild, check, swap; every failure leaves the
original exactly as it was (or, mid-swap, refused by every opener until the next repair rolls
it back); killed with SIGKILL at random points, nothing is ever lost."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.errors import RepairInterruptedError, StoreAlreadyOwnedError
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.repair import repair, roll_back
from steerable_agent_runtime.storage.lease import WriteLease
from steerable_agent_runtime.storage.repairmark import intent_path
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_maint.cli import main
from tests.damage import build_store, copy_store, zero_page

# The module, not the job function the package exports under the same name.
repair_module = importlib.import_module("steerable_agent_runtime.maintenance.repair")

ROOT = Path(__file__).resolve().parents[2]


def _files(db: Path) -> dict[str, str]:
    """sha256 of each of the store's files that exists (db, -wal, -shm)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            out[suffix] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _history(db: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)  # creates no -wal/-shm
    try:
        return conn.execute("SELECT record_id, seq, data FROM history ORDER BY record_id, seq").fetchall()
    finally:
        conn.close()


@pytest.fixture
def healthy(tmp_path) -> Path:
    db = tmp_path / "store" / "sessions.db"
    db.parent.mkdir()
    build_store(db, seed=3, chats=3, entries=30)
    return db


def _damaged(tmp_path: Path) -> Path:
    db = tmp_path / "store" / "sessions.db"
    db.parent.mkdir(parents=True)
    build_store(db, seed=5, chats=4, entries=60)
    for seed in (1, 2, 3):
        zero_page(db, random.Random(seed))
    return db


def test_a_healthy_store_is_repaired_losing_nothing_and_backed_up_exactly(healthy):
    before, rows = _files(healthy), _history(healthy)
    report = repair(healthy)
    assert report.swapped and report.exit_code == 0 and report.lost_keys == 0 and not report.damage
    assert report.recovered["history"] == len(rows)
    backup = Path(report.backup)
    assert backup.parent == healthy.parent and backup.name.startswith("sessions.db.repair-")
    assert oct(backup.stat().st_mode & 0o777) == "0o700"
    assert {s: hashlib.sha256((backup / f"sessions.db{s}").read_bytes()).hexdigest() for s in before} == before
    assert (backup / "rows.jsonl").exists()
    assert _history(healthy) == rows
    assert check(healthy).findings == []
    assert sorted(p.name for p in healthy.parent.iterdir()) == sorted(["sessions.db", "sessions.lock", backup.name])


def test_a_damaged_store_is_repaired_and_the_report_says_what_was_lost(tmp_path):
    db = _damaged(tmp_path)
    before = _files(db)
    report = repair(db)
    assert report.swapped and report.exit_code == 1
    assert report.damage  # the zeroed pages are named
    assert any(f.severity == "error" for f in report.findings)
    assert check(db).findings == []  # the swapped-in store is sound
    backup = Path(report.backup)
    assert {s: hashlib.sha256((backup / f"sessions.db{s}").read_bytes()).hexdigest() for s in before} == before
    store = SqliteStorage(db)  # the app opens the repaired store
    store.close_sync()


def test_dry_run_reports_and_leaves_the_original_byte_identical(tmp_path):
    db = _damaged(tmp_path)
    before = _files(db)
    report = repair(db, dry_run=True)
    assert report.dry_run and not report.swapped and report.recovered
    assert _files(db) == before
    assert not intent_path(db).exists() and not Path(f"{db}.repair-new").exists()


def test_a_held_lease_refuses_the_repair_before_anything_is_written(healthy):
    before = sorted(p.name for p in healthy.parent.iterdir())
    files = _files(healthy)
    store = SqliteStorage(healthy)
    try:
        with pytest.raises(StoreAlreadyOwnedError):
            repair(healthy)
    finally:
        store.close_sync()
    assert sorted(p.name for p in healthy.parent.iterdir()) == before
    assert _files(healthy) == files


def test_a_failure_in_the_swap_is_refused_by_every_opener_until_the_next_repair_rolls_it_back(
        healthy, monkeypatch):
    before = _files(healthy)
    real = os.replace

    def failing(src, dst):
        if Path(dst) == healthy:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(repair_module.os, "replace", failing)
    with pytest.raises(OSError):
        repair(healthy)
    monkeypatch.undo()
    assert intent_path(healthy).exists()
    with pytest.raises(RepairInterruptedError) as caught:
        SqliteStorage(healthy)
    assert "repair" in caught.value.hint
    result = CliRunner().invoke(main, ["compact", str(healthy), "--traces-older-than", "30d"])
    assert result.exit_code == 3 and "interrupted" in result.stderr
    with WriteLease(healthy):
        assert roll_back(healthy)
    assert _files(healthy) == before and not intent_path(healthy).exists()
    assert repair(healthy).swapped


def test_the_cli_prints_the_report_and_exits_with_its_code(tmp_path):
    db = _damaged(tmp_path)
    result = CliRunner().invoke(main, ["repair", str(db), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["job"] == "repair" and report["swapped"] and Path(report["backup"]).is_dir()
    human = CliRunner().invoke(main, ["repair", str(db)])
    assert human.exit_code == 0, human.output  # the repaired store has nothing left to lose
    assert "lost: nothing" in human.stdout and "backup of the original files" in human.stdout


CHILD = """
import sys
from steerable_agent_runtime.maintenance.repair import repair
print("ready", flush=True)
repair(sys.argv[1])
print("done", flush=True)
"""


def test_a_kill_at_any_point_leaves_the_original_or_the_repaired_store_and_loses_nothing(tmp_path):
    template = _damaged(tmp_path / "template")
    original = _files(template)
    rng = random.Random(int(os.environ.get("CRASH_SEED", "11")))
    took = _timed_run(template, tmp_path / "timing")
    outcomes = set()
    for round_ in range(5):
        work = tmp_path / f"round-{round_}"
        work.mkdir()
        db = copy_store(template, work / "sessions.db")
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        time.sleep(0 if round_ == 0 else rng.uniform(0, took))  # round 0: right after start-up
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=60)
        if intent_path(db).exists():
            outcomes.add("mid-swap")
            with pytest.raises(RepairInterruptedError):
                SqliteStorage(db)
            with WriteLease(db):
                roll_back(db)
        now = _files(db)
        if now == original:
            outcomes.add("original")
        else:
            outcomes.add("repaired")
            assert set(now) <= {"", "-wal", "-shm"} and check(db).findings == []
            backups = sorted(work.glob("sessions.db.repair-*"))
            assert backups and {s: hashlib.sha256((backups[-1] / f"sessions.db{s}").read_bytes()).hexdigest()
                                for s in original} == original
        again = repair(db)  # a re-run always completes, whatever the kill left
        assert again.swapped and check(db).findings == []
        assert not list(work.glob(".sessions.db*"))  # no temp file left beside the store
    assert "original" in outcomes  # at least the first kill landed before the swap


def _timed_run(template: Path, work: Path) -> float:
    """Seconds from the child's ``ready`` to its exit, for a repair run to the end."""
    work.mkdir()
    db = copy_store(template, work / "sessions.db")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready", child.stderr.read()
    began = time.perf_counter()
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0 and "done" in out, err
    return time.perf_counter() - began
