"""A destination that is the store itself under another name (a hard link, or a symlink) is
refused with exit 2 before anything is opened: archive would lock against itself and copy would
copy a store into itself. The store's files are unchanged and no file is left behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "healthy" / "sessions.db"
MAINT = str(Path(sys.executable).with_name("steerable-maint"))


def listing(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("link", ["hard", "symlink"])
@pytest.mark.parametrize("command", [["archive", "--older-than", "1d"], ["copy"]])
def test_the_store_under_another_name_is_refused_as_destination(tmp_path, link, command):
    db = tmp_path / "sessions.db"
    shutil.copy(FIXTURE, db)
    twin = tmp_path / "twin.db"
    (os.link if link == "hard" else os.symlink)(db, twin)
    before = listing(tmp_path)
    done = subprocess.run([MAINT, command[0], str(db), "--to", str(twin), *command[1:]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines] == ["Error", "Hint"], done.stderr
    assert "same store" in lines[0]
    assert listing(tmp_path) == before
