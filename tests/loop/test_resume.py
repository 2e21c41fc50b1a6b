"""Resume: continuing a record (also one another process wrote), the dangling-call repair, fail closed."""

from __future__ import annotations

import json

import pytest
from steerable_agent_runtime import (
    InMemoryStorage,
    RecordFormatError,
    SqliteStorage,
    UsageError,
    resume_transcript,
)
from steerable_agent_runtime.llm import ScriptedProvider
from steerable_agent_runtime.loop import INTERRUPTED_ERROR, CoreLoop, repair_dangling
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import digest_files, plant_history_row, run
from tests.loop.kit import USER, completion, drain, make_router, run_loop

CALLS = [{"id": "a", "name": "read_note", "arguments": {"name": "x"}},
         {"id": "b", "name": "write_note", "arguments": {"name": "x", "text": "t"}}]


def item(message: dict) -> dict:
    return {"type": "item", "message": message}


def test_resume_continues_from_the_record_with_new_messages(tmp_path):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run_loop(CoreLoop(ScriptedProvider(["first answer"]), storage=store), USER)
    run(store.close())
    store = SqliteStorage(db)  # a fresh process's view of the same file
    provider = ScriptedProvider(["second answer"])
    events = run(drain(CoreLoop(provider, storage=store).resume("c1", [{"role": "user", "content": "and then?"}])))
    assert completion(events)["status"] == "completed"
    assert [m.content for m in provider.requests[0].messages] == ["go", "first answer", "and then?"]
    assert [m.content for m in run(resume_transcript(store, "c1"))] == ["go", "first answer", "and then?",
                                                                        "second answer"]
    run(store.close())


def test_resume_repairs_a_dangling_call_and_appends_the_repair_to_the_record():
    store = InMemoryStorage()
    run(store.append_history("c1", [item({"role": "user", "content": "go"}),
                                    item({"role": "assistant", "toolCalls": CALLS}),
                                    item({"role": "tool", "toolCallId": "a", "name": "read_note",
                                          "content": '{"success":true,"data":1}'})]))
    router, log = make_router()
    provider = ScriptedProvider(["checked"])
    run(drain(CoreLoop(provider, router, storage=store).resume("c1")))
    sent = provider.requests[0].messages
    assert [m.tool_call_id for m in sent if m.role == "tool"] == ["a", "b"]
    repair = json.loads(sent[-1].content)
    assert repair["success"] is False and INTERRUPTED_ERROR in repair["error"] and "'write_note'" in repair["error"]
    assert log == []  # the interrupted call is not re-run
    entries = run(store.list_history("c1"))
    assert [e["type"] for e in entries] == ["item"] * 5  # repair and answer appended as items
    assert run(resume_transcript(store, "c1"))[:4] == sent


def test_repair_in_the_middle_of_a_record_is_written_as_a_seed():
    transcript = [LLMMessage(role="user", content="go"), LLMMessage(role="assistant", tool_calls=CALLS[:1]),
                  LLMMessage(role="user", content="hello?")]
    repaired, append_only = repair_dangling(transcript)
    assert not append_only and [m.role for m in repaired] == ["user", "assistant", "tool", "user"]
    store = InMemoryStorage()
    run(store.append_history("c1", [item(m.to_wire()) for m in transcript]))
    provider = ScriptedProvider(["fine"])
    run(drain(CoreLoop(provider, storage=store).resume("c1")))
    assert provider.requests[0].messages == repaired
    assert [e["type"] for e in run(store.list_history("c1"))] == ["item", "item", "item", "seed", "item"]



def test_resume_repairs_a_dangling_call_whose_id_an_earlier_round_used_too():
    # An OpenAI-compatible server that sends no call ids gets call_0, call_1, ... per response
    # (openai_compat), so ids repeat across rounds: the earlier round's result answers the
    # earlier call only, and the later call, cut off by the crash, is still repaired.
    first = {"id": "call_0", "name": "read_note", "arguments": {"name": "x"}}
    second = {"id": "call_0", "name": "read_note", "arguments": {"name": "y"}}
    store = InMemoryStorage()
    run(store.append_history("c1", [item({"role": "user", "content": "go"}),
                                    item({"role": "assistant", "toolCalls": [first]}),
                                    item({"role": "tool", "toolCallId": "call_0", "name": "read_note",
                                          "content": '{"success":true,"data":1}'}),
                                    item({"role": "assistant", "toolCalls": [second]})]))
    router, log = make_router()
    provider = ScriptedProvider(["checked"])
    run(drain(CoreLoop(provider, router, storage=store).resume("c1")))
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "tool"]
    assert INTERRUPTED_ERROR in json.loads(sent[-1].content)["error"] and log == []
    assert run(resume_transcript(store, "c1"))[:5] == sent
    # and a call answered later by its own result (after an unanswered twin) is not repaired twice
    repaired, append_only = repair_dangling([LLMMessage(role="user", content="go"),
                                             LLMMessage(role="assistant", tool_calls=[first]),
                                             LLMMessage(role="user", content="hello?"),
                                             LLMMessage(role="assistant", tool_calls=[second]),
                                             LLMMessage(role="tool", tool_call_id="call_0", content="{}")])
    assert not append_only and [m.role for m in repaired] == ["user", "assistant", "tool", "user", "assistant", "tool"]
    assert INTERRUPTED_ERROR in json.loads(repaired[2].content)["error"] and repaired[-1].content == "{}"

def test_resume_of_an_empty_record_without_messages_is_a_usage_error():
    loop = CoreLoop(ScriptedProvider([]), storage=InMemoryStorage())
    with pytest.raises(UsageError, match="nothing to resume"):
        run(drain(loop.resume("nope")))
    with pytest.raises(UsageError, match="needs a storage"):
        CoreLoop(ScriptedProvider([])).resume("c1")


def test_resume_of_a_record_from_a_newer_build_raises_and_changes_no_byte(tmp_path):
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run_loop(CoreLoop(ScriptedProvider(["old build answer"]), storage=store), USER)
    run(store.close())
    raw = ('{"v":3,"type":"item","seq":3,"at":"2026-01-01T00:00:00.000000Z",'
           '"message":{"role":"user","content":"x"},"parts":[]}')
    plant_history_row(db, "c1", 3, 3, raw, checkpoint=True)
    run(SqliteStorage(db).close())
    before = digest_files(tmp_path)
    store = SqliteStorage(db)
    provider = ScriptedProvider(["must not be asked"])
    loop = CoreLoop(provider, storage=store)
    with pytest.raises(RecordFormatError) as err:
        run(drain(loop.resume("c1", [{"role": "user", "content": "continue"}])))
    assert "newer build (v3" in str(err.value) and "upgrade the app" in str(err.value)
    assert provider.requests == [] and not loop.running
    with pytest.raises(RecordFormatError):  # run() over the same record refuses the same way
        run(drain(loop.run(USER, chat_id="c1")))
    run(store.close())
    assert digest_files(tmp_path) == before


def test_the_repair_of_a_call_in_openai_form_names_its_tool():
    call = {"id": "a", "type": "function", "function": {"name": "write_note", "arguments": '{"name": "x"}'}}
    repaired, append_only = repair_dangling([LLMMessage(role="user", content="go"),
                                             LLMMessage(role="assistant", tool_calls=[call])])
    assert append_only and repaired[-1].name == "write_note" and repaired[-1].tool_call_id == "a"
    assert "'write_note'" in json.loads(repaired[-1].content)["error"]


def test_resume_with_the_hosts_own_result_for_a_dangling_call_sends_that_result_alone():
    # After a crash the host may know what the interrupted call did and pass its result in
    # resume's messages. The call then has that answer; an "interrupted" result beside it gave
    # the call two results, which providers refuse (Anthropic: one tool_result per tool_use).
    store = InMemoryStorage()
    run(store.append_history("c1", [item({"role": "user", "content": "go"}),
                                    item({"role": "assistant", "toolCalls": CALLS}),
                                    item({"role": "tool", "toolCallId": "a", "name": "read_note",
                                          "content": '{"success":true,"data":1}'})]))
    provider = ScriptedProvider(["noted"])
    host_result = {"role": "tool", "toolCallId": "b", "name": "write_note", "content": '{"success":true,"data":"ok"}'}
    events = run(drain(CoreLoop(provider, storage=store).resume("c1", [host_result])))
    assert completion(events)["status"] == "completed"
    sent = provider.requests[0].messages
    assert [(m.tool_call_id, m.content) for m in sent if m.role == "tool"] == [
        ("a", '{"success":true,"data":1}'), ("b", '{"success":true,"data":"ok"}')]
    assert run(resume_transcript(store, "c1"))[:4] == sent
