"""The record writer's synchronous flush (RecordWriter.flush_now -> InMemoryStorage.append_items_now)
stores what the awaited flush (append_history of ``{"type": "item", "message": m}`` entries) stores.

- ``history_append.snapshot_text(item_snapshot(m, ...))`` is the text prepare_append stores for
  the same entry, or the snapshot is None (then the careful path decides): generated messages, and
  messages whose fields were reassigned to values validation refuses.
- ``append_items_now`` appends exactly the texts append_history would, all or nothing, and what
  it stored does not change when the caller later mutates the message.
- A whole loop run records the same entries (apart from the times) with and without the
  synchronous path, and a lone surrogate from the model still takes the cleaning path.
"""

from __future__ import annotations

import asyncio
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st
from steerable_agent_runtime import InMemoryStorage, LLMMessage, RecordFormatError, resume_transcript
from steerable_agent_runtime.history_append import item_snapshot, prepare_append, snapshot_text
from steerable_agent_runtime.llm import ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.loop.record import RecordWriter
from steerable_agent_runtime.models import utc_now
from steerable_agent_runtime.storage.memory import _text

from tests.helpers import run
from tests.loop.kit import USER, drain, make_router
from tests.storage.test_typed_items import _changed, _messages

AT = "2026-01-01T00:00:00.000000Z"


def _careful_data(message, seq, at=AT):
    """What prepare_append stores for the item holding ``message`` (the error type when it refuses)."""
    try:
        return prepare_append("r", [{"type": "item", "at": at, "message": message}], seq)[0].data
    except RecordFormatError:
        return RecordFormatError


def _check_snapshot(message, seq):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns when it serialises a reassigned field
        snapshot = item_snapshot(message, seq, AT)
        careful = _careful_data(message, seq)
    if snapshot is not None:  # a snapshot is written as the text the careful path stores
        assert snapshot_text(snapshot) == careful
        assert all(type(part) in (int, str, type(None)) for part in snapshot)  # immutable parts only
    return snapshot


@settings(max_examples=300, deadline=None)
@given(_messages(), st.integers(1, 2**63 - 1))
def test_a_snapshot_is_written_as_prepare_append_stores_the_entry(message, seq):
    snapshot = _check_snapshot(message, seq)
    fields = message.__dict__
    if type(fields["content"]) is not list and _careful_data(message, seq) is not RecordFormatError:
        assert snapshot is not None  # every message with str or no content that the careful path takes


@settings(max_examples=300, deadline=None)
@given(_changed(), st.integers(1, 100))
def test_a_snapshot_of_a_changed_message_is_what_prepare_append_stores_or_nothing(message, seq):
    _check_snapshot(message, seq)


def test_the_loops_messages_all_have_snapshots():
    """The loop's messages all take the fast path (None would send them to the careful one)."""
    for message in (LLMMessage(role="user", content="hi"),
                    LLMMessage(role="assistant", content="checking", tool_calls=[
                        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]),
                    LLMMessage(role="assistant", tool_calls=[{"id": "c1", "name": "f", "arguments": {"a": [1, None]}}]),
                    LLMMessage(role="tool", tool_call_id="c1", name="f", content='{"ok": true}'),
                    LLMMessage(role="assistant", content="")):
        assert snapshot_text(item_snapshot(message, 3, AT)) == _careful_data(message, 3)
    parts = LLMMessage(role="user", content=[{"type": "text", "text": "hi"}])
    assert item_snapshot(parts, 3, AT) is None  # content parts: the careful path
    from steerable_agent_runtime.loop.messages import assistant_message, tool_message
    for message in (tool_message("c1", "f", '{"ok": true}'), assistant_message("x"),
                    assistant_message(None, [{"id": "c1", "name": "f", "arguments": {}}])):  # built by the loop
        assert snapshot_text(item_snapshot(message, 3, AT)) == _careful_data(message, 3)


def test_a_message_whose_fields_were_moved_or_changed_gets_the_careful_paths_text_or_no_snapshot():
    """A __dict__ with the fields in another order, a sixth key or one missing: the snapshot still
    writes what the careful path stores, or there is none."""
    reordered = LLMMessage(role="tool", tool_call_id="c1", name="f", content="ok")
    fields = dict(reordered.__dict__)
    reordered.__dict__.clear()
    reordered.__dict__.update(reversed(list(fields.items())))  # the same fields, in another order
    assert snapshot_text(_check_snapshot(reordered, 3)) == _careful_data(LLMMessage(
        role="tool", tool_call_id="c1", name="f", content="ok"), 3)
    extra = LLMMessage(role="user", content="hi")
    extra.__dict__["note"] = "x"  # a sixth key
    assert _check_snapshot(extra, 3) is None
    missing = LLMMessage(role="user", content="hi")
    del missing.__dict__["name"]
    assert _check_snapshot(missing, 3) is None


_rounds = st.lists(st.lists(st.one_of(_messages(), _changed()), min_size=1, max_size=3), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(_rounds)
def test_append_items_now_stores_what_append_history_stores(rounds):
    """Each round through append_items_now (append_history when it declines) on one storage, through
    append_history of wire dicts with the same stamps on the other: the same record, entry for entry."""
    async def go():
        fast, careful = InMemoryStorage(), InMemoryStorage()
        for messages in rounds:
            before = len(fast._history.get("r", []))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                taken = fast.append_items_now("r", messages)
                if not taken:
                    assert len(fast._history.get("r", [])) == before  # all or nothing
                    try:
                        await fast.append_history("r", [{"type": "item", "message": m} for m in messages])
                    except RecordFormatError:
                        pass
            added = await fast.list_history("r", after_seq=before)
            if not added:  # refused by both: the careful side must refuse the same batch
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        wires = [{"type": "item", "at": AT, "message": m.to_wire()} for m in messages]
                    await careful.append_history("r", wires)
                except Exception:  # noqa: BLE001 - a RecordFormatError, or to_wire refusing a non-JSON value
                    continue
                raise AssertionError("the careful path took a batch the fast side refused")
            if taken:
                assert len({e["at"] for e in added}) == 1  # one atomic append: one stamp
            await careful.append_history("r", [{"type": "item", "at": e["at"], "message": e["message"]}
                                               for e in added])
        assert [_text(e) for e in fast._history.get("r", [])] == careful._history.get("r", [])
        assert await fast.list_history("r") == await careful.list_history("r")

    run(go())


def test_append_items_now_keeps_what_it_stored_when_the_caller_mutates_the_message():
    async def go():
        storage = InMemoryStorage()
        call = {"id": "c1", "name": "read_note", "arguments": {"name": "x"}}
        message = LLMMessage(role="assistant", content="checking", tool_calls=[call])
        tool = LLMMessage(role="tool", tool_call_id="c1", name="read_note", content="a note")
        assert storage.append_items_now("r", [message, tool])
        before = await storage.list_history("r")
        message.content = "changed"
        call["arguments"]["name"] = "y"
        message.tool_calls.append({"id": "c2", "name": "other", "arguments": {}})
        tool.content = "another"
        after = await storage.list_history("r")
        assert after == before
        assert after[0]["message"]["toolCalls"] == [{"id": "c1", "name": "read_note", "arguments": {"name": "x"}}]
        assert [e["seq"] for e in after] == [1, 2]

    run(go())


def test_append_items_now_declines_what_it_cannot_write_and_appends_nothing():
    storage = InMemoryStorage()
    good = LLMMessage(role="user", content="hi")

    class Sub(LLMMessage):
        pass

    for bad in (LLMMessage(role="user", content="a\ud800b"), Sub(role="user", content="hi"), {"role": "user"},
                LLMMessage(role="user", content=[{"type": "text", "text": "hi"}])):
        assert storage.append_items_now("r", [good, bad]) is False
        assert "r" not in storage._history
    assert storage.append_items_now("r", [good]) is True
    assert len(storage._history["r"]) == 1


class AwaitedOnly(InMemoryStorage):
    """InMemoryStorage without the synchronous append: the writer awaits append_history."""

    append_items_now = None


def _turn(storage, script):
    router, _ = make_router()
    loop = CoreLoop(ScriptedProvider(list(script)), router, storage=storage)
    return asyncio.run(drain(loop.run(USER, chat_id="c1")))


def _without_times(entries):
    return [{k: v for k, v in entry.items() if k != "at"} for entry in entries]


def test_a_loop_run_records_the_same_entries_with_and_without_the_synchronous_append():
    script = [ScriptedResponse(text="looking", tool_calls=[{"id": "a", "name": "read_note", "arguments": {"name": "x"}}]),
              ScriptedResponse(tool_calls=[{"id": "b", "name": "read_note", "arguments": {"name": "y"}},
                                           {"id": "c", "name": "read_note", "arguments": {"name": "z"}}]),
              ScriptedResponse(text="done")]
    fast, awaited = InMemoryStorage(), AwaitedOnly()
    _turn(fast, script)
    _turn(awaited, script)
    fast_entries, awaited_entries = run(fast.list_history("c1")), run(awaited.list_history("c1"))
    assert len(fast_entries) == 1 + 2 + 3 + 1  # the user, each reply and each result as its own item
    assert _without_times(fast_entries) == _without_times(awaited_entries)
    assert run(resume_transcript(fast, "c1")) == run(resume_transcript(awaited, "c1"))


def test_a_lone_surrogate_from_the_model_still_takes_the_cleaning_path():
    storage = InMemoryStorage()
    events = _turn(storage, [ScriptedResponse(text="bad \ud800 text")])
    assert events[-1].data["status"] == "completed"
    entries = run(storage.list_history("c1"))
    assert entries[-1]["message"] == {"role": "assistant", "content": "bad \ufffd text"}


def test_flush_now_declines_without_the_synchronous_append_and_the_awaited_flush_appends():
    async def go():
        storage = AwaitedOnly()
        writer = RecordWriter(storage, "r")
        transcript = [LLMMessage(role="user", content="hi")]
        assert writer.flush_now(transcript) is False and writer.flushed == 0
        assert await writer.flush(transcript) == 1
        assert writer.flush_now(transcript) is True  # nothing left to flush
        fast = RecordWriter(InMemoryStorage(), "r")
        assert fast.flush_now(transcript) is True and fast.flushed == 1
        assert fast.flush_now(transcript) is True and len(fast.storage._history["r"]) == 1  # once per message
        assert (await fast.storage.list_history("r"))[0]["at"] <= utc_now()

    run(go())


def test_append_items_now_with_expect_seq_appends_only_at_that_seq():
    storage = InMemoryStorage()
    hi, there = LLMMessage(role="user", content="hi"), LLMMessage(role="assistant", content="there")
    assert storage.append_items_now("r", [hi], expect_seq=2) is False and "r" not in storage._history
    assert storage.append_items_now("r", [hi], expect_seq=1) is True
    assert storage.append_items_now("r", [there], expect_seq=1) is False
    assert storage.append_items_now("r", [there], expect_seq=2) is True
    assert [e["seq"] for e in run(storage.list_history("r"))] == [1, 2]


def test_start_lines_up_new_and_existing_records_as_the_awaited_path_does():
    """A new record takes the synchronous first append; a record holding a prefix of the run's
    transcript gets the rest as items, any other record a seed: on both storages alike."""
    async def go(storage):
        first = [LLMMessage(role="user", content="one")]
        longer = [*first, LLMMessage(role="assistant", content="two"), LLMMessage(role="user", content="three")]
        await RecordWriter(storage, "new").start(first)
        await RecordWriter(storage, "grow").start(first)
        await RecordWriter(storage, "grow").start(longer)  # the record is a prefix: the rest as items
        await RecordWriter(storage, "other").start(longer)
        await RecordWriter(storage, "other").start(first)  # not a prefix: a seed
        return {rid: (_without_times(await storage.list_history(rid)), await resume_transcript(storage, rid))
                for rid in ("new", "grow", "other")}

    fast, awaited = run(go(InMemoryStorage())), run(go(AwaitedOnly()))
    assert fast == awaited
    assert [e["type"] for e in fast["grow"][0]] == ["item"] * 3
    assert [e["type"] for e in fast["other"][0]] == ["item"] * 3 + ["seed"]
    assert [m.content for m in fast["other"][1]] == ["one"]


class Observed(InMemoryStorage):
    """A host's subclass that watches what is appended (a spy, a mirror, an audit log)."""

    def __init__(self) -> None:
        super().__init__()
        self.appended: list[dict] = []

    async def append_history(self, record_id, entries, **kwargs):
        entries = list(entries)
        self.appended.extend(entries)
        return await super().append_history(record_id, entries, **kwargs)


def test_a_subclass_that_overrides_append_history_sees_every_append_of_the_loop():
    script = [ScriptedResponse(text="looking", tool_calls=[{"id": "a", "name": "read_note", "arguments": {"name": "x"}}]),
              ScriptedResponse(text="done")]
    storage = Observed()
    _turn(storage, script)
    stored = run(storage.list_history("c1"))
    assert len(stored) == 4  # the user, the reply calling the tool, its result, the answer
    assert len(storage.appended) == len(stored)  # no flush went around the override


@given(st.lists(st.integers(0, 4_102_444_800 * 10**9 - 1) | st.integers(1_764_600_000 * 10**9, 1_764_600_002 * 10**9),
                min_size=1, max_size=8))
def test_stamp_text_of_a_clock_reading_is_what_utc_now_gives_for_it(readings):
    """append_items_now keeps the stamp's clock reading; models.stamp_text writes it when read: the
    text utc_now() returns for that reading (any order of readings, the cached second reused or not)."""
    from steerable_agent_runtime import models

    saved = models._time_ns
    try:
        for ns in readings:
            models._time_ns = lambda ns=ns: ns
            assert models.stamp_text(ns) == models.utc_now(), ns
            assert models.stamp_text(ns) == models.stamp_text(ns)
    finally:
        models._time_ns = saved


@settings(max_examples=200, deadline=None)
@given(_messages(), st.integers(1, 2**40), st.integers(0, 4_102_444_800 * 10**9 - 1))
def test_a_snapshot_stamped_with_a_clock_reading_is_written_with_that_readings_stamp(message, seq, ns):
    from steerable_agent_runtime.models import stamp_text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        snapshot = item_snapshot(message, seq, ns)
        careful = _careful_data(message, seq, stamp_text(ns))
    if snapshot is not None:
        assert snapshot_text(snapshot) == careful
        assert all(type(part) in (int, str, type(None)) for part in snapshot)


def test_append_items_now_stamps_the_time_of_the_append():
    async def go():
        storage = InMemoryStorage()
        before = utc_now()
        assert storage.append_items_now("r", [LLMMessage(role="user", content="hi"),
                                              LLMMessage(role="assistant", content="there")])
        after = utc_now()
        entries = await storage.list_history("r")
        assert len({e["at"] for e in entries}) == 1
        assert before <= entries[0]["at"] <= after
        assert entries == await storage.list_history("r")  # read twice: the same text

    run(go())
