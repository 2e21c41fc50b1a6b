"""steerable-maint history: entries with versions, the resume transcript, unreadable entries named."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from steerable_agent_runtime import RecordFormatError, SqliteStorage, resume_transcript
from steerable_agent_runtime.maintenance.history import history
from steerable_maint.cli import main

from .conftest import FIXTURES, snapshot


def run(*args: object):
    return CliRunner().invoke(main, ["history", *map(str, args)])


def test_history_json_lists_every_entry_with_its_stored_version():
    result = run(FIXTURES / "mixed-v1-v2" / "sessions.db", "chat-mixed", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    r = json.loads(result.stdout)
    assert [(e["seq"], e["v"], e["readable"]) for e in r["entries"]] == [(1, 1, True), (2, 1, True),
                                                                         (3, 2, True), (4, 2, True)]
    assert "v" not in r["entries"][0]["entry"]  # shown as stored, not upgraded
    assert r["unreadable"] == [] and r["findings"] == []


def test_history_human_view_shows_versions_and_content():
    result = run(FIXTURES / "mixed-v1-v2" / "sessions.db", "chat-mixed")
    assert result.exit_code == 0
    assert "record chat-mixed: 4 entries" in result.stdout and "user: v1 from last year" in result.stdout


def test_history_shows_what_it_can_of_a_newer_entry_and_names_it():
    db = FIXTURES / "downgrade-v3" / "sessions.db"
    report = history(db, "chat-beta")
    assert report.exit_code == 1 and report.unreadable == [3]
    newer = report.entries[2]
    assert (newer.seq, newer.v, newer.readable) == (3, 3, False)
    assert "v3" in newer.problem and "not modified" in newer.problem
    assert newer.entry["message"]["content"] == "written by a newer app"
    assert all(e.readable for e in report.entries[:2])
    (finding,) = report.findings
    assert (finding.code, finding.seq, finding.record_id) == ("record-unreadable-entry", 3, "chat-beta")


def test_history_downgrade_human_and_json_twins():
    db = FIXTURES / "downgrade-v3" / "sessions.db"
    human = run(db, "chat-beta")
    assert human.exit_code == 1 and "NO" in human.stdout and "seq 3" in human.stdout
    machine = run(db, "chat-beta", "--json")
    assert machine.exit_code == 1 and json.loads(machine.stdout)["unreadable"] == [3]


def test_runtime_read_path_still_fails_closed_on_the_same_record(fixture_copy):
    db = fixture_copy("downgrade-v3")

    async def read() -> None:
        store = SqliteStorage(db)
        try:
            await store.list_history("chat-beta")
        finally:
            await store.close()

    with pytest.raises(RecordFormatError, match="v3"):
        asyncio.run(read())


def test_history_names_a_checksum_failure_without_showing_its_bytes():
    report = history(FIXTURES / "checksum-mismatch" / "sessions.db", "chat-alpha")
    bad = [e for e in report.entries if not e.readable]
    assert [e.seq for e in bad] == [3] and bad[0].entry is None and "CRC-32" in bad[0].problem
    assert len(report.entries) == 5


def _runtime_resume(db) -> list[dict]:
    async def read() -> list[dict]:
        store = SqliteStorage(db)
        try:
            return [m.to_wire() for m in await resume_transcript(store, "chat-alpha")]
        finally:
            await store.close()

    return asyncio.run(read())


def test_resume_transcript_is_what_the_runtime_resumes_from(fixture_copy):
    db = FIXTURES / "healthy" / "sessions.db"
    report = history(db, "chat-alpha", resume=True)
    assert report.checkpoint_seq == 4 and [e.seq for e in report.entries] == [4, 5]
    assert report.transcript == _runtime_resume(fixture_copy("healthy"))
    assert report.transcript == [{"role": "system", "content": "Summary: invoice total 42 euros."},
                                 {"role": "user", "content": "thanks, send the invoice"}]
    assert report.resume_blocked_at is None and report.exit_code == 0


def test_resume_human_and_json_twins():
    db = FIXTURES / "healthy" / "sessions.db"
    human = run(db, "chat-alpha", "--resume")
    assert human.exit_code == 0 and "resume transcript (2 messages)" in human.stdout
    assert "system: Summary: invoice total 42 euros." in human.stdout
    machine = run(db, "chat-alpha", "--resume", "--json")
    assert machine.exit_code == 0 and json.loads(machine.stdout)["checkpoint_seq"] == 4


def test_resume_stops_at_an_entry_the_app_cannot_read():
    report = history(FIXTURES / "downgrade-v3" / "sessions.db", "chat-beta", resume=True)
    assert report.resume_blocked_at == 3 and report.exit_code == 1
    assert [m["content"] for m in report.transcript] == ["what is the weather in Lisbon", "sunny weather, 24 degrees"]
    human = run(FIXTURES / "downgrade-v3" / "sessions.db", "chat-beta", "--resume")
    assert "resume stops at seq 3" in human.stdout


def test_unknown_chat_is_a_usage_error_with_a_hint():
    db = FIXTURES / "healthy" / "sessions.db"
    before = snapshot(db.parent)
    result = run(db, "chat-typo")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert snapshot(db.parent) == before


def test_history_of_a_newer_schema_cannot_run():
    result = run(FIXTURES / "schema-too-new" / "sessions.db", "chat-alpha")
    assert result.exit_code == 3 and "newer build" in result.stderr
