"""Resume refuses a record holding a tool result that answers no call (an orphan tool result).

A buggy host or a foreign build can append such an entry; every provider refuses the transcript
it gives (OpenAI: a ``tool`` message must answer a preceding ``tool_calls``; Anthropic: each
``tool_result`` needs its ``tool_use``). Resume fails closed like it does on a newer-build entry:
RecordFormatError naming the record, the seq of the entry holding the result and the remedy, and
the file stays byte-identical. ``resume_transcript`` still reads the record as stored (the remedy
starts from it), and the remedy named in the hint works.
"""

from __future__ import annotations

import pytest
from steerable_agent_runtime import RecordFormatError, SqliteStorage, UsageError, resume_transcript
from steerable_agent_runtime.llm import ScriptedProvider
from steerable_agent_runtime.loop import CoreLoop

from tests.helpers import digest_files, item, run
from tests.loop.kit import completion, drain

CALL = {"id": "a", "name": "read_note", "arguments": {"name": "x"}}
ORPHAN = {"type": "item", "message": {"role": "tool", "toolCallId": "ghost", "name": "read_note",
                                      "content": '{"success":true,"data":1}'}}


def _answered_call() -> list[dict]:
    return [{"type": "item", "message": {"role": "assistant", "toolCalls": [CALL]}},
            {"type": "item", "message": {"role": "tool", "toolCallId": "a", "name": "read_note",
                                         "content": '{"success":true,"data":0}'}}]


RECORDS = {
    # an item after sound entries: the orphan is seq 5
    "item": ([item("go"), *_answered_call(), item("ok", role="assistant"), ORPHAN, item("and?")], 5),
    # a seed a foreign build wrote with the orphan among its messages: the seed's seq
    "seed": ([item("old"), {"type": "seed", "messages": [{"role": "user", "content": "go"}, ORPHAN["message"]]},
              item("and?")], 2),
    # a boundary whose replacement kept the result but not its call (the call is before it)
    "boundary": ([item("go"), *_answered_call(),
                  {"type": "compaction_boundary", "trigger": "pressure", "preTokens": 900, "postTokens": 90,
                   "replacement": [{"role": "user", "content": "go"},
                                   {"role": "tool", "toolCallId": "a", "name": "read_note", "content": "0"}]},
                  item("and?")], 4),
}


def _store_with(tmp_path, entries) -> SqliteStorage:
    db = tmp_path / "sessions.db"
    store = SqliteStorage(db)
    run(store.append_history("c1", entries))
    run(store.close())
    return SqliteStorage(db)


@pytest.mark.parametrize("shape", sorted(RECORDS))
def test_resume_of_a_record_with_an_orphan_tool_result_raises_and_changes_no_byte(tmp_path, shape):
    entries, seq = RECORDS[shape]
    store = _store_with(tmp_path, entries)
    stored = run(resume_transcript(store, "c1"))  # the reader still reads the record as stored
    assert any(m.role == "tool" for m in stored)
    run(store.close())
    before = digest_files(tmp_path)
    store = SqliteStorage(tmp_path / "sessions.db")
    provider = ScriptedProvider(["must not be asked"])
    loop = CoreLoop(provider, storage=store)
    with pytest.raises(RecordFormatError) as err:
        run(drain(loop.resume("c1", [{"role": "user", "content": "continue"}])))
    assert err.value.record_id == "c1" and err.value.seq == seq
    assert f"record 'c1' seq {seq}" in str(err.value) and "no earlier assistant message" in str(err.value)
    assert "run(messages, chat_id=" in err.value.hint and "not modified" in err.value.hint
    assert provider.requests == [] and not loop.running
    assert run(resume_transcript(store, "c1")) == stored
    run(store.close())
    assert digest_files(tmp_path) == before


def test_the_remedy_in_the_hint_continues_the_chat(tmp_path):
    entries, _ = RECORDS["item"]
    store = _store_with(tmp_path, entries)
    stored = run(resume_transcript(store, "c1"))
    with pytest.raises(UsageError, match="no earlier assistant message"):  # run() refuses it as given
        run(drain(CoreLoop(ScriptedProvider([]), storage=store).run(stored, chat_id="c1")))
    kept = [m for m in stored if not (m.role == "tool" and m.tool_call_id == "ghost")]
    provider = ScriptedProvider(["fixed"])
    assert completion(run(drain(CoreLoop(provider, storage=store).run(kept, chat_id="c1"))))["status"] == "completed"
    assert provider.requests[0].messages == kept
    provider = ScriptedProvider(["resumed"])
    events = run(drain(CoreLoop(provider, storage=store).resume("c1", [{"role": "user", "content": "more"}])))
    assert completion(events)["status"] == "completed"
    assert [m.content for m in provider.requests[0].messages][-2:] == ["fixed", "more"]
    run(store.close())
