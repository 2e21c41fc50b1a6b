"""The finding-code registry: one style, every finding built through it, the docs table generated from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import steerable_agent_runtime
from steerable_agent_runtime.maintenance.codes import CODES, JOB_PREFIXES, finding, job_of, markdown_table, salvage_code
from steerable_agent_runtime.sqlitefile.damage import BENIGN, DAMAGE

LIBRARY = Path(steerable_agent_runtime.__file__).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operator.md"
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)+$")
CHECK_FAMILIES = ("sqlite-", "schema-", "row-", "record-", "orphan-", "lease-", "wal-")


def test_every_code_is_kebab_case_and_names_its_job():
    for code, spec in CODES.items():
        assert KEBAB.match(code), code
        assert spec.severity in ("error", "warning", "info")
        assert spec.meaning and spec.hint and "|" not in spec.meaning + spec.hint
        if job_of(code) == "check":
            assert code.startswith(CHECK_FAMILIES), f"{code}: not check's and no job prefix {JOB_PREFIXES}"


def test_severity_and_default_hint_come_from_the_registry():
    made = finding("archive-conflict", "chat 'c': sessions row 'k' differs", table="sessions", record_id="c", seq="x")
    assert (made.severity, made.hint, made.table, made.record_id, made.seq) == (
        "error", CODES["archive-conflict"].hint, "sessions", "c", None)
    assert finding("salvage-wal-torn-tail", "1 x wal torn tail").severity == "info"


def _calls(name: str, attr: bool = False):
    for path in sorted(LIBRARY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == name:
                    yield path, node


def test_no_finding_is_built_outside_the_registry():
    places = sorted({str(path.relative_to(LIBRARY)) for path, _ in _calls("Finding")})
    assert places == ["maintenance/codes.py"]


def test_every_literal_code_a_job_uses_is_registered():
    used = set()
    for name in ("finding", "add"):
        for path, node in _calls(name):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                used.add((str(path.relative_to(LIBRARY)), node.args[0].value))
    assert used, "the scan found no finding() call: it is looking in the wrong place"
    assert {code for _, code in used} - set(CODES) == set()


def test_every_damage_kind_the_reader_counts_is_listed_and_has_a_salvage_code():
    counted = set()
    for path in sorted((LIBRARY / "sqlitefile").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "note" and node.args:
                counted.add(node.args[0].value)
            if isinstance(node, ast.Subscript) and getattr(node.value, "attr", None) == "damage":
                if isinstance(node.slice, ast.Constant):
                    counted.add(node.slice.value)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and \
                    str(node.value.value).startswith("wal_"):
                counted.add(node.value.value)  # _break_kind's answers
    assert len(counted) > 10 and counted <= set(DAMAGE)
    assert BENIGN <= set(DAMAGE)
    for kind in DAMAGE:
        assert CODES[salvage_code(kind)].severity == ("info" if kind in BENIGN else "error")


def test_the_operator_docs_table_is_the_registry():
    text = DOCS.read_text()
    start, end = "<!-- finding-codes:start -->\n", "<!-- finding-codes:end -->"
    assert start in text and end in text
    table = text.split(start, 1)[1].split(end, 1)[0]
    assert table == markdown_table(), (
        "docs/operator.md's code table drifted from maintenance/codes.py; regenerate it with\n"
        "  .venv/bin/python -c 'from steerable_agent_runtime.maintenance.codes import markdown_table;"
        " print(markdown_table(), end=\"\")'")
