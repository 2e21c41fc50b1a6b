"""An independent host: the json-rpc-2.0 npm package (not written here) drives the sidecar.

node is installed by .ci/run; the package (tests/sidecar/node/package.json and its lock file)
is installed by .ci/run too, or by this test with npm when it is missing, so the README's test
command works in a fresh clone. A machine without node or npm fails this test rather than
skipping it.
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


def _installed_package() -> bool:
    """The json-rpc-2.0 package under NODE_DIR, installed now with npm (as .ci/run does) if missing."""
    package = NODE_DIR / "node_modules" / "json-rpc-2.0" / "package.json"
    npm = shutil.which("npm")
    if not package.is_file() and npm:
        subprocess.run([npm, "install", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    return package.is_file()


def test_the_json_rpc_2_0_npm_client_pings_creates_a_session_and_streams_a_chat_with_a_host_tool():
    node = shutil.which("node")
    assert node, "node is not installed: run .ci/run (it installs nodejs and the json-rpc-2.0 package)"
    assert _installed_package(), "could not install json-rpc-2.0: run npm install --prefix tests/sidecar/node"
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
