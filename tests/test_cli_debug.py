"""STEERABLE_DEBUG=1 prints an expected failure's exception chain (the cause kept by
``raise ... from``) to stderr; without it the same failure is one Error: and one Hint: line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _search(tmp_path: Path, debug: bool) -> subprocess.CompletedProcess[str]:
    db = tmp_path / "sessions.db"
    if not db.exists():
        shutil.copy(FIXTURES / "healthy" / "sessions.db", db)
    env = {k: v for k, v in os.environ.items() if k != "STEERABLE_DEBUG"}
    if debug:
        env["STEERABLE_DEBUG"] = "1"
    return subprocess.run([sys.executable, "-m", "steerable_maint", "search", str(db), 'unterminated "quote'],
                          capture_output=True, text=True, env=env, timeout=60)


def test_debug_prints_the_chain_down_to_sqlites_own_error(tmp_path: Path):
    done = _search(tmp_path, debug=True)
    assert done.returncode == 2 and done.stdout == ""
    assert "sqlite3.OperationalError" in done.stderr
    assert "The above exception was the direct cause of the following exception" in done.stderr
    assert "UsageError: search query rejected" in done.stderr
    assert done.stderr.rstrip().splitlines()[-2].startswith("Error: search query rejected")
    assert done.stderr.rstrip().splitlines()[-1].startswith("Hint: ")


def test_without_debug_the_same_failure_is_two_lines(tmp_path: Path):
    done = _search(tmp_path, debug=False)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.rstrip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: search query rejected") and lines[1].startswith("Hint: ")
