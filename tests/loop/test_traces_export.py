"""A real loop run's trace, exported by `steerable-maint traces`, parses strictly as OTLP."""

from __future__ import annotations

import json

from click.testing import CliRunner
from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.llm import (
    LLMError,
    RetryPolicy,
    ScriptedProvider,
    ScriptedResponse,
)
from steerable_agent_runtime.loop import CoreLoop, RetryHooks
from steerable_agent_runtime.tracing import TraceRecorder

from steerable_maint.cli import main
from tests.helpers import run
from tests.loop.kit import USER, make_router, run_loop
from tests.tracing.test_otlp import parse_strict


def test_traces_exports_a_real_loop_run_that_the_otlp_validator_accepts(tmp_path):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)

    async def approver(call, mode, ctx):
        return True

    router, _ = make_router()
    provider = ScriptedProvider([ScriptedResponse(error=LLMError("busy", kind="server")),
                                 ScriptedResponse(tool_calls=[{"id": "s", "name": "shell", "arguments": {"command": "ls"}}]),
                                 "done"])
    loop = CoreLoop(provider, router, hooks=RetryHooks(RetryPolicy(base_delay_ms=1)), storage=store,
                    recorder=TraceRecorder(store), approver=approver)
    run_loop(loop, USER)
    run(store.close())
    out = tmp_path / "traces.json"
    result = CliRunner().invoke(main, ["traces", str(db), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["traces"] == 1 and report["spans"] == 5  # 3 llm.request, the tool, approval.wait
    message = parse_strict(json.loads(out.read_bytes()))
    spans = [s for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans]
    names = sorted(s.name for s in spans)
    assert names.count("llm.request") == 3 and "shell" in names and "approval.wait" in names
    assert {s.trace_id.hex() for s in spans} == {loop.trace_id}
    by_id = {s.span_id: s for s in spans}
    wait = next(s for s in spans if s.name == "approval.wait")
    assert by_id[wait.parent_span_id].name == "shell"
