"""bench/compaction_bench.py runs and reports numeric figures (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compaction_bench.py"


def test_compaction_bench_reports_both_figures(tmp_path):
    out = tmp_path / "compaction.json"
    done = subprocess.run([sys.executable, str(BENCH), "--reps", "2", "--loops", "20", "--out", str(out)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    pressure, throughput = json.loads(out.read_text())["rows"]
    assert pressure["ratio"] > 0 and pressure["met"] in ("yes", "MISSED") and pressure["messages"] == 2002
    assert throughput["chars"] >= 1_000_000 and throughput["mb_per_s"] > 0
    assert "pressure decision per round" in done.stdout and "M chars/s" in done.stdout
