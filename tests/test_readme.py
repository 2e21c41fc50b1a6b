"""The Python examples of the README and of docs/library.md run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LIBRARY = ROOT / "docs" / "library.md"


@pytest.mark.parametrize("page", [README, LIBRARY], ids=lambda p: p.name)
def test_readme_python_example_runs(tmp_path, page: Path):
    code = re.search(r"```python\n(.*?)```", page.read_text(), re.S).group(1)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Lisbon it is." in done.stdout and "session_id='s1'" in done.stdout
    assert (tmp_path / "sessions.lock").exists()


def test_the_library_page_maintenance_example_runs_on_a_fixture():
    code = re.findall(r"```python\n(.*?)```", LIBRARY.read_text(), re.S)[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "fixtures" / "orphans", capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0 [") and "orphan-" in done.stdout
