"""Shared helpers of the maintenance tests: fixture stores, directory snapshots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").exists())


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` by name, with its bytes (to prove nothing changed or appeared)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def expected(case: str) -> dict:
    return json.loads((FIXTURES / case / "expected.json").read_text())


@pytest.fixture
def fixture_copy(tmp_path: Path):
    """Copy a checked-in fixture case into tmp_path and return its sessions.db path."""

    def copy(case: str) -> Path:
        target = tmp_path / case
        shutil.copytree(FIXTURES / case, target)
        (target / "expected.json").unlink()
        return target / "sessions.db"

    return copy


WRITER = Path(__file__).with_name("writer_child.py")


class LiveWriter:
    """A child process holding the store's lease and committing into the -wal (writer_child.py)."""

    def __init__(self, db: Path) -> None:
        import subprocess
        import sys

        self.db = db
        self.proc = subprocess.Popen([sys.executable, str(WRITER), str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self._line() == "ready", self.proc.stderr.read()

    def _line(self) -> str:
        line = self.proc.stdout.readline().strip()
        if not line:
            raise AssertionError(f"writer child died: {self.proc.stderr.read()}")
        return line

    def send(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._line() if command != "run" else ""

    def write(self, n: int) -> int:
        return int(self.send(f"write {n}").split()[1])

    def pause(self) -> tuple[int, int]:
        """Stop a ``run``; return (commits made, commits that failed)."""
        _, ok, failed = self.send("pause").split()
        return int(ok), int(failed)

    def kill(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("exit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)


@pytest.fixture
def live_writer():
    """Start LiveWriter(db) children; every one still running is closed after the test."""
    started: list[LiveWriter] = []

    def start(db: Path) -> LiveWriter:
        started.append(LiveWriter(db))
        return started[-1]

    yield start
    for writer in started:
        if writer.proc.poll() is None:
            writer.kill()
