"""steerable-maint check: a fixture and a test per finding, human view and --json twin, quick mode."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st
from click.testing import CliRunner

from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.codes import CODES
from steerable_agent_runtime.maintenance.check.records import USER_MESSAGE
from steerable_maint.cli import main

from .conftest import CASES, FIXTURES, expected, snapshot


def run(*args: object):
    return CliRunner().invoke(main, ["check", *map(str, args)])


@pytest.mark.parametrize("case", CASES)
def test_check_human_view_names_every_code_and_exits_per_design(case):
    result = run(FIXTURES / case / "sessions.db")
    want = expected(case)
    assert result.exit_code == want["exit_code"], result.output
    for code in want["counts"]:
        assert code in result.stdout
    assert ("no errors" in result.stdout) == (want["exit_code"] == 0)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("case", CASES)
def test_check_json_twin_prints_exactly_the_report(case):
    result = run(FIXTURES / case / "sessions.db", "--json")
    want = expected(case)
    assert result.exit_code == want["exit_code"]
    report = json.loads(result.stdout)
    assert report["counts"] == want["counts"] and report["rows"] == want["rows"]
    assert report == json.loads(check(FIXTURES / case / "sessions.db").model_dump_json())
    assert result.stderr == ""


def test_every_finding_code_is_documented_with_a_severity_and_a_hint():
    for code, spec in CODES.items():
        assert spec.severity in ("error", "warning", "info") and spec.hint and spec.meaning, code


def test_every_command_a_hint_names_exists_with_the_options_it_names():
    import re

    named = [(code, *found) for code, spec in CODES.items()
             for found in re.findall(r"`steerable-maint (\w+)([^`]*)`", spec.hint)]
    assert {"salvage", "check", "compact", "history"} <= {command for _, command, _ in named}
    for code, command, rest in named:
        assert command in main.commands, (code, command)
        options = {o for p in main.commands[command].params for o in getattr(p, "opts", [])}
        assert set(re.findall(r"--[\w-]+", rest)) <= options, (code, rest)


def test_downgrade_finding_names_chat_version_intactness_and_what_to_tell_the_user():
    report = check(FIXTURES / "downgrade-v3" / "sessions.db")
    (finding,) = [f for f in report.findings if f.code == "record-newer-version"]
    assert finding.record_id == "chat-beta" and finding.seq == 3 and finding.severity == "error"
    assert "v3" in finding.message and "intact" in finding.message and "u-bo" in finding.message
    assert USER_MESSAGE in finding.hint and "upgrade the app" in finding.hint
    (triage,) = report.downgrades
    assert (triage.record_id, triage.versions, triage.entries, triage.first_seq) == ("chat-beta", [3], 1, 3)
    assert triage.intact and triage.user_ids == ["u-bo"] and triage.tell_the_user == USER_MESSAGE


def test_downgrade_human_view_says_what_to_tell_the_user():
    result = run(FIXTURES / "downgrade-v3" / "sessions.db")
    assert result.exit_code == 1
    assert "Tell the user" in result.stdout and "chat-beta" in result.stdout


def _many_problems(tmp_path, flips: int) -> "os.PathLike[str]":
    """A store with ``flips`` checksum-mismatched entries, a seq gap and an orphan message."""
    db = tmp_path / "many.db"

    async def write() -> None:
        store = SqliteStorage(db)
        await store.append_history("chat-x", [{"type": "item", "at": "2026-01-01T00:00:00Z",
                                               "message": {"role": "user", "content": f"n{i}"}} for i in range(60)])
        await store.close()

    asyncio.run(write())
    conn = sqlite3.connect(db)
    conn.execute("UPDATE history SET crc = crc + 1 WHERE seq <= ?", (flips,))
    conn.execute("DELETE FROM history WHERE seq = 50")
    conn.execute("INSERT INTO messages (id, chat_id, created_at, data, crc) VALUES ('m1', 'nochat', 'x', ?, ?)",
                 ('{"id":"m1","chatId":"nochat","role":"user","content":"hi","createdAt":"x"}',
                  row_crc("messages", ("m1",), '{"id":"m1","chatId":"nochat","role":"user","content":"hi","createdAt":"x"}')))
    conn.commit()
    conn.close()
    return db


def test_check_counts_everything_lists_first_n_per_code_and_never_stops_at_the_first(tmp_path):
    db = _many_problems(tmp_path, flips=35)
    report = check(db, max_per_code=5)
    assert report.counts == {"orphan-message": 1, "record-seq-gap": 1, "row-checksum-mismatch": 35}
    listed = [f for f in report.findings if f.code == "row-checksum-mismatch"]
    assert [f.seq for f in listed] == [1, 2, 3, 4, 5]
    assert report.rows["history"] == 59
    assert len(check(db).findings) == 20 + 1 + 1  # default max_per_code 20


def test_check_json_limits_listed_findings_but_not_counts(tmp_path):
    result = run(_many_problems(tmp_path, flips=12), "--json", "--max-per-code", "3")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["counts"]["row-checksum-mismatch"] == 12
    assert sum(f["code"] == "row-checksum-mismatch" for f in report["findings"]) == 3


def test_wal_past_threshold_is_a_warning(fixture_copy):
    db = fixture_copy("wal-pending")
    report = check(db, wal_threshold_bytes=1000)
    assert report.counts == {"wal-large": 1} and report.wal_bytes == os.stat(f"{db}-wal").st_size
    assert report.exit_code == 0
    assert check(db).counts == {}


def test_wal_threshold_human_and_json_twins(fixture_copy):
    db = fixture_copy("wal-pending")
    human = run(db, "--wal-threshold", "1000")
    assert human.exit_code == 0 and "wal-large" in human.stdout
    machine = run(db, "--wal-threshold", "1000", "--json")
    assert machine.exit_code == 0 and json.loads(machine.stdout)["counts"] == {"wal-large": 1}


def test_lease_holder_is_named_without_making_the_owner_fail(tmp_path, live_writer):
    db = tmp_path / "live.db"
    writer = live_writer(db)
    total = writer.write(5)
    report = check(db)
    assert report.lease_held and report.lease_holder_pid == writer.proc.pid
    (finding,) = [f for f in report.findings if f.code == "lease-held"]
    assert str(writer.proc.pid) in finding.message and finding.severity == "info"
    assert report.exit_code == 0 and report.rows["history"] == total
    assert writer.write(1) == total + 1
    machine = run(db, "--json")
    assert json.loads(machine.stdout)["lease_holder_pid"] == writer.proc.pid
    writer.close()
    assert not check(db).lease_held


@pytest.mark.parametrize("case,codes", [
    ("downgrade-v3", {"record-newer-version": 1}),
    ("seq-gap", {"record-seq-gap": 1}),
    ("seq-duplicate", {"record-seq-duplicate": 1}),
    ("unknown-type", {"record-unknown-type": 1}),
    ("orphans", {"orphan-event": 1, "orphan-message": 1, "orphan-span": 1, "orphan-trace": 1}),
    ("schema-too-new", {"schema-too-new": 1}),
    ("legacy-v1", {"record-legacy-version": 1}),
])
def test_quick_check_still_finds_what_columns_and_indexes_show(case, codes):
    report = check(FIXTURES / case / "sessions.db", quick=True)
    assert report.quick and report.counts == codes
    assert report.rows == expected(case)["rows"]


def test_quick_check_does_not_read_row_bytes(fixture_copy):
    """Documented trade-off: quick skips per-row checksum and JSON validation."""
    db = fixture_copy("checksum-mismatch")
    assert check(db, quick=True).counts == {}
    assert check(db).counts == {"row-checksum-mismatch": 1}


def test_quick_human_and_json_twins():
    db = FIXTURES / "seq-gap" / "sessions.db"
    human = run(db, "--quick")
    assert human.exit_code == 1 and "quick check" in human.stdout and "record-seq-gap" in human.stdout
    machine = run(db, "--quick", "--json")
    assert machine.exit_code == 1 and json.loads(machine.stdout)["quick"] is True


def test_unreadable_table_is_a_finding_and_the_other_tables_are_still_checked(fixture_copy):
    db = fixture_copy("healthy")
    conn = sqlite3.connect(db)
    root, page = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'history'").fetchone()[0], \
        conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    raw = bytearray(db.read_bytes())
    raw[(root - 1) * page:(root - 1) * page + 8] = b"\x0d\xff\xff\xff\xff\xff\xff\xff"  # garbage page header
    db.write_bytes(bytes(raw))
    before = snapshot(db.parent)
    report = check(db)
    assert report.counts.get("sqlite-integrity", 0) >= 1 and report.exit_code == 1
    assert report.rows["sessions"] == 2 and report.rows["messages"] == 5
    assert snapshot(db.parent) == before


def test_progress_reports_each_phase():
    calls: list[tuple[str, int, int | None]] = []
    check(FIXTURES / "healthy" / "sessions.db", progress=lambda *a: calls.append(a))
    assert {c[0] for c in calls} == {"integrity_check", "rows"}
    assert ("rows", 18, 18) == calls[-2] or ("rows", 18, 18) in calls  # 18 rows in the healthy fixture


def test_damaged_utf8_in_a_key_column_is_a_finding_and_the_scan_goes_on(fixture_copy):
    db = fixture_copy("healthy")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE messages SET chat_id = CAST(x'636861742dff' AS TEXT) WHERE id = 'm-alpha-2'")
    conn.execute("UPDATE history SET at = CAST(x'32303236ff' AS TEXT) WHERE record_id = 'chat-beta' AND seq = 1")
    conn.commit()
    conn.close()
    report = check(db)
    assert report.counts == {"orphan-message": 1, "row-column-mismatch": 2}
    assert report.rows == expected("healthy")["rows"]
    assert {f.key or f.record_id for f in report.findings if f.code == "row-column-mismatch"} == {"m-alpha-2",
                                                                                                  "chat-beta"}
    assert "\ufffd" in next(f.message for f in report.findings if f.code == "orphan-message")
    machine = run(db, "--json")
    assert machine.exit_code == 1 and json.loads(machine.stdout)["counts"]["row-column-mismatch"] == 2


def test_finding_log_merge_adds_counts_and_lists_at_most_n_per_code():
    from steerable_agent_runtime.maintenance.codes import FindingLog

    a, b = FindingLog(3), FindingLog(3)
    for i in range(2):
        a.add("orphan-span", f"a{i}")
    for i in range(4):
        b.add("orphan-span", f"b{i}")
    b.add("wal-large", "big")
    a.merge(b)
    assert a.counts == {"orphan-span": 6, "wal-large": 1}
    assert [f.message for f in a.findings] == ["a0", "a1", "b0", "big"]


@pytest.mark.parametrize("entry", [["-m", "steerable_agent_runtime.maintenance"], ["-m", "steerable_maint"]])
def test_readme_first_command_runs_in_a_real_process(entry):
    import subprocess
    import sys

    db = FIXTURES / "healthy" / "sessions.db"
    before = snapshot(db.parent)
    human = subprocess.run([sys.executable, *entry, "check", str(db)], capture_output=True, text=True, timeout=60)
    assert human.returncode == 0 and "no errors" in human.stdout and human.stderr == ""
    machine = subprocess.run([sys.executable, *entry, "check", str(db), "--json"], capture_output=True, text=True,
                             timeout=60)
    assert machine.returncode == 0 and json.loads(machine.stdout)["counts"] == {}
    bad = subprocess.run([sys.executable, *entry, "check", str(db.parent)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 3 and [line.split(":")[0] for line in bad.stderr.splitlines()] == ["Error", "Hint"]
    assert snapshot(db.parent) == before


@pytest.mark.parametrize("quick", [True, False])
def test_a_v_column_holding_text_or_bytes_is_damage_not_a_newer_version(fixture_copy, quick):
    # SQLite orders text and blobs above every number: quick check counted them as newer
    # versions, then crashed sorting them against ints (exit 4), found by the damage property test.
    db = fixture_copy("healthy")
    conn = sqlite3.connect(db)
    first, second = [r[0] for r in conn.execute("SELECT rowid FROM history ORDER BY rowid LIMIT 2")]
    conn.execute("UPDATE history SET v = X'01' WHERE rowid = ?", (first,))
    conn.execute("UPDATE history SET v = 'x' WHERE rowid = ?", (second,))
    conn.commit()
    conn.close()
    report = check(db, quick=quick)
    assert [f.code for f in report.findings] == ["row-column-mismatch", "row-column-mismatch"]
    assert report.downgrades == [] and report.exit_code == 1
    result = CliRunner().invoke(main, ["check", *(["--quick"] if quick else []), str(db)])
    assert result.exit_code == 1 and "Traceback" not in result.output


_COLUMN_VALUES = st.one_of(st.none(), st.integers(-3, 4), st.sampled_from([2.0, 2.5, "2", "item", "seed", "x", b"item"]),
                           st.sampled_from(["item", "seed", "compaction_boundary", "Item", "item "]))


@given(st.lists(st.tuples(_COLUMN_VALUES, _COLUMN_VALUES), max_size=25))
def test_quick_modes_unusual_row_count_is_the_plain_predicate(rows):
    """Quick mode counts the rows that are not a current-version entry of a known type with a
    CASE (fewer instructions per row); it counts exactly the rows the plain predicate
    ``(v = ? AND type IN (...)) IS NOT 1`` counts, NULLs, reals, text and blobs included."""
    from steerable_agent_runtime.history import ENTRY_TYPES, RECORD_FORMAT_VERSION
    from steerable_agent_runtime.maintenance.check.records import _UNUSUAL_SQL
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE history (v INTEGER, type TEXT)")
    conn.executemany("INSERT INTO history VALUES (?, ?)", rows)
    params = (RECORD_FORMAT_VERSION, *ENTRY_TYPES)
    plain = conn.execute("SELECT count(*) FROM history WHERE (v = ? AND type IN (?, ?, ?)) IS NOT 1",
                         params).fetchone()[0]
    assert conn.execute(_UNUSUAL_SQL, params).fetchone()[0] == plain
