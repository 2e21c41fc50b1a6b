"""Issue 16 item 5: bad input to steerable-maint gets the documented exit code (2 usage, 3
cannot run) with exactly one ``Error:`` line and one ``Hint:`` line, and a refused job leaves
the folder exactly as it was (no stray ``.lock``, ``-wal`` or temp file).

Each case runs the installed console script in a real child process (tests/cliproc.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cliproc import CLI, assert_refused, cli, forked_many, listing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HEALTHY = FIXTURES / "healthy" / "sessions.db"
CHAT = "chat-alpha"


def _store(d: Path) -> str:
    shutil.copyfile(HEALTHY, d / "s.db")
    return str(d / "s.db")


# (name) -> (expected exit, builder: folder -> argv). The builder makes what the case needs.
Case = tuple[int, Callable[[Path], list]]
CASES: dict[str, Case] = {}


def case(name: str, code: int) -> Callable[[Callable[[Path], list]], Callable[[Path], list]]:
    def register(build: Callable[[Path], list]) -> Callable[[Path], list]:
        CASES[name] = (code, build)
        return build
    return register


# Durations that overflow (or are not durations at all) -------------------------------------
for _flag_cmd, _make in {
    "compact": lambda d, v: ["compact", _store(d), "--traces-older-than", v],
    "compact --dry-run": lambda d, v: ["compact", _store(d), "--traces-older-than", v, "--dry-run"],
    "archive": lambda d, v: ["archive", _store(d), "--to", str(d / "a.db"), "--older-than", v],
    "traces --since": lambda d, v: ["traces", _store(d), "--since", v, "--out", str(d / "t.json")],
}.items():
    for _value in ("999999w", "740000d", "99999999999d", "0d", "-5d", "1.5d", "30"):
        CASES[f"{_flag_cmd} {_value}"] = (2, lambda d, m=_make, v=_value: m(d, v))
CASES["traces --since far-future ISO"] = (2, lambda d: ["traces", _store(d), "--since", "9999-12-31T23:59:59-14:00",
                                                        "--out", str(d / "t.json")])

# Malformed collector URLs ----------------------------------------------------------------
for _url in ("http://[::1", "http://[::1]:x", "http://h:abc", "http://h:0", "http://h:99999", "http://exa mple.com",
             "http://h/\nx", "http://h/\x1b[31m", "http://", "http://:4318", "http://ü.example", "ftp://h", "", " ",
             "localhost:4318", "http://user:pw@h:4318", "//h:4318"):
    CASES[f"traces --endpoint {_url!r}"] = (2, lambda d, u=_url: ["traces", _store(d), "--endpoint", u,
                                                                  "--deadline", "0.5"])

# Arguments that are not UTF-8 ------------------------------------------------------------
CASES["check non-UTF-8 missing path"] = (2, lambda d: ["check", str(d).encode() + b"/s\xff.db"])
CASES["history non-UTF-8 chat"] = (2, lambda d: ["history", _store(d), b"chat\xff"])
CASES["search non-UTF-8 query"] = (2, lambda d: ["search", _store(d), b"inv\xffoice"])
CASES["traces non-UTF-8 endpoint"] = (2, lambda d: ["traces", _store(d), "--endpoint", b"http://h\xff:4318"])
CASES["repair non-UTF-8 path"] = (2, lambda d: ["repair", str(d).encode() + b"/s\xff.db"])
CASES["copy non-UTF-8 --to"] = (2, lambda d: ["copy", _store(d), "--to", str(d).encode() + b"/c\xff.db"])


@case("check non-UTF-8 name of a real store", 2)
def _real_store_non_utf8(d: Path) -> list:
    raw = str(d).encode() + b"/s\xff.db"
    shutil.copyfile(HEALTHY, raw)
    return ["check", raw]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("exit-contract")
    folders, jobs, before = {}, {}, {}
    for n, (name, (_code, build)) in enumerate(CASES.items()):
        folder = base / f"case{n}"
        folder.mkdir()
        argv = build(folder)
        folders[name], before[name] = folder, listing(folder)
        jobs[name] = argv
    ran = forked_many(jobs)
    return {name: (ran[name], folders[name], before[name]) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_exit_code_one_error_one_hint_nothing_left(results, name):
    ran, folder, before = results[name]
    assert_refused(ran, CASES[name][0])
    assert listing(folder) == before, ran.describe()


@pytest.mark.parametrize("argv", [
    lambda d: ["history", _store(d), b"chat\xff"],
    lambda d: ["compact", _store(d), "--traces-older-than", "999999w"],
    lambda d: ["traces", _store(d), "--endpoint", "http://[::1", "--deadline", "0.5"],
], ids=["non-UTF-8", "duration overflow", "endpoint"])
def test_same_refusals_through_the_installed_script(tmp_path, argv):
    """A few of the table's cases again in a fresh interpreter (argv decoded by Python itself)."""
    args = argv(tmp_path)
    before = listing(tmp_path)
    assert_refused(cli(args), 2)
    assert listing(tmp_path) == before


# No arguments, broken pipes, STEERABLE_DEBUG ----------------------------------------------
def test_no_arguments_prints_usage_exit_2():
    ran = cli([])
    assert ran.code == 2, ran.describe()
    assert ran.err.startswith("Usage: steerable-maint"), ran.describe()
    assert "Commands:" in ran.err and "Error:" not in ran.err and "Traceback" not in ran.err
    assert ran.stdout == b""


@pytest.mark.parametrize("argv", [
    lambda d: ["history", _store(d), CHAT],
    lambda d: ["history", _store(d), CHAT, "--json"],
    lambda d: ["check", _store(d)],
    lambda d: ["--help"],
], ids=["history", "history --json", "check", "--help"])
def test_reader_gone_exits_0_quietly(tmp_path, argv):
    """stdout's reader closed before the job wrote (what `| head` does, made certain)."""
    proc = subprocess.Popen([str(CLI), *argv(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert err == b"", err


def test_reader_gone_keeps_a_failing_exit_code(tmp_path):
    """A job that fails still says so when nobody reads stdout or stderr."""
    proc = subprocess.Popen([str(CLI), "check", str(tmp_path / "missing.db")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 3


def test_head_in_a_real_shell_pipeline(tmp_path):
    db = _store(tmp_path)
    done = subprocess.run(["bash", "-c", f'"{CLI}" history "{db}" {CHAT} | head -c 10 >/dev/null;'
                                         ' echo "${PIPESTATUS[0]}"'], capture_output=True, timeout=60)
    assert done.stdout.strip() == b"0", done
    assert done.stderr == b"", done


def test_steerable_debug_zero_means_off(tmp_path):
    values = {"0": False, "": False, "1": True, "yes": True}
    ran = {value: forked_many({value: ["check", str(tmp_path / "missing.db")]}, env={"STEERABLE_DEBUG": value})[value]
           for value in values}
    for value, traced in values.items():
        assert ran[value].code == 3, ran[value].describe()
        if traced:
            assert "Traceback" in ran[value].err, ran[value].describe()
        else:
            assert_refused(ran[value], 3)


def test_multi_line_error_text_is_one_line():
    """An error whose text spans lines (SQLite quoting schema SQL) prints as one Error: line."""
    from steerable_maint.render import one_line

    assert one_line('malformed database schema (t) - near "x":\n  CREATE TABLE t (\r\n    a\n)') == \
        'malformed database schema (t) - near "x": CREATE TABLE t ( a )'
    assert one_line("bad \x1b[31mred\x1b[0m") == "bad \\x1b[31mred\\x1b[0m"
    assert one_line("lone \udcff") == "lone \\udcff"
    assert len(one_line("x" * 5000)) == 1000


def test_server_store_hints_do_not_say_salvage(tmp_path):
    """check URL (here a SQLite store by URL): no remedy names `salvage DB`, which reads files only."""
    case = FIXTURES / "checksum-mismatch"
    shutil.copytree(case, tmp_path / "c")
    ran = cli(["check", f"sqlite+aiosqlite:///{tmp_path / 'c' / 'sessions.db'}", "--json"])
    assert ran.code == 1, ran.describe()
    findings = json.loads(ran.stdout)["findings"]
    assert findings and all("steerable-maint salvage" not in f["hint"] for f in findings), findings
    assert any("backup" in f["hint"] for f in findings)
    file_run = cli(["check", str(tmp_path / "c" / "sessions.db"), "--json"])
    assert any("steerable-maint salvage" in f["hint"] for f in json.loads(file_run.stdout)["findings"])  # a file keeps it

