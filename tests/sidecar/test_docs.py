"""docs/sidecar.md's transcript and tables match the sidecar: every frame is JSON-RPC 2.0,
every method it names is in the method table, every notification it shows is one the sidecar
sends, and the table lists every method."""

from __future__ import annotations

import json
import re

from steerable_agent_runtime.sidecar.app import METHODS

from .harness import ROOT

DOC = (ROOT / "docs" / "sidecar.md").read_text()
SENT = {"lifecycle.ready", "stream.chunk", "stream.done", "stream.error", "tool.invoke", "approval.request"}


def frames() -> list[tuple[str, dict]]:
    return [(line[0], json.loads(line[2:])) for line in DOC.splitlines() if re.match(r"^[<>] \{", line)]


def test_every_transcript_frame_is_json_rpc_with_a_real_method():
    shown = frames()
    assert len(shown) >= 10
    for direction, frame in shown:
        assert frame["jsonrpc"] == "2.0"
        if "method" in frame:
            assert frame["method"] in (METHODS if direction == ">" else SENT), frame["method"]
        else:
            assert "result" in frame or "error" in frame
    host_ids = [f["id"] for d, f in shown if d == ">" and "method" in f]
    answered = [f["id"] for d, f in shown if d == "<" and "method" not in f]
    assert sorted(map(str, host_ids)) == sorted(map(str, answered))


def test_the_method_table_lists_every_method():
    for method in METHODS:
        assert f"| `{method}` |" in DOC, method
