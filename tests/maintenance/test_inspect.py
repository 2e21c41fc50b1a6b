"""steerable-maint inspect: the overview, human view and --json twin."""

from __future__ import annotations

import json

from click.testing import CliRunner

from steerable_agent_runtime.maintenance import inspect_store
from steerable_maint.cli import main

from .conftest import FIXTURES, expected, snapshot


def run(*args: object):
    return CliRunner().invoke(main, ["inspect", *map(str, args)])


def test_inspect_json_reports_sizes_pages_versions_rows_and_newest_write():
    db = FIXTURES / "mixed-v1-v2" / "sessions.db"
    result = run(db, "--json")
    assert result.exit_code == 0 and result.stderr == ""
    r = json.loads(result.stdout)
    assert r["db_bytes"] == db.stat().st_size and r["wal_bytes"] is None and r["shm_bytes"] is None
    assert r["page_size"] == 512 and r["page_count"] * 512 == db.stat().st_size
    assert r["freelist_count"] == 0 and r["journal_mode"] == "wal"
    assert r["schema_version"] == 2 and r["application_id"] == 0x53544552
    assert r["rows"] == expected("mixed-v1-v2")["rows"]
    assert r["record_versions"] == {"1": 2, "2": 9} and r["records"] == 3
    assert r["newest_write"] == "2026-01-01T00:53:00.000000Z" and r["newest_write_table"] == "history"
    assert r["lease_held"] is False and r["access"] == "immutable"


def test_inspect_human_view_shows_the_same_facts():
    result = run(FIXTURES / "mixed-v1-v2" / "sessions.db")
    assert result.exit_code == 0
    for fact in ("x 512 B", "v1: 2", "v2: 9", "3 records", "0x53544552", "2026-01-01T00:53:00", "free"):
        assert fact in result.stdout, fact


def test_inspect_sees_the_wal_of_uncheckpointed_commits():
    db = FIXTURES / "wal-pending" / "sessions.db"
    before = snapshot(db.parent)
    report = inspect_store(db)
    assert report.wal_bytes == (db.parent / "sessions.db-wal").stat().st_size > 0
    assert report.rows["sessions"] == 3 and report.newest_write == "2026-01-01T01:01:00.000000Z"
    assert snapshot(db.parent) == before


def test_inspect_names_the_lease_holder_of_a_live_store(tmp_path, live_writer):
    writer = live_writer(tmp_path / "live.db")
    writer.write(3)
    report = inspect_store(tmp_path / "live.db")
    assert report.lease_held and report.lease_holder_pid == writer.proc.pid
    assert report.wal_bytes > 0 and report.shm_bytes > 0 and report.access == "shared"
    human = run(tmp_path / "live.db")
    assert f"held by pid {writer.proc.pid}" in human.stdout
    machine = run(tmp_path / "live.db", "--json")
    assert json.loads(machine.stdout)["lease_holder_pid"] == writer.proc.pid


def test_inspect_of_a_newer_schema_shows_the_file_and_says_why_rows_are_left_out():
    db = FIXTURES / "schema-too-new" / "sessions.db"
    machine = run(db, "--json")
    r = json.loads(machine.stdout)
    assert machine.exit_code == 0 and r["schema_version"] == 3 and r["rows"] == {}
    assert [f["code"] for f in r["findings"]] == ["schema-too-new"]
    human = run(db)
    assert human.exit_code == 0 and "schema-too-new" in human.stdout and "v3 (this build reads up to v2)" in human.stdout
