"""steerable-maint history shows a compaction_boundary's trigger and token figures."""

from __future__ import annotations

import asyncio

from click.testing import CliRunner
from steerable_agent_runtime import SqliteStorage

from steerable_maint.cli import main as maint


def test_history_prints_trigger_and_pre_post_tokens_of_each_boundary(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        asyncio.run(store.append_history("c1", [
            {"type": "item", "message": {"role": "user", "content": "go"}},
            {"type": "compaction_boundary", "trigger": "overflow", "preTokens": 9100, "postTokens": 2400,
             "replacement": [{"role": "user", "content": "go"}, {"role": "user", "content": "[summary]"}]},
            {"type": "compaction_boundary", "trigger": "manual", "preTokens": 2500, "postTokens": 900,
             "replacement": [{"role": "user", "content": "go"}]},
        ]))
    finally:
        asyncio.run(store.close())
    result = CliRunner().invoke(maint, ["history", str(tmp_path / "sessions.db"), "c1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "compaction_boundary" in line]
    assert "overflow 9100 -> 2400 tokens, 2 message(s):" in lines[0]
    assert "manual 2500 -> 900 tokens, 1 message(s):" in lines[1]
