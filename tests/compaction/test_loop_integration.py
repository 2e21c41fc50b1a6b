"""CompactionHooks and the notes states inside a real CoreLoop, with a real SqliteStorage record.

The model is a ScriptedProvider (the in-process provider the runtime ships); the tools are a real
ToolRouter; the record is read back through resume_transcript and steerable-maint history.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from click.testing import CliRunner
from steerable_agent_runtime import SqliteStorage, resume_transcript
from steerable_agent_runtime.compaction import (
    SUMMARY_PREFIX,
    CompactionHooks,
    estimate_tokens,
    is_folded,
)
from steerable_agent_runtime.context import DiscoveredNotesState, FilesystemState
from steerable_agent_runtime.history import transcript_from
from steerable_agent_runtime.llm import LLMError, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.llm.cancel import CancelSignal
from steerable_agent_runtime.loop import (
    ChainHooks,
    CoreLoop,
    LoopContext,
    LoopHooks,
    NoopHooks,
    RetryHooks,
)
from steerable_agent_runtime.tools import ToolRouter, tool

from steerable_maint.cli import main as maint

NOTICE = "[system notice] Context thrashing:"
TASK = [{"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the source files one by one and summarise them."}]


def file_router(size: int = 4000) -> ToolRouter:
    router = ToolRouter()

    @tool(router=router, description="Read a source file", mode="read")
    async def read_file(path: str) -> str:
        return f"# {path}\n" + "value = compute(1, 2, 3)\n" * (size // 25)

    return router


def reads(n: int, final: str = "All files read.") -> list[ScriptedResponse]:
    """n rounds that each read one more file, then a final answer."""
    script = [ScriptedResponse(tool_calls=[{"id": f"r{k}", "name": "read_file", "arguments": {"path": f"f{k}.py"}}])
              for k in range(n)]
    return script + [ScriptedResponse(text=final)]


async def drive(loop: CoreLoop, messages=TASK, chat_id: str = "c1"):
    return [event async for event in loop.run(messages, chat_id=chat_id)]


def boundaries(store: SqliteStorage, record: str = "c1") -> list[dict]:
    entries = asyncio.run(store.list_history(record))
    return [e for e in entries if e["type"] == "compaction_boundary"]


def rewrites(events) -> list[dict]:
    return [e.data for e in events if e.kind == "hook_action" and e.data["action"] in ("rewrite", "compact")]


def test_pressure_compaction_in_the_loop_writes_one_boundary_per_rewrite_and_resume_continues_from_it(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        hooks = CompactionHooks(6000)
        provider = ScriptedProvider(reads(8))
        loop = CoreLoop(provider, file_router(), hooks=hooks, storage=store)
        events = asyncio.run(drive(loop))
        assert events[-1].data["status"] == "completed"
        done = rewrites(events)
        assert done and all(d["trigger"] == "pressure" and d["postTokens"] < d["preTokens"] for d in done)
        stored = boundaries(store)
        assert [(b["trigger"], b["preTokens"], b["postTokens"]) for b in stored] == \
            [(d["trigger"], d["preTokens"], d["postTokens"]) for d in done]
        assert hooks.compactions == len(done)
        # The request after the first rewrite was sent exactly the replacement plus what came after.
        resumed = asyncio.run(resume_transcript(store, "c1"))
        assert resumed == loop.transcript
        replacement = stored[-1]["replacement"]
        assert [m.to_wire() for m in resumed[:len(replacement)]] == replacement
        assert any(is_folded(m) for m in resumed)
        # Pressure is the last request's reported prompt tokens + the estimate of what came after it.
        first = next(i for i, e in enumerate(events) if e.kind == "hook_action" and e.data["action"] == "rewrite")
        last_request = provider.requests[sum(e.kind == "llm_request" for e in events[:first]) - 1].messages
        entries = asyncio.run(store.list_history("c1"))
        before = transcript_from([e for e in entries if e["seq"] < stored[0]["seq"]])
        reported = max(1, sum(len(m.model_dump_json()) for m in last_request) // 4)  # what ScriptedProvider reports
        assert done[0]["preTokens"] == reported + estimate_tokens(before[len(last_request):])
        assert done[0]["preTokens"] != estimate_tokens(before)
    finally:
        asyncio.run(store.close())


def test_maint_history_shows_each_boundary_with_its_trigger_and_figures(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        events = asyncio.run(drive(CoreLoop(ScriptedProvider(reads(8)), file_router(), hooks=CompactionHooks(6000),
                                            storage=store)))
        figures = [(d["preTokens"], d["postTokens"]) for d in rewrites(events)]
    finally:
        asyncio.run(store.close())
    result = CliRunner().invoke(maint, ["history", str(tmp_path / "sessions.db"), "c1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "compaction_boundary" in line]
    assert len(lines) == len(figures) > 0
    for line, (pre, post) in zip(lines, figures):
        assert f"pressure {pre} -> {post} tokens" in line
    as_json = CliRunner().invoke(maint, ["history", str(tmp_path / "sessions.db"), "c1", "--json"])
    entries = [e["entry"] for e in json.loads(as_json.output)["entries"] if e["type"] == "compaction_boundary"]
    assert [(e["preTokens"], e["postTokens"]) for e in entries] == figures


class Wrapper(LoopHooks):
    """A host's own hook that wraps another by delegating every method (a common pattern)."""

    def __init__(self, inner: LoopHooks) -> None:
        self.inner = inner

    async def pre_step(self, transcript, ctx):
        return await self.inner.pre_step(transcript, ctx)

    async def compact_now(self, transcript, ctx):
        return await self.inner.compact_now(transcript, ctx)


def test_request_compact_reaches_compact_now_through_chained_and_wrapped_hooks(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        compaction = CompactionHooks(1_000_000, summarizer=ScriptedProvider(["Files f0-f3 were read."]))
        hooks = ChainHooks(RetryHooks(), Wrapper(ChainHooks(NoopHooks(), compaction)))
        provider = ScriptedProvider(reads(4) + reads(0, "compacted answer"))
        loop = CoreLoop(provider, file_router(), hooks=hooks, storage=store)
        asyncio.run(drive(loop))
        before = list(loop.transcript)
        loop.request_compact()  # the sidecar's agent.chat.compact path
        events = asyncio.run(drive(loop, [*[m.to_wire() for m in before], {"role": "user", "content": "and now?"}]))
        done = rewrites(events)
        assert [d["action"] for d in done] == ["compact"] and done[0]["trigger"] == "manual"
        assert compaction.compactions == 1
        sent = provider.requests[-1].messages
        assert len(sent) < len(before) and sent[2].content.startswith(SUMMARY_PREFIX)
        assert sent[2].content.endswith("Files f0-f3 were read.")
        [boundary] = boundaries(store)
        assert boundary["trigger"] == "manual" and boundary["replacement"] == [m.to_wire() for m in sent]
    finally:
        asyncio.run(store.close())


def test_a_cancel_while_the_summarizer_runs_ends_its_call_and_the_turn():
    """The summarizer hangs for an hour; loop.cancel() from another thread ends its call (the
    turn's CancelSignal reaches it through LoopContext.cancel) and the turn ends cancelled. The
    wait is bounded at 60 s: only the signal can end it in time."""
    summarizer = ScriptedProvider([ScriptedResponse(text="never sent", delay_s=3600)])
    compaction = CompactionHooks(1_000_000, summarizer=summarizer)
    provider = ScriptedProvider(reads(4) + reads(0, "not reached"))
    loop = CoreLoop(provider, file_router(), hooks=ChainHooks(compaction))
    asyncio.run(drive(loop))
    before = list(loop.transcript)
    loop.request_compact()

    async def second_turn():
        async def cancel_when_asked():
            while not summarizer.requests:
                await asyncio.sleep(0.01)
            threading.Thread(target=loop.cancel).start()  # from another thread, as a host would

        canceller = asyncio.create_task(cancel_when_asked())
        events = await drive(loop, [*[m.to_wire() for m in before], {"role": "user", "content": "and now?"}])
        await canceller
        return events

    events = asyncio.run(asyncio.wait_for(second_turn(), 60))
    [done] = [e for e in events if e.kind == "completion"]
    assert done.data["status"] == "cancelled"
    [asked] = summarizer.requests
    assert isinstance(asked.options.get("cancel"), CancelSignal) and asked.options["cancel"].is_set
    # the model's stream, if the loop opens it, starts with the signal set: nothing is sent
    assert not [e for e in events if e.kind == "content_delta"]
    assert all(m.content != "not reached" for m in loop.transcript)


def test_request_compact_on_a_minimal_transcript_is_a_reported_no_op():
    compaction = CompactionHooks(1_000_000)
    loop = CoreLoop(ScriptedProvider(["hi"]), hooks=ChainHooks(compaction))
    loop.request_compact()
    events = asyncio.run(drive(loop, [{"role": "user", "content": "hello"}]))
    actions = [e.data["action"] for e in events if e.kind == "hook_action"]
    assert actions == ["compact_noop"] and compaction.compactions == 0


def overflow(n: int = 1) -> list[ScriptedResponse]:
    error = LLMError("This model's maximum context length is 8192 tokens", kind="context_overflow",
                     provider="scripted", status_code=400)
    return [ScriptedResponse(error=error) for _ in range(n)]


def long_chat() -> list[dict]:
    chat = list(TASK)
    for k in range(12):
        chat.append({"role": "assistant" if k % 2 == 0 else "user", "content": f"turn {k} " + "z" * 3000})
    return chat + [{"role": "user", "content": "go on"}]


def test_an_overflow_error_compacts_once_and_the_retry_succeeds(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        compaction = CompactionHooks(1_000_000)  # pressure never fires: only the overflow path acts
        provider = ScriptedProvider(overflow(1) + ["done after compaction"])
        loop = CoreLoop(provider, hooks=ChainHooks(RetryHooks(), compaction), storage=store)
        events = asyncio.run(drive(loop, long_chat()))
        assert events[-1].data["status"] == "completed"
        assert [d["trigger"] for d in rewrites(events)] == ["overflow"] and compaction.overflow_recoveries == 1
        assert len(provider.requests) == 2 and len(provider.requests[1].messages) < len(provider.requests[0].messages)
        [boundary] = boundaries(store)
        assert boundary["trigger"] == "overflow"
        resumed = asyncio.run(resume_transcript(store, "c1"))
        assert [m.to_wire() for m in resumed] == boundary["replacement"] + [{"role": "assistant",
                                                                              "content": "done after compaction"}]
    finally:
        asyncio.run(store.close())


def test_overflow_recovers_at_most_twice_per_round_then_the_turn_fails_loud():
    compaction = CompactionHooks(1_000_000)
    provider = ScriptedProvider(overflow(3) + ["never reached"])
    loop = CoreLoop(provider, hooks=ChainHooks(RetryHooks(), compaction))
    events = asyncio.run(drive(loop, long_chat()))
    final = events[-1].data
    assert final["status"] == "failed" and "maximum context length" in final["reason"]
    assert [e.data.get("kind") for e in events if e.kind == "error"] == ["context_overflow"]
    assert compaction.overflow_recoveries == 2 and len(provider.requests) == 3 and provider.remaining == 1


def test_rapid_refill_in_the_loop_opens_the_circuit_with_the_reminder_in_transcript_and_record(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        compaction = CompactionHooks(4000)
        loop = CoreLoop(ScriptedProvider(reads(16)), file_router(), hooks=compaction, storage=store)
        events = asyncio.run(drive(loop))
        assert events[-1].data["status"] == "completed"
        assert compaction.circuit_open and compaction.circuit_reason == "rapid_refill"
        assert sum(str(m.content).startswith(NOTICE) for m in loop.transcript) == 1
        tripping = boundaries(store)[-1]
        assert tripping["replacement"][-1]["content"].startswith(NOTICE)
        assert compaction.compactions == len(boundaries(store)) == 4  # then the pressure path stopped
    finally:
        asyncio.run(store.close())


def test_notes_are_injected_once_per_run_and_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("STEERABLE_MANAGED_NOTES_PATH", raising=False)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "AGENTS.md").write_text("Run the tests with make test.")
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        notes = DiscoveredNotesState(tmp_path / "ws", workspace_root=tmp_path / "ws")
        loop = CoreLoop(ScriptedProvider(reads(2)), file_router(), hooks=ChainHooks(notes, CompactionHooks(100_000)),
                        storage=store)
        asyncio.run(drive(loop))
        items = [e["message"].get("content") for e in asyncio.run(store.list_history("c1")) if e["type"] == "item"]
        assert sum("Run the tests with make test." in str(c) for c in items) == 1
    finally:
        asyncio.run(store.close())


NOTES_RULE = "NEVER push to main."


def notes_file(tmp_path) -> FilesystemState:
    path = tmp_path / "NOTES.md"
    path.write_text("Project conventions: small commits, tests first. " * 10 + NOTES_RULE)
    return FilesystemState(path)


def notes_seen(request) -> int:
    return sum(str(m.content).count(NOTES_RULE) for m in request.messages)


async def _resume(loop: CoreLoop, text: str) -> list:
    return [e async for e in loop.resume("c1", [{"role": "user", "content": text}], chat_id="c1")]


def test_notes_survive_a_compaction_that_summarises_them_and_are_not_injected_twice(tmp_path):
    """The notes are injected once per run; a compaction summarising the middle they sit in keeps
    them, whole, right after the summary (the run would otherwise go on without them, since the
    next injection is the next run's): every request of the run holds them exactly once, a later
    run, finding them in the transcript, injects no second copy, and compacting again changes
    nothing."""
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        compaction = CompactionHooks(1_000_000)
        provider = ScriptedProvider(reads(4) + reads(3) + reads(1))
        loop = CoreLoop(provider, file_router(), hooks=ChainHooks(notes_file(tmp_path), compaction), storage=store)
        asyncio.run(drive(loop))
        loop.request_compact()
        start = len(provider.requests)
        events = asyncio.run(_resume(loop, "go on"))
        assert [d["trigger"] for d in rewrites(events)] == ["manual"]
        assert [notes_seen(r) for r in provider.requests[start:]] == [1] * 4
        sent = provider.requests[start].messages
        assert sent[2].content.startswith(SUMMARY_PREFIX) and NOTES_RULE in sent[3].content
        assert asyncio.run(resume_transcript(store, "c1")) == loop.transcript
        start = len(provider.requests)
        asyncio.run(_resume(loop, "and the last one"))
        assert [notes_seen(r) for r in provider.requests[start:]] == [1, 1]
        compacted = asyncio.run(compaction.compact_now(loop.transcript, LoopContext(chat_id="c1")))
        assert sum(NOTES_RULE in str(m.content) for m in compacted.messages) == 1
        assert asyncio.run(compaction.compact_now(compacted.messages, LoopContext(chat_id="c1"))) is None
    finally:
        asyncio.run(store.close())


@pytest.mark.parametrize("name", ["overflow", "pressure"])
def test_notes_survive_pressure_and_overflow_compactions(tmp_path, name):
    """The same for the automatic triggers: a first run leaves the notes early in the record, and
    the next run's overflow recovery, or its pressure compaction, summarises the middle they sit in."""
    compaction, script, tools = {
        "overflow": (CompactionHooks(1_000_000), overflow(1) + ["done"], None),
        "pressure": (CompactionHooks(9000, keep_last_messages=1), reads(1) + ["done"], file_router())}[name]
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        first = CoreLoop(ScriptedProvider(reads(4, final="All read. " + "z" * 30_000)), file_router(),
                         hooks=ChainHooks(notes_file(tmp_path)), storage=store)
        asyncio.run(drive(first))
        provider = ScriptedProvider(script)
        loop = CoreLoop(provider, tools, hooks=ChainHooks(notes_file(tmp_path), RetryHooks(), compaction),
                        storage=store)
        events = asyncio.run(_resume(loop, "go on"))
        assert events[-1].data["status"] == "completed"
        assert [d["trigger"] for d in rewrites(events)][:1] == [name]
        assert [notes_seen(r) for r in provider.requests] == [1] * len(provider.requests)
        assert any(str(m.content).startswith(SUMMARY_PREFIX) for m in provider.requests[-1].messages)
        assert asyncio.run(resume_transcript(store, "c1")) == loop.transcript
    finally:
        asyncio.run(store.close())


def test_one_oversized_last_tool_result_is_folded_by_overflow_recovery_not_a_chat_broken_for_good():
    # The newest tool result alone is too big for the window. Every recovery kept the newest
    # result readable (keep_last_tool_results, halved), so with a single result there was
    # "nothing left to compact": the turn failed, and every later turn on the record the same.
    # A recovery that would change nothing folds every readable result, the newest too.
    compaction = CompactionHooks(20_000)
    call = ScriptedResponse(tool_calls=[{"id": "big", "name": "read_file", "arguments": {"path": "dump.log"}}])
    provider = ScriptedProvider([call, *overflow(1), "Read it (in part)."])
    loop = CoreLoop(provider, file_router(size=200_000), hooks=ChainHooks(RetryHooks(), compaction))
    events = asyncio.run(drive(loop))
    assert events[-1].data["status"] == "completed", events[-1].data
    assert compaction.overflow_recoveries == 1
    retried = provider.requests[2].messages
    [result] = [m for m in retried if m.role == "tool"]
    assert is_folded(result) and len(str(result.content)) < 2_000
    assert estimate_tokens(retried) < 20_000
