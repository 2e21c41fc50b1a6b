"""Issue 16 item 4: nothing blocks, nothing that is not a regular file is opened or replaced.

A FIFO, a unix socket or a device as a store path (any command's DB, archive/copy/restore's
``--to``), as its ``-wal``, ``-shm`` or lease file, or as an output (``--out``,
``--rebuild``) is refused before anything opens it: exit 3, one ``Error:`` line and one
``Hint:`` line. ``--force`` replaces only a regular file. Every case runs the real console
script in a child process with a timeout, so a job that blocks on a FIFO fails its case
instead of hanging the suite; the folder's listing must be the same afterwards (no stray
``.lock``, ``-wal`` or temp file), and the special file must still be what it was. The table
runs as forked children calling the console script's entry point (tests/cliproc.py); a few
cases also run the installed script itself.

``/dev/null`` itself is used as a store and as an output; a device replaced anyway (by a
regression) is put back by the fixture, and the case fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cliproc import assert_refused, cli, forked_many, listing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HEALTHY = FIXTURES / "healthy" / "sessions.db"
CHAT = "chat-alpha"
DEV_NULL = Path("/dev/null")


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    """A real bound unix socket (bound at a short path, then moved: sun_path is 108 bytes)."""
    short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(short / "s"))
        sock.close()
        os.rename(short / "s", path)
    finally:
        shutil.rmtree(short)


def make_chardev(path: Path) -> None:
    """A private null device (the numbers of /dev/null) that a test may lose without harm."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def make_dir(path: Path) -> None:
    path.mkdir()


KINDS: dict[str, Callable[[Path], None]] = {"fifo": make_fifo, "socket": make_socket, "char device": make_chardev,
                                            "directory": make_dir}


def _kind(path: Path) -> str:
    st = path.lstat()
    return ("fifo" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else
            "char device" if stat.S_ISCHR(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "file")


# Every position where a command takes a store: (args for a store at DB, in folder D).
STORE_ROLES: dict[str, Callable[[str, Path], list[str]]] = {
    "check": lambda db, d: ["check", db],
    "check --quick": lambda db, d: ["check", db, "--quick"],
    "inspect": lambda db, d: ["inspect", db],
    "history": lambda db, d: ["history", db, CHAT],
    "search": lambda db, d: ["search", db, "invoice"],
    "compact": lambda db, d: ["compact", db, "--traces-older-than", "30d"],
    "compact --dry-run": lambda db, d: ["compact", db, "--traces-older-than", "30d", "--dry-run"],
    "archive": lambda db, d: ["archive", db, "--to", str(d / "archive.db"), "--older-than", "30d"],
    "archive --to": lambda db, d: ["archive", str(d / "store.db"), "--to", db, "--older-than", "30d"],
    "restore": lambda db, d: ["restore", db, "--to", str(d / "store.db"), "--chat", CHAT],
    "restore --to": lambda db, d: ["restore", str(d / "store.db"), "--to", db, "--chat", CHAT],
    "salvage": lambda db, d: ["salvage", db, "--out", str(d / "rows.jsonl")],
    "traces": lambda db, d: ["traces", db, "--out", str(d / "traces.json")],
    "copy": lambda db, d: ["copy", db, "--to", str(d / "copy.db")],
    "copy --to": lambda db, d: ["copy", str(d / "store.db"), "--to", db],
    "repair": lambda db, d: ["repair", db],
    "repair --dry-run": lambda db, d: ["repair", db, "--dry-run"],
}

# The store path itself, or one of its sibling files, is a special file.
SITES: dict[str, Callable[[Path], Path]] = {
    "db": lambda db: db,
    "-wal": lambda db: db.with_name(db.name + "-wal"),
    "-shm": lambda db: db.with_name(db.name + "-shm"),
    "lock": lambda db: db.with_name(db.stem + ".lock"),
}

# Default: a FIFO at every site and /dev/null as the db, for every role; the other kinds for
# the roles that open a store in each way (read-only, writer, raw reader, repair, two stores).
# The rest of the matrix runs under -m soak.
FULL_KINDS_ROLES = ("check", "inspect", "compact", "salvage", "repair", "copy --to", "archive --to")
CASES: list[tuple[str, str, str]] = []
SOAK_CASES: list[tuple[str, str, str]] = []
for _role in STORE_ROLES:
    for _site in SITES:
        CASES.append((_role, _site, "fifo"))
    CASES.append((_role, "db", "/dev/null"))
    for _case in [(_role, site, "socket") for site in SITES] + [(_role, "-wal", "char device"),
                                                                (_role, "-shm", "directory"),
                                                                (_role, "lock", "directory")]:
        (CASES if _role in FULL_KINDS_ROLES else SOAK_CASES).append(_case)


def _case_id(case: tuple[str, str, str]) -> str:
    return "{} {}={}".format(*case)


class StoreCase:
    """One case's folder: a healthy store.db (the other side of two-store commands), and
    the store under test (a healthy copy whose site is replaced by a special file)."""

    def __init__(self, base: Path, role: str, site: str, kind: str) -> None:
        self.role, self.site, self.kind = role, site, kind
        self.folder = base / _case_id((role, site, kind)).replace(" ", "_").replace("/", "_")
        self.folder.mkdir()
        shutil.copyfile(HEALTHY, self.folder / "store.db")
        if kind == "/dev/null":
            self.db = DEV_NULL
            self.special = DEV_NULL
        else:
            self.db = self.folder / "target.db"
            if site != "db":
                shutil.copyfile(HEALTHY, self.db)
            self.special = SITES[site](self.db)
            KINDS[kind](self.special)
        self.before = listing(self.folder)

    def argv(self) -> list[str]:
        return STORE_ROLES[self.role](str(self.db), self.folder)


@pytest.fixture(scope="module")
def store_results(tmp_path_factory, request):
    base = tmp_path_factory.mktemp("special-stores")
    dev_before = set(os.listdir("/dev"))
    cases = {_case_id(c): StoreCase(base, *c) for c in CASES}
    if soak_requested(request):
        cases.update({_case_id(c): StoreCase(base, *c) for c in SOAK_CASES})
    results = forked_many({name: case.argv() for name, case in cases.items()})
    dev_after = set(os.listdir("/dev"))
    yield cases, results, dev_before, dev_after


@pytest.fixture(autouse=True, scope="module")
def _dev_null_guard():
    """Put /dev/null back if a regression replaced it (the case that did it fails too)."""
    yield
    if not DEV_NULL.is_char_device():
        os.unlink(DEV_NULL)
        os.mknod(DEV_NULL, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        pytest.fail("/dev/null was replaced by a regular file (it has been recreated)")


def soak_requested(request) -> bool:
    """Whether this run selected the soak cases (``-m soak``)."""
    return "soak" in (request.config.getoption("-m") or "")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_special_file_store_is_refused_before_opening(store_results, case):
    _check_store_case(store_results, case)


@pytest.mark.soak
@pytest.mark.parametrize("case", SOAK_CASES, ids=[_case_id(c) for c in SOAK_CASES])
def test_special_file_store_is_refused_before_opening_full_matrix(store_results, case):
    _check_store_case(store_results, case)


def _check_store_case(store_results, case):
    cases, results, dev_before, dev_after = store_results
    name = _case_id(case)
    c, ran = cases[name], results[name]
    assert_refused(ran, 3)
    assert listing(c.folder) == c.before, ran.describe()  # nothing created, nothing replaced
    assert _kind(c.special) == c.kind.replace("/dev/null", "char device")
    if c.kind == "/dev/null":
        assert dev_after <= dev_before, f"created in /dev: {dev_after - dev_before}"


# Outputs: salvage --out, salvage --rebuild, traces --out; with and without --force.
OUTPUT_ROLES: dict[str, Callable[[str, Path], list[str]]] = {
    "salvage --out": lambda out, d: ["salvage", str(d / "store.db"), "--out", out],
    "salvage --rebuild": lambda out, d: ["salvage", str(d / "store.db"), "--out", str(d / "rows.jsonl"),
                                         "--rebuild", out],
    "traces --out": lambda out, d: ["traces", str(d / "store.db"), "--out", out],
}
# /dev/null itself only without --force: a regression under --force would replace the
# machine's /dev/null while other processes use it; the private null device stands in.
OUTPUT_CASES = [(role, kind, force) for role in OUTPUT_ROLES
                for kind in ("fifo", "socket", "char device", "/dev/null", "directory") for force in (False, True)
                if not (kind == "/dev/null" and force)]


def _output_id(case: tuple[str, str, bool]) -> str:
    role, kind, force = case
    return f"{role}={kind}" + (" --force" if force else "")


class OutputCase:
    def __init__(self, base: Path, role: str, kind: str, force: bool) -> None:
        self.role, self.kind, self.force = role, kind, force
        self.folder = base / _output_id((role, kind, force)).replace(" ", "_").replace("/", "_")
        self.folder.mkdir()
        shutil.copyfile(HEALTHY, self.folder / "store.db")
        if kind == "/dev/null":
            self.out = DEV_NULL
        else:
            self.out = self.folder / "output"
            KINDS[kind](self.out)
        self.before = listing(self.folder)

    def argv(self) -> list[str]:
        return OUTPUT_ROLES[self.role](str(self.out), self.folder) + (["--force"] if self.force else [])


@pytest.fixture(scope="module")
def output_results(tmp_path_factory):
    base = tmp_path_factory.mktemp("special-outputs")
    cases = {_output_id(c): OutputCase(base, *c) for c in OUTPUT_CASES}
    results = forked_many({name: case.argv() for name, case in cases.items()})
    yield cases, results


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[_output_id(c) for c in OUTPUT_CASES])
def test_special_file_output_is_never_replaced(output_results, case):
    cases, results = output_results
    name = _output_id(case)
    c, ran = cases[name], results[name]
    assert_refused(ran, 3)
    assert listing(c.folder) == c.before, ran.describe()
    assert _kind(c.out) == c.kind.replace("/dev/null", "char device"), "the output was replaced"
    hint = ran.err.splitlines()[1]
    assert "--force" not in hint, "the hint suggests --force for a file --force would not replace"


def test_force_still_replaces_a_regular_output(tmp_path):
    """The refusal is about the kind of file: a regular file is replaced under --force."""
    shutil.copyfile(HEALTHY, tmp_path / "store.db")
    out = tmp_path / "traces.json"
    out.write_text("old")
    refused = cli(["traces", str(tmp_path / "store.db"), "--out", str(out)])
    assert_refused(refused, 3)
    assert "--force" in refused.err.splitlines()[1]
    ran = cli(["traces", str(tmp_path / "store.db"), "--out", str(out), "--force"])
    assert ran.code == 0, ran.describe()
    assert out.read_text() != "old" and out.is_file()


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400", "0", "-1", "0.0", " ", "abc"])
def test_deadline_accepts_only_finite_positive_numbers(tmp_path, value):
    shutil.copyfile(HEALTHY, tmp_path / "store.db")
    before = listing(tmp_path)
    ran = cli(["traces", str(tmp_path / "store.db"), "--endpoint", "http://127.0.0.1:9", "--deadline", value])
    assert_refused(ran, 2)
    assert "--deadline" in ran.err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("role, site", [("check", "-wal"), ("compact", "lock"), ("salvage", "-wal"), ("repair", "-shm"),
                                        ("inspect", "db")])
def test_fifo_through_the_installed_script(tmp_path, role, site):
    """The same refusal from a fresh interpreter running the installed console script."""
    c = StoreCase(tmp_path, role, site, "fifo")
    ran = cli(c.argv(), timeout=60)
    assert_refused(ran, 3)
    assert listing(c.folder) == c.before
