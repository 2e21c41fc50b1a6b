"""A refused job leaves the folder exactly as it was (issue 16 item 5): no new ``.lock``,
``-wal``, ``-shm``, archive or temp file, for every refusal of every two-store and
rewriting command, including the refusals that come after a lease was taken (a newer schema
only in the destination's ``-wal``, a damaged source, a chat in neither file, a destination
another process holds). A lock file that was already there (another process holds it, or a
dead app left it) is never removed: it is still there, the same inode, still held.

Every case runs the console script's entry point in its own child process
(tests/cliproc.py), and the lease holders are real processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from steerable_agent_runtime.storage.lease import lease_holder, lock_path_for
from tests.cliproc import assert_refused, forked_many
from tests.helpers import wal_only_copy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HEALTHY = FIXTURES / "healthy" / "sessions.db"
DAMAGED = FIXTURES / "integrity-error" / "sessions.db"
NEWER = FIXTURES / "schema-too-new" / "sessions.db"
CHAT = "chat-alpha"  # a chat of the healthy fixture


# What a case's folder holds before the job ---------------------------------------------
def healthy(path: Path) -> None:
    shutil.copyfile(HEALTHY, path)


def damaged(path: Path) -> None:
    shutil.copyfile(DAMAGED, path)


def newer(path: Path) -> None:
    shutil.copyfile(NEWER, path)


def newer_in_wal(path: Path) -> None:
    """A store whose newer user_version is committed to its -wal only (its writer died)."""
    wal_only_copy(HEALTHY, path, "PRAGMA user_version = 9")


def foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 4660")
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()


def text(path: Path) -> None:
    path.write_text("my shopping list\n")


HOLD = ("import sys\nfrom steerable_agent_runtime.storage.lease import WriteLease\n"
        "lease = WriteLease(sys.argv[1]).acquire()\nprint('ready', flush=True)\nsys.stdin.read()\n")


class Holders:
    """Real processes that hold a store's write lease until the test ends."""

    def __init__(self) -> None:
        self.children: dict[Path, subprocess.Popen] = {}

    def hold(self, db: Path) -> None:
        child = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        self.children[db] = child

    def close(self) -> None:
        for child in self.children.values():
            child.stdin.close()
            child.wait(timeout=30)


def leased(holders: Holders, make: Callable[[Path], None] = healthy) -> Callable[[Path], None]:
    def setup(path: Path) -> None:
        make(path)
        holders.hold(path)
    return setup


# The cases: name -> ({file: setup}, argv with {dir}, exit code) ---------------------------
def _cases(holders: Holders) -> dict[str, tuple[dict[str, Callable[[Path], None]], list[str], int]]:
    s, a = "{dir}/sessions.db", "{dir}/archive.db"
    arch = ["archive", s, "--to", a, "--older-than", "1d"]
    cases: dict[str, tuple[dict[str, Callable[[Path], None]], list[str], int]] = {
        "archive-to-itself": ({"sessions.db": healthy}, ["archive", s, "--to", s, "--older-than", "1d"], 2),
        "archive-to-newer": ({"sessions.db": healthy, "archive.db": newer}, arch, 3),
        "archive-to-newer-in-wal": ({"sessions.db": healthy, "archive.db": newer_in_wal}, arch, 3),
        "archive-to-foreign": ({"sessions.db": healthy, "archive.db": foreign}, arch, 3),
        "archive-to-text": ({"sessions.db": healthy, "archive.db": text}, arch, 3),
        "archive-to-leased": ({"sessions.db": healthy, "archive.db": leased(holders)}, arch, 3),
        "archive-damaged": ({"sessions.db": damaged}, arch, 3),
        "archive-damaged-include-active": ({"sessions.db": damaged}, [*arch, "--include-active"], 3),
        "archive-damaged-dry-run": ({"sessions.db": damaged}, [*arch, "--dry-run"], 3),
        "archive-damaged-stale-lock": ({"sessions.db": lambda p: (damaged(p), stale_lock(p))}, arch, 3),
        "archive-damaged-into-existing": ({"sessions.db": damaged, "archive.db": healthy}, arch, 3),
        "archive-newer-in-wal": ({"sessions.db": newer_in_wal}, arch, 3),
        "archive-leased": ({"sessions.db": leased(holders)}, arch, 3),
        "archive-dry-run-to-newer-in-wal": ({"sessions.db": healthy, "archive.db": newer_in_wal}, [*arch, "--dry-run"], 3),
        "restore-to-newer-in-wal": ({"archive.db": healthy, "sessions.db": newer_in_wal},
                                    ["restore", a, "--to", s, "--chat", CHAT], 3),
        "restore-to-leased": ({"archive.db": healthy, "sessions.db": leased(holders)},
                              ["restore", a, "--to", s, "--chat", CHAT], 3),
        "restore-from-leased": ({"archive.db": leased(holders), "sessions.db": healthy},
                                ["restore", a, "--to", s, "--chat", CHAT], 3),
        "restore-chat-in-neither": ({"archive.db": healthy, "sessions.db": healthy},
                                    ["restore", a, "--to", s, "--chat", "no-such-chat"], 2),
        "restore-to-missing": ({"archive.db": healthy}, ["restore", a, "--to", s, "--chat", CHAT], 3),
        "restore-to-itself": ({"archive.db": healthy}, ["restore", a, "--to", a, "--chat", CHAT], 2),
        "copy-to-itself": ({"sessions.db": healthy}, ["copy", s, "--to", s], 2),
        "copy-to-newer": ({"sessions.db": healthy, "dest.db": newer}, ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-to-newer-in-wal": ({"sessions.db": healthy, "dest.db": newer_in_wal},
                                 ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-dry-run-to-newer-in-wal": ({"sessions.db": healthy, "dest.db": newer_in_wal},
                                         ["copy", s, "--to", "{dir}/dest.db", "--dry-run"], 3),
        "copy-to-foreign": ({"sessions.db": healthy, "dest.db": foreign}, ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-to-text": ({"sessions.db": healthy, "dest.db": text}, ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-to-leased": ({"sessions.db": healthy, "dest.db": leased(holders)},
                           ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-from-text": ({"sessions.db": text}, ["copy", s, "--to", "{dir}/dest.db"], 3),
        "copy-from-newer": ({"sessions.db": newer}, ["copy", s, "--to", "{dir}/dest.db"], 3),
        "compact-damaged": ({"sessions.db": damaged}, ["compact", s, "--traces-older-than", "1d"], 3),
        "compact-damaged-dry-run": ({"sessions.db": damaged}, ["compact", s, "--traces-older-than", "1d", "--dry-run"], 3),
        "compact-newer-in-wal": ({"sessions.db": newer_in_wal}, ["compact", s, "--traces-older-than", "1d"], 3),
        "compact-leased": ({"sessions.db": leased(holders)}, ["compact", s, "--traces-older-than", "1d"], 3),
        "repair-leased": ({"sessions.db": leased(holders, damaged)}, ["repair", s], 3),
        "repair-missing": ({}, ["repair", s], 3),
        "salvage-out-exists": ({"sessions.db": healthy, "out.jsonl": text}, ["salvage", s, "--out", "{dir}/out.jsonl"], 3),
        "salvage-out-is-the-store": ({"sessions.db": healthy}, ["salvage", s, "--out", s], 3),
        "salvage-rebuild-exists": ({"sessions.db": healthy, "new.db": healthy},
                                   ["salvage", s, "--out", "{dir}/out.jsonl", "--rebuild", "{dir}/new.db"], 3),
        "salvage-rebuild-leased": ({"sessions.db": healthy, "new.db": leased(holders)},
                                   ["salvage", s, "--out", "{dir}/out.jsonl", "--rebuild", "{dir}/new.db", "--force"], 3),
        "salvage-rebuild-is-the-store": ({"sessions.db": healthy},
                                         ["salvage", s, "--out", "{dir}/out.jsonl", "--rebuild", s, "--force"], 3),
    }
    return cases


def stale_lock(path: Path) -> None:
    """The lock file a dead app left beside its store (nobody holds it)."""
    lock_path_for(path).write_bytes(b"999999\n")


def state(folder: Path) -> dict[str, tuple[str, object]]:
    """Every entry of ``folder``: a lock file by inode (a job may write its pid into a lock file
    it takes), every other file by its bytes' digest, a symlink by its target."""
    out: dict[str, tuple[str, object]] = {}
    for p in sorted(folder.iterdir()):
        if p.is_symlink():
            out[p.name] = ("link", os.readlink(p))
        elif p.suffix == ".lock":
            out[p.name] = ("lock", p.stat().st_ino)
        elif p.is_file():
            out[p.name] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[p.name] = ("other", p.stat().st_mode)
    return out


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """Build every case's folder, run every case once (as forked children), yield the results."""
    holders = Holders()
    try:
        cases = _cases(holders)
        root = tmp_path_factory.mktemp("refusals")
        prepared, argvs = {}, {}
        for name, (files, argv, code) in cases.items():
            folder = root / name
            folder.mkdir()
            for file, setup in files.items():
                setup(folder / file)
            prepared[name] = (folder, state(folder), code)
            argvs[name] = [arg.format(dir=folder) for arg in argv]
        results = forked_many(argvs, timeout=60)
        yield {name: (folder, before, code, results[name], holders) for name, (folder, before, code) in prepared.items()}
    finally:
        holders.close()


@pytest.mark.parametrize("case", list(_cases(Holders())))
def test_a_refused_job_leaves_the_folder_as_it_was(refusals, case):
    folder, before, code, ran, holders = refusals[case]
    assert_refused(ran, code)
    assert state(folder) == before, ran.describe()
    for db, child in holders.children.items():
        if db.parent == folder:  # the other process still holds its lease, on the same file
            assert child.poll() is None
            assert lease_holder(db).pid == child.pid
