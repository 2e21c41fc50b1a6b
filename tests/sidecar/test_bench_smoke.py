"""bench/sidecar_bench.py runs end to end on a small stream and reports both figures with
their baselines (numbers, not pass/fail: no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .harness import ROOT


def test_sidecar_bench_reports_cold_start_and_relay_against_their_baselines(tmp_path):
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sidecar_bench.py"), "--runs", "1", "--chunks", "300",
                           "--breakdown", "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    for name, target in (("cold_start", 2.5), ("relay", 2.0)):
        figure = results[name]
        assert figure["ours_median"] > 0 and figure["baseline_median"] > 0 and figure["target"] == target
        assert abs(figure["ratio"] - figure["ours_median"] / figure["baseline_median"]) <= 0.02 * figure["ratio"] + 0.01
    assert results["relay"]["provider_alone_chunks_per_s"] > 0 and results["relay"]["first_chunk_ms"] > 0
    layers = results["breakdown_us_per_chunk"]
    assert list(layers)[:5] == ["per_stream_ms", "http", "sse", "provider", "loop"] and layers["relay"]["cumulative"] > 0
    assert set(layers["without_sink"]) == {"provider_yielding", "loop_events"}
