"""Run archive/restore in a REAL child process and SIGKILL it at a random moment.

The child imports everything, prints ``ready``, then runs the job and prints ``done``.
The parent sleeps a random delay after ``ready`` and sends SIGKILL, so the kill lands
anywhere from opening the files to the last delete commit (or after the job finished).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys
from datetime import timedelta
from steerable_agent_runtime.maintenance.archive import archive, restore
job, src, dst, arg = sys.argv[1:5]
print("ready", flush=True)
if job == "archive":
    archive(src, to=dst, older_than=timedelta(days=30), batch_size=int(arg))
else:
    restore(src, to=dst, chat_id=arg)
print("done", flush=True)
"""

REPO = Path(__file__).resolve().parents[2]


def start(job: str, src: Path, dst: Path, arg: str) -> subprocess.Popen:
    """Start the child and wait until it has imported everything (it printed ``ready``)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, job, str(src), str(dst), arg], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read()
    return proc


def run_to_end(job: str, src: Path, dst: Path, arg: str) -> float:
    """Run the child without killing it; return the seconds from ``ready`` to exit."""
    proc = start(job, src, dst, arg)
    began = time.perf_counter()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "done" in out, err
    return time.perf_counter() - began


def kill_after(proc: subprocess.Popen, delay: float) -> bool:
    """SIGKILL the child ``delay`` seconds after ``ready``; True if it was still running."""
    time.sleep(delay)
    running = proc.poll() is None
    if running:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    return running


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a closed store (db and, if present, -wal) to ``dst``."""
    shutil.copyfile(src, dst)
    if Path(f"{src}-wal").exists():
        shutil.copyfile(f"{src}-wal", f"{dst}-wal")
    return dst
