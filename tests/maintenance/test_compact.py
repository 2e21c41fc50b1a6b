"""compact: prunes old traces with their spans/events in bounded batches, touches nothing else."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.errors import SchemaTooNewError
from steerable_agent_runtime.maintenance.compact import compact
from steerable_maint.cli import main
from tests.maintenance.storemaker import NEW, NOW, OLD, ChatSpec, file_bytes, integrity, make_store, rows_of

KEPT_TABLES = ("sessions", "messages", "history")
TRACE_TABLES = ("traces", "spans", "events")


@pytest.fixture
def store(tmp_path):
    """10 chats: even ones with old traces (200 days), odd ones with recent traces (1 day)."""
    chats = [ChatSpec(i, age=OLD, trace_age=OLD if i % 2 == 0 else NEW, traces=2, spans=3) for i in range(10)]
    return make_store(tmp_path / "sessions.db", chats)


def _trace_rows_of_chat(rows, chat_index):
    return {k: v for k, v in rows.items() if k[0] in TRACE_TABLES and k[1][0].split("-")[1] == str(chat_index)}


def test_compact_prunes_old_traces_with_spans_and_events_and_keeps_recent_ones(store):
    before = rows_of(store)
    report = compact(store, older_than=timedelta(days=30), now=NOW)
    after = rows_of(store)
    assert len(_trace_rows_of_chat(before, 2)) == 2 + 6 + 6
    assert (report.traces, report.spans, report.events) == (10, 30, 30)
    for i in range(10):
        expected = {} if i % 2 == 0 else _trace_rows_of_chat(before, i)
        assert _trace_rows_of_chat(after, i) == expected
    assert integrity(store) == "ok"


def test_compact_leaves_sessions_messages_and_history_byte_identical(store):
    before = rows_of(store, KEPT_TABLES)
    compact(store, older_than=timedelta(days=30), now=NOW)
    assert rows_of(store, KEPT_TABLES) == before
    conn = sqlite3.connect(store)
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'widget3'").fetchone()[0] == 3


def test_compact_works_in_bounded_batches(store):
    report = compact(store, older_than=timedelta(days=30), now=NOW, batch_size=3)
    assert report.traces == 10 and report.batches == 4  # ceil(10 / 3): never more than 3 traces per batch
    again = compact(store, older_than=timedelta(days=30), now=NOW, batch_size=3)
    assert (again.traces, again.batches) == (0, 0)


def test_compact_dry_run_reports_the_same_counts_and_changes_no_byte(store):
    before = file_bytes(store)
    dry = compact(store, older_than=timedelta(days=30), now=NOW, batch_size=3, dry_run=True)
    assert file_bytes(store) == before
    assert not (store.parent / "sessions.db-shm").exists()
    real = compact(store, older_than=timedelta(days=30), now=NOW, batch_size=3)
    assert dry.dry_run and not real.dry_run
    assert (dry.traces, dry.spans, dry.events, dry.batches) == (real.traces, real.spans, real.events, real.batches)


def test_compact_vacuum_gives_bytes_back_and_no_vacuum_keeps_the_file_size(tmp_path):
    chats = [ChatSpec(i, messages=1, entries=1, traces=6, spans=6, trace_age=OLD) for i in range(12)]
    kept = make_store(tmp_path / "a.db", chats)
    plain = make_store(tmp_path / "b.db", chats)
    vacuumed = compact(kept, older_than=timedelta(days=30), now=NOW)
    skipped = compact(plain, older_than=timedelta(days=30), now=NOW, vacuum=False)
    assert vacuumed.vacuumed and vacuumed.bytes_after < vacuumed.bytes_before // 2
    assert not skipped.vacuumed and skipped.bytes_after >= skipped.bytes_before
    assert rows_of(kept) == rows_of(plain)


def test_compact_refuses_a_newer_schema_and_leaves_the_file_untouched(store):
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = file_bytes(store)
    with pytest.raises(SchemaTooNewError) as info:
        compact(store, older_than=timedelta(days=30), now=NOW)
    assert info.value.exit_code == 3
    assert file_bytes(store) == before


# CLI: human output and its --json twin --------------------------------------------------

def test_cli_compact_human_output_names_the_counts(store):
    result = CliRunner().invoke(main, ["compact", str(store), "--traces-older-than", "30d"])
    assert result.exit_code == 0, result.output
    assert "pruned" in result.stdout and "traces" in result.stdout and "VACUUM done" in result.stdout
    assert result.stderr == ""


def test_cli_compact_json_prints_exactly_the_report(store):
    result = CliRunner().invoke(main, ["compact", str(store), "--traces-older-than", "30d", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["job"], report["traces"], report["spans"], report["events"]) == ("compact", 10, 30, 30)
    assert report["vacuumed"] is True and report["bytes_after"] < report["bytes_before"]


def test_cli_compact_dry_run_human_says_nothing_changed(store):
    before = file_bytes(store)
    result = CliRunner().invoke(main, ["compact", str(store), "--traces-older-than", "30d", "--dry-run"])
    assert result.exit_code == 0 and "dry run: nothing changed" in result.stdout
    assert file_bytes(store) == before


def test_cli_compact_dry_run_json_has_counts_and_changes_nothing(store):
    before = file_bytes(store)
    result = CliRunner().invoke(main, ["compact", str(store), "--traces-older-than", "30d", "--dry-run",
                                       "--no-vacuum", "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["dry_run"] is True and report["traces"] == 10
    assert file_bytes(store) == before


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_compact_bad_duration_is_a_usage_error_and_changes_nothing(store, as_json):
    before = file_bytes(store)
    args = ["compact", str(store), "--traces-older-than", "30 days"] + (["--json"] if as_json else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["Error", "Hint"]
    assert "30d" in lines[1] and "Traceback" not in result.output and result.stdout == ""
    assert file_bytes(store) == before


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_compact_newer_schema_exits_3_with_error_and_hint(store, as_json):
    conn = sqlite3.connect(store)
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    before = file_bytes(store)
    result = CliRunner().invoke(main, ["compact", str(store), "--traces-older-than", "30d"]
                                + (["--json"] if as_json else []))
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and "newer build" in lines[0]
    assert lines[1].startswith("Hint: ") and "Traceback" not in result.output
    assert file_bytes(store) == before


def test_compact_reports_progress_after_every_batch(store):
    calls = []
    compact(store, older_than=timedelta(days=30), now=NOW, batch_size=4,
            progress=lambda phase, done, total: calls.append((phase, done, total)))
    assert calls == [("prune traces", 0, 10), ("prune traces", 4, 10), ("prune traces", 8, 10), ("prune traces", 10, 10)]


def test_compact_runs_as_python_dash_m(store):
    import subprocess
    import sys

    from tests.maintenance.crashkit import REPO

    done = subprocess.run([sys.executable, "-m", "steerable_agent_runtime.maintenance", "compact", str(store),
                           "--traces-older-than", "30d", "--json"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["traces"] == 10
