"""The README's offline demo runs as documented: the script, then `steerable-maint history`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_offline_demo_then_history_shows_the_record(tmp_path):
    demo = subprocess.run([sys.executable, str(ROOT / "examples" / "offline_demo.py"), "demo.db"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert demo.returncode == 0, demo.stderr
    assert "[tool] weather({'city': 'Lisbon'})" in demo.stdout
    assert "It is sunny in Lisbon, 24 degrees." in demo.stdout and "[done] completed after 2 rounds" in demo.stdout
    steerable_maint = Path(sys.executable).with_name("steerable-maint")
    shown = subprocess.run([str(steerable_maint), "history", "demo.db", "demo-chat"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "record demo-chat: 4 entries" in shown.stdout
    assert re.search(r"seq 3 .* item .* tool: \{\"success\":true", shown.stdout)
    as_json = subprocess.run([str(steerable_maint), "history", "demo.db", "demo-chat", "--json", "--resume"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert as_json.returncode == 0 and "It is sunny in Lisbon" in as_json.stdout
    json.loads(as_json.stdout)


def test_readme_names_the_demo_and_the_real_model_lines():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The agent loop"):]
    assert "python examples/offline_demo.py" in section and "steerable-maint history demo.db demo-chat" in section
    assert "OpenAICompatProvider(" in section and "AnthropicProvider(" in section


def test_loop_bench_runs_and_reports_both_figures(tmp_path):
    """Smoke test of bench/loop_bench.py: it runs and reports numeric ratios (no timing asserted)."""
    out = tmp_path / "loop.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "loop_bench.py"), "--turns", "2", "--sqlite-turns", "1",
                           "--rounds", "3", "--repeats", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for key in ("memory", "memory_vs_appends", "sqlite"):
        assert result[key]["ratio"] > 0 and result[key]["baseline_us_per_round"] > 0
    assert "SqliteStorage vs bare + appends" in done.stdout
