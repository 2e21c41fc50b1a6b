"""SqliteStorage's first open of a new path must be crash-safe: a SIGKILL during it must not
leave a 0-byte db that every later open refuses ("empty file (0 bytes), not a database")."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from steerable_agent_runtime.storage.sqlite import SqliteStorage

CHILD = """
import sys
from steerable_agent_runtime.storage.sqlite import SqliteStorage
print("ready", flush=True)
SqliteStorage(sys.argv[1]).close_sync()
"""


def test_kill_during_first_open_leaves_a_store_that_opens_again(tmp_path):
    rng = random.Random(7)
    for n in range(30):
        path = tmp_path / f"s{n}.db"
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.004))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        SqliteStorage(path).close_sync()  # today: NotAStoreError "empty file (0 bytes)" in most rounds
