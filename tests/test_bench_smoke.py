"""Smoke tests of the benchmark harness (bench/): it runs, prints the table's rows with
numeric ratios, refuses to invent numbers, and the store generator is deterministic.

No timing is asserted anywhere: the figures are reports, not pass/fail gates.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import make_store  # noqa: E402


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), "--small", "--work", str(tmp_path / "work"),
                           "--out", str(out), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done, json.loads(out.read_text())


def test_append_and_resume_print_their_rows_with_numeric_ratios(tmp_path: Path) -> None:
    done, results = _run(tmp_path, "--only", "append,resume", "--resume-prefix", "2000", "--reps", "2")
    rows = {row["figure"]: row for row in results["rows"]}
    assert list(rows) == ["append entries/s, batches of 1", "append entries/s, batches of 50",
                          "resume: 2,000-entry prefix vs 100-entry record"]
    for figure, row in rows.items():
        assert isinstance(row["ratio"], float) and row["ratio"] > 0, row
        assert row["met"] in ("yes", "MISSED", "n/a"), row
        assert figure in done.stdout
    assert rows["append entries/s, batches of 50"]["met"] in ("yes", "MISSED")
    assert len(rows["append entries/s, batches of 50"]["raw"]["ours_s"]) == 2
    header = done.stdout.splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")] == ["figure", "ours", "baseline", "ratio", "target", "met"]
    assert results["machine"]["sqlite"] == sqlite3.sqlite_version


def test_a_figure_without_its_baseline_says_why_instead_of_a_number(tmp_path: Path) -> None:
    done, results = _run(tmp_path, "--only", "salvage", "--recover-shell", str(tmp_path / "no-such-shell"))
    (row,) = results["rows"]
    assert row["met"].startswith("not available: ")
    assert row["ratio"] is None and row["ours"] == "" and row["baseline"] == ""
    assert "not available" in done.stdout


def test_an_unknown_figure_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH / "run.py"), "--only", "appendd"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown figure" in done.stderr


def _logical(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    try:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                for table in ("sessions", "messages", "traces", "spans", "events", "history")}
    finally:
        conn.close()


def test_make_store_is_deterministic_and_has_work_for_archive_and_compact(tmp_path: Path) -> None:
    first = make_store.make_store(tmp_path / "a.db", chats=4, entries=230, seed=7)
    second = make_store.make_store(tmp_path / "b.db", chats=4, entries=230, seed=7)
    assert _logical(tmp_path / "a.db") == _logical(tmp_path / "b.db")
    assert first.queries == second.queries and len(first.queries) == 100
    assert first.history_rows == 4 * 230 and first.old_chats == 2 and first.old_traces == first.traces // 2
    conn = sqlite3.connect(tmp_path / "a.db")
    try:
        types = dict(conn.execute("SELECT type, count(*) FROM history GROUP BY type").fetchall())
        assert types.get("compaction_boundary", 0) >= 4  # one per ~200 entries in every chat
        roles = {r[0] for r in conn.execute("SELECT json_extract(data, '$.message.role') FROM history")}
        assert {"user", "assistant", "tool"} <= roles
        sizes = conn.execute("SELECT min(length(json_extract(data, '$.content'))),"
                             " max(length(json_extract(data, '$.content'))) FROM messages").fetchone()
        assert sizes[0] >= 20 and sizes[1] <= 2001
        active = conn.execute("SELECT count(*) FROM sessions WHERE is_active = 1 AND updated_at >= ?",
                              (first.cutoff,)).fetchone()[0]
        old_idle = conn.execute("SELECT count(DISTINCT chat_id) FROM sessions GROUP BY chat_id"
                                " HAVING max(is_active) = 0 AND max(updated_at) < ?", (first.cutoff,)).fetchall()
        assert active == 2 and len(old_idle) == 2
    finally:
        conn.close()
    with pytest.raises(FileExistsError):
        make_store.make_store(tmp_path / "a.db", chats=1, entries=1)
