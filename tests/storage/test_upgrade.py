"""A store of schema version 1 stays readable, check reports it as older, the app upgrades it
on open in one transaction (a kill at any point leaves version 1 or version 2, whole), and a
row that was damaged before the upgrade is still reported as damaged after it."""

from __future__ import annotations

import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from steerable_agent_runtime import DataIntegrityError, RecordFormatError, SqliteStorage
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.history import history
from steerable_agent_runtime.storage.checksum import IDENTITY, legacy_crc, row_crc
from steerable_agent_runtime.storage.schema import SCHEMA_VERSION, TABLES
from tests.helpers import event, item, message, run, session, span, trace
from tests.storage.legacy import to_schema_v1

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"


def _v1_store(tmp_path: Path, entries: int = 3) -> Path:
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    run(store.upsert_session(session("s1")))
    run(store.append_message(message("m1")))
    run(store.upsert_trace(trace("t1")))
    run(store.add_span("t1", span("sp1")))
    run(store.add_event("t1", event("ev1", "sp1")))
    run(store.append_history("c1", [item(f"e{i}") for i in range(entries)]))
    run(store.close())
    to_schema_v1(db)
    return db


def _version(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def _rule_holds(db: Path) -> tuple[bool, bool]:
    """(every row matches the schema-1 rule, every row matches the schema-2 rule)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    legacy = keyed = True
    try:
        for table in TABLES:
            cols = ", ".join(IDENTITY[table])
            for *ident, data, crc in conn.execute(f"SELECT {cols}, CAST(data AS BLOB), crc FROM {table}"):
                legacy &= legacy_crc(data) == crc
                keyed &= row_crc(table, ident, data) == crc
    finally:
        conn.close()
    return legacy, keyed


def test_check_reads_a_v1_store_and_reports_it_as_older_with_the_remedy(tmp_path):
    db = _v1_store(tmp_path)
    before = db.read_bytes()
    report = check(db)
    assert report.schema_version == 1
    assert [(f.code, f.severity) for f in report.findings] == [("schema-too-old", "warning")]
    assert "open the store once with the app" in report.findings[0].hint
    assert report.exit_code == 0
    assert db.read_bytes() == before


def test_the_read_only_jobs_read_a_v1_store_with_its_own_rule(tmp_path):
    db = _v1_store(tmp_path)
    view = history(db, "c1")
    assert [e.readable for e in view.entries] == [True, True, True]


def test_the_app_upgrades_a_v1_store_on_open_in_one_transaction_with_progress(tmp_path):
    db = _v1_store(tmp_path, entries=50)
    assert _rule_holds(db) == (True, False)
    seen: list[tuple[int, int]] = []
    store = SqliteStorage(db, on_upgrade=lambda done, total: seen.append((done, total)))
    try:
        assert store.upgraded_from == 1
        assert [e["message"]["content"] for e in run(store.list_history("c1"))] == [f"e{i}" for i in range(50)]
        assert run(store.get_session("s1")).session_id == "s1"
        assert [s.span_id for s in run(store.list_spans("t1"))] == ["sp1"]
    finally:
        run(store.close())
    assert seen and seen[-1] == (55, 55) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert _version(db) == SCHEMA_VERSION and _rule_holds(db) == (False, True)
    assert check(db).findings == []
    again = SqliteStorage(db)
    assert again.upgraded_from is None
    run(again.close())


def test_a_row_damaged_before_the_upgrade_is_still_damaged_after_it(tmp_path):
    db = _v1_store(tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE history SET data = replace(data, 'e1', 'E1') WHERE seq = 2")  # crc left as it was
    conn.commit()
    conn.close()
    assert [f.code for f in check(db).findings] == ["schema-too-old", "row-checksum-mismatch"]
    store = SqliteStorage(db)
    try:
        with pytest.raises(DataIntegrityError) as caught:
            run(store.list_history("c1"))
        assert caught.value.seq == 2
        assert len(run(store.list_history("c1", after_seq=2))) == 1
    finally:
        run(store.close())
    assert [f.code for f in check(db).findings] == ["row-checksum-mismatch"]


def test_downgrade_triage_still_works_on_a_v1_store(tmp_path):
    work = tmp_path / "d"
    shutil.copytree(FIXTURES / "downgrade-v3", work)
    db = work / "sessions.db"
    to_schema_v1(db)
    report = check(db)
    assert {f.code for f in report.findings} == {"schema-too-old", "record-newer-version"}
    assert [d.record_id for d in report.downgrades] == ["chat-beta"]
    store = SqliteStorage(db)  # upgrades the schema; the newer entry is still refused, untouched
    try:
        with pytest.raises(RecordFormatError, match="newer build"):
            run(store.list_history("chat-beta"))
    finally:
        run(store.close())
    assert {f.code for f in check(db).findings} == {"record-newer-version"}


CHILD = textwrap.dedent("""
    import sys
    from steerable_agent_runtime import SqliteStorage
    def progress(done, total):
        print(done, total, flush=True)
    SqliteStorage(sys.argv[1], on_upgrade=progress).close_sync()
    print("closed", flush=True)
""")


def test_a_kill_during_the_upgrade_leaves_version_1_or_version_2_whole(tmp_path):
    base = _v1_store(tmp_path, entries=60_000)
    outcomes = set()
    rng = random.Random(7)
    for round_ in range(6):
        work = tmp_path / f"r{round_}"
        work.mkdir()
        db = work / "s.db"
        shutil.copyfile(base, db)
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        lines = 0 if round_ == 0 else rng.randint(1, 3)
        for _ in range(lines):
            if not child.stdout.readline():
                break
        time.sleep(rng.uniform(0, 0.05))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        for leftover in work.glob("s.lock"):
            leftover.unlink()  # a lease file of a dead holder; the next open would take it over anyway
        version = _version(db)
        legacy, keyed = _rule_holds(db)
        assert (version, legacy, keyed) in {(1, True, False), (SCHEMA_VERSION, False, True)}
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        outcomes.add(version)
        store = SqliteStorage(db)  # whatever the kill left, the next open finishes the job
        assert len(run(store.list_history("c1"))) == 60_000
        run(store.close())
        assert _version(db) == SCHEMA_VERSION and _rule_holds(db) == (False, True)
    assert 1 in outcomes  # at least one kill landed inside the upgrade's transaction
