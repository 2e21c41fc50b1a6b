"""A store another program holds a SQLite lock on (a sqlite3 shell or DB browser with
``locking_mode=EXCLUSIVE``, a stuck foreign writer) is busy, not damaged: opening it for writing
fails with StoreAlreadyOwnedError naming the lock, never DatabaseDamagedError with the salvage
remedy (an operator following that would salvage a healthy store), and changes nothing.

The lock is held by a real child process.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from steerable_agent_runtime import DatabaseDamagedError, SqliteStorage, StoreAlreadyOwnedError

from tests.helpers import message, run, session

HOLD = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('PRAGMA locking_mode=EXCLUSIVE')
c.execute('BEGIN IMMEDIATE'); c.execute('COMMIT')
c.execute('SELECT count(*) FROM sqlite_master').fetchone()
print('held', flush=True)
sys.stdin.read()
"""


def digest(path: Path) -> dict[str, str]:
    """Every file beside the store by name; its bytes too, except the lease's lock file (whose
    content is the last lease holder's pid, rewritten by each claim)."""
    return {p.name: "lease" if p.suffix == ".lock" else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.iterdir())}


@pytest.fixture
def locked_store(tmp_path):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.upsert_session(session("s1")))
    run(store.append_message(message("m1", content="keep me")))
    run(store.close())
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    yield db, child
    if child.poll() is None:
        child.communicate("", timeout=30)


def test_opening_a_store_another_program_locked_is_busy_not_damaged(locked_store):
    db, child = locked_store
    before = digest(db)
    with pytest.raises(StoreAlreadyOwnedError) as err:
        SqliteStorage(db)
    assert not isinstance(err.value, DatabaseDamagedError)
    assert "lock" in err.value.message and "salvage" not in err.value.hint
    assert "other program" in err.value.hint
    assert err.value.__cause__ is not None  # SQLite's own error stays the cause
    assert digest(db) == before
    child.communicate("", timeout=30)
    store = SqliteStorage(db)  # once the other program lets go, it opens as before
    assert [m.content for m in run(store.list_messages("c1"))] == ["keep me"]
    run(store.close())


def test_a_write_job_on_a_locked_store_exits_3_with_one_line_and_the_right_hint(locked_store):
    db, _child = locked_store
    before = digest(db)
    maint = Path(sys.executable).with_name("steerable-maint")
    done = subprocess.run([str(maint), "compact", str(db), "--traces-older-than", "30d"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in lines] == ["Error", "Hint"], done.stderr
    assert "lock" in lines[0] and "salvage" not in done.stderr
    assert digest(db) == before
