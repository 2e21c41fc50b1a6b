"""Every example marked ``<!-- example -->`` in docs/operator.md (and the README) is run, in
order, in a copy of the shipped fixtures, as a real shell command through the installed
``steerable-maint``; its output (stdout and stderr in one stream) must be what the page shows.
Each report's JSON field list on the page must be the report model's fields."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import steerable_agent_runtime.maintenance as maintenance

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "operator.md", ROOT / "README.md"]
EXAMPLE = re.compile(r"<!-- example -->\n```console\n(.*?)```", re.S)
FIELDS = re.compile(r"<!-- json-fields: (\w+) -->\n(.*?)\n", re.S)
CUTOFF = re.compile(r"^(cutoff: .*?)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", re.M)
BACKUP = re.compile(r"\.repair-\d{8}T\d{6}\.\d{6}Z")


def examples(page: Path) -> list[tuple[str, str]]:
    found = []
    for block in EXAMPLE.findall(page.read_text()):
        first, _, expected = block.partition("\n")
        assert first.startswith("$ "), f"{page.name}: an example starts with `$ command`: {first!r}"
        found.append((first[2:], expected))
    return found


def _masked(text: str) -> str:
    return BACKUP.sub(".repair-<UTC time>", CUTOFF.sub(r"\1<today's cutoff>", text))


def _shell_env() -> dict[str, str]:
    env = dict(os.environ, COLUMNS="100", PYTHONUNBUFFERED="1", TERM="dumb")
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    for noisy in ("STEERABLE_DEBUG", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "NO_COLOR", "FORCE_COLOR"):
        env.pop(noisy, None)
    return env


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_marked_example_prints_what_the_page_shows(page: Path, tmp_path: Path):
    cases = examples(page)
    if page.name == "operator.md":
        assert len(cases) >= 10, "the operator reference lost its examples"
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for command, expected in cases:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=_shell_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)
        assert _masked(done.stdout) == _masked(expected), f"{page.name}: `{command}` printed:\n{done.stdout}"


def test_the_json_field_lists_are_the_report_models():
    listed = FIELDS.findall((ROOT / "docs" / "operator.md").read_text())
    assert len(listed) >= 10
    for model, line in listed:
        fields = [name.strip("` ") for name in line.split(",")]
        assert fields == list(getattr(maintenance, model).model_fields), model


def test_the_backup_mask_only_hides_the_folder_time():
    assert _masked("in db.repair-20261201T115329.305450Z/rows.jsonl") == "in db.repair-<UTC time>/rows.jsonl"
    assert _masked("in db.repair-new/rows.jsonl") == "in db.repair-new/rows.jsonl"


def test_the_cutoff_mask_only_hides_the_timestamp():
    assert _masked("cutoff: started before 2026-11-01T09:33:03.089777Z\nx") == \
        "cutoff: started before <today's cutoff>\nx"
    assert _masked("cutoff: nothing at or after 2026-09-02T09:33:06Z; archive file created") != \
        _masked("cutoff: nothing at or after 2026-09-02T09:33:06Z; archive file kept")


def test_the_default_hint_points_at_sections_that_exist():
    from steerable_agent_runtime.errors import SteerableError

    hint = SteerableError("x").hint
    assert "symptom -> command" in hint.lower() and "docs/operator.md" in hint
    assert "## Symptom -> command" in (ROOT / "README.md").read_text()
    assert (ROOT / "docs" / "operator.md").exists()
