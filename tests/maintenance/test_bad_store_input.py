"""Bad stores and destinations for archive, copy, restore, compact and inspect, through the
installed script: the store itself under another name as a destination (a hard link or a symlink)
is exit 2 before anything is opened; a non-text value in a timestamp column, or a store SQLite's
integrity_check finds damaged given to compact or archive, is exit 3, not a crash or a half-done
move. Each is one Error line and one Hint line, and the store is unchanged."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "healthy" / "sessions.db"
MAINT = str(Path(sys.executable).with_name("steerable-maint"))


def listing(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def refused(argv: list[str], code: int) -> tuple[str, str]:
    """Run the installed script; assert exit ``code`` with exactly one Error and one Hint line."""
    done = subprocess.run([MAINT, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines] == ["Error", "Hint"], done.stderr
    return lines[0], lines[1]


@pytest.mark.parametrize("link", ["hard", "symlink"])
@pytest.mark.parametrize("command", [["archive", "--older-than", "1d"], ["copy"]])
def test_the_store_under_another_name_is_refused_as_destination(tmp_path, link, command):
    db = tmp_path / "sessions.db"
    shutil.copy(FIXTURE, db)
    twin = tmp_path / "twin.db"
    (os.link if link == "hard" else os.symlink)(db, twin)
    before = listing(tmp_path)
    error, _hint = refused([command[0], str(db), "--to", str(twin), *command[1:]], 2)
    assert "same store" in error
    assert listing(tmp_path) == before


@pytest.mark.parametrize("table,column", [("sessions", "updated_at"), ("messages", "created_at"), ("history", "at")])
@pytest.mark.parametrize("command", [["inspect"], ["archive", "--to", "{dir}/a.db", "--older-than", "1d"]])
def test_a_non_text_timestamp_is_exit_3_with_one_line_not_a_crash(tmp_path, table, column, command):
    db = tmp_path / "sessions.db"
    shutil.copy(FIXTURE, db)
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE {table} SET {column} = X'00ff' WHERE rowid = (SELECT min(rowid) FROM {table})")
    conn.commit()
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    error, _hint = refused([command[0], str(db), *(a.format(dir=tmp_path) for a in command[1:])], 3)
    assert "not text" in error or "not a text" in error
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


DAMAGED = FIXTURE.parents[1] / "integrity-error" / "sessions.db"


@pytest.mark.parametrize("command", [["compact", "--traces-older-than", "1d"],
                                     ["compact", "--traces-older-than", "1d", "--dry-run"],
                                     ["archive", "--to", "{dir}/a.db", "--older-than", "1d", "--include-active"],
                                     ["archive", "--to", "{dir}/a.db", "--older-than", "1d"]])
def test_a_damaged_store_is_refused_by_the_rewriting_jobs_before_any_change(tmp_path, command):
    db = tmp_path / "sessions.db"
    shutil.copy(DAMAGED, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    error, hint = refused([command[0], str(db), *(a.format(dir=tmp_path) for a in command[1:])], 3)
    assert "integrity_check reports damage" in error and "repair" in hint
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not (tmp_path / "a.db").exists()  # nothing copied: no row can end up in both files
