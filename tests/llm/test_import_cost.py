"""Importing the llm package and a provider stays cheap: no storage half, no pydantic, no asyncio.

Not a timing (those are in bench/llm_bench.py): it checks, in a fresh interpreter, which
modules the import loads, which is what the import-time figure depends on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_llm_and_a_provider_import_without_storage_or_pydantic():
    mods = loaded_after("import steerable_agent_runtime.llm, steerable_agent_runtime.llm.openai_compat")
    assert "steerable_agent_runtime.llm.openai_compat" in mods and "httpx" in mods
    heavy = {"pydantic", "steerable_agent_runtime.models", "steerable_agent_runtime.storage",
             "steerable_agent_runtime.history", "sqlite3", "asyncio"}
    assert not heavy & mods, heavy & mods


def test_llm_package_alone_does_not_import_httpx():
    assert "httpx" not in loaded_after("import steerable_agent_runtime.llm")


def test_top_level_names_still_resolve_lazily():
    mods = loaded_after("import steerable_agent_runtime as s\nassert s.SqliteStorage.__name__ == 'SqliteStorage'\n"
                        "assert s.InMemoryStorage and s.storage.StorageAdapter\nfrom steerable_agent_runtime import *")
    assert "steerable_agent_runtime.storage.sqlite" in mods


def test_bench_runs_and_reports_both_ratios(tmp_path):
    out = tmp_path / "llm.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "llm_bench.py"), "--chunks", "300", "--reps", "1",
                           "--import-reps", "1", "--json", str(out)], check=False, capture_output=True, text=True, timeout=180,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    for key in ("parse_ratio_vs_sdk_accumulator", "parse_ratio_vs_sdk_raw", "import_ratio_vs_httpx"):
        assert report[key] > 0 and key.split("_vs_")[0].replace("_", " ").split()[0] in done.stdout
