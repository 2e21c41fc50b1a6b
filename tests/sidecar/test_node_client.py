"""An independent host: the json-rpc-2.0 npm package (not written here) drives the sidecar.

node and the package are installed by .ci/run (tests/sidecar/node/package.json); a machine
without them fails this test rather than skipping it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.replay_server import ReplayServer

from .harness import ROOT
from .openai_sse import text_reply, tool_reply

NODE_DIR = Path(__file__).resolve().parent / "node"


def test_the_json_rpc_2_0_npm_client_pings_creates_a_session_and_streams_a_chat_with_a_host_tool():
    node = shutil.which("node")
    assert node, "node is not installed: run .ci/run (it installs nodejs and the json-rpc-2.0 package)"
    assert (NODE_DIR / "node_modules" / "json-rpc-2.0").is_dir(), "run: npm install --prefix tests/sidecar/node"
    script = [tool_reply([("call_n", "get_weather", {"city": "Lisbon"})]), text_reply(["Sunny ", "in ", "Lisbon."])]
    with ReplayServer(script) as model:
        done = subprocess.run([node, str(NODE_DIR / "client.mjs"), sys.executable, model.url + "/v1"],
                              capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["ready"]["protocol"] == "jsonrpc-2.0"
    assert summary["ping"]["pong"] is True
    assert summary["session"]["chatId"] == "node-chat" and summary["session"]["userId"] == "node"
    assert summary["notFound"]["code"] == -32001 and summary["notFound"]["hint"]
    assert summary["stream"]["streamId"].startswith("st-")
    assert summary["invoked"] == [{"name": "get_weather", "args": {"city": "Lisbon"}, "callId": "call_n"}]
    assert summary["toolCalls"] == ["get_weather"]
    assert "".join(summary["chunks"]) == "Sunny in Lisbon."
    assert summary["done"]["status"] == "completed" and summary["done"]["streamId"] == summary["stream"]["streamId"]
    assert summary["shutdown"] == {"shuttingDown": True} and summary["exitCode"] == 0
