"""The history record: versions, the upgrade seam, fail-closed parsing, resume."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from steerable_agent_runtime import (
    RECORD_FORMAT_VERSION,
    InMemoryStorage,
    LLMMessage,
    RecordFormatError,
    parse_entry,
    resume_transcript,
    upgrade_entry_dict,
)
from steerable_agent_runtime.history import HistoryEntry, is_plain_item
from steerable_agent_runtime.history_append import prepare_append
from tests.helpers import boundary, item, run, seed

V1_ITEM = {"type": "item", "seq": 4, "at": "2026-01-01T00:00:00.000000Z", "message": {"role": "user", "content": "hi"}}


def test_record_format_version_is_two():
    assert RECORD_FORMAT_VERSION == 2


def test_v1_to_v2_is_the_stamp_and_nothing_else():
    upgraded = upgrade_entry_dict(V1_ITEM)
    assert upgraded == {"v": 2, **V1_ITEM}
    assert "v" not in V1_ITEM  # never mutates its input


def test_v2_passes_through_unchanged():
    entry = {"v": 2, **V1_ITEM}
    assert upgrade_entry_dict(entry) == entry


def test_newer_version_fails_closed_naming_record_seq_version_and_remedy():
    with pytest.raises(RecordFormatError) as err:
        upgrade_entry_dict({**V1_ITEM, "v": 3}, record_id="chat-9")
    e = err.value
    assert (e.record_id, e.seq, e.version) == ("chat-9", 4, 3)
    assert "written by a newer build (v3; this build reads up to v2): upgrade the app; the record was not modified" in str(e)


@pytest.mark.parametrize("entry,words", [
    ({**V1_ITEM, "type": "tool_result_v3"}, "unknown entry type 'tool_result_v3'"),
    ({**V1_ITEM, "v": "2"}, "not a record version"),
    ({**V1_ITEM, "v": 0}, "not a record version"),
    (["not", "an", "object"], "not a JSON object"),
])
def test_unreadable_entries_fail_closed(entry, words):
    with pytest.raises(RecordFormatError, match=words):
        upgrade_entry_dict(entry, record_id="c")


def test_malformed_entry_names_the_field():
    bad = {"v": 2, "type": "compaction_boundary", "seq": 1, "at": "2026-01-01T00:00:00Z", "trigger": "sometimes",
           "preTokens": 1, "postTokens": 1, "replacement": []}
    with pytest.raises(RecordFormatError, match="trigger"):
        parse_entry(bad, record_id="c")


def texts(messages: list[LLMMessage]) -> list[str]:
    return [m.content for m in messages]


def test_resume_without_checkpoint_is_all_items():
    store = InMemoryStorage()
    run(store.append_history("c", [item("a"), item("b", "assistant")]))
    assert texts(run(resume_transcript(store, "c"))) == ["a", "b"]


def test_resume_starts_at_newest_boundary_or_seed():
    store = InMemoryStorage()
    run(store.append_history("c", [seed("s1"), item("a"), boundary("sum1"), item("b"), boundary("sum2", "kept"),
                                   item("c"), item("d")]))
    assert texts(run(resume_transcript(store, "c"))) == ["sum2", "kept", "c", "d"]
    run(store.append_history("c", [seed("fresh")]))
    assert texts(run(resume_transcript(store, "c"))) == ["fresh"]


def test_resume_of_unknown_record_is_empty():
    assert run(resume_transcript(InMemoryStorage(), "nope")) == []


def test_resume_pages_through_a_long_tail():
    store = InMemoryStorage()
    run(store.append_history("c", [boundary("start")] + [item(str(i)) for i in range(1000)]))
    got = texts(run(resume_transcript(store, "c", page_size=7)))
    assert got == ["start"] + [str(i) for i in range(1000)]


class CountingStorage:
    """Wraps a storage and records every history entry the caller read."""

    def __init__(self, inner):
        self.inner = inner
        self.seqs_read: list[int] = []

    async def list_history(self, record_id, **kw):
        page = await self.inner.list_history(record_id, **kw)
        self.seqs_read.extend(e["seq"] for e in page)
        return page

    async def history_checkpoint(self, record_id):
        return await self.inner.history_checkpoint(record_id)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_resume_reads_none_of_a_10000_entry_prefix(backend, tmp_path):
    from steerable_agent_runtime import SqliteStorage

    inner = InMemoryStorage() if backend == "memory" else SqliteStorage(tmp_path / "s.db", synchronous="NORMAL")
    prefix = [item(f"old {i}") for i in range(10_000)]
    run(inner.append_history("c", prefix))
    run(inner.append_history("c", [boundary("summary")] + [item(f"new {i}") for i in range(300)]))
    counting = CountingStorage(inner)
    got = run(resume_transcript(counting, "c", page_size=64))
    assert texts(got) == ["summary"] + [f"new {i}" for i in range(300)]
    assert min(counting.seqs_read) == 10_001  # the boundary; not one entry of the prefix
    assert len(counting.seqs_read) == 301
    run(inner.close())


# is_plain_item: the fast path for the commonest entry must never accept what validation refuses.
_near_timestamps = st.one_of(st.just("2026-01-01T00:00:00.000000Z"), st.just("2026-W01-1T00:00:00.000000Z"),
                             st.just("2026-02-30T00:00:00.000000Z"), st.just("2026-01-01T00:00:00Z"),
                             st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z"))
_values = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False), st.text(max_size=5),
                    st.sampled_from(["item", "seed", "user", "assistant", "tool", "system", "robot"]), _near_timestamps)
_messages = st.one_of(_values, st.dictionaries(st.sampled_from(["role", "content", "toolCallId", "extra"]),
                                               st.one_of(_values, st.lists(_values, max_size=2)), max_size=4))
_entries = st.dictionaries(st.sampled_from(["v", "type", "seq", "at", "message", "extra"]),
                           st.one_of(_values, _messages), max_size=6)
_plain = st.fixed_dictionaries({
    "v": st.just(RECORD_FORMAT_VERSION), "type": st.just("item"), "seq": st.integers(-2**63, 2**63 - 1),
    "at": _near_timestamps,
    "message": st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]),
                                      "content": st.one_of(st.text(), st.none())})})


@given(st.one_of(_entries, _plain))
def test_is_plain_item_accepts_only_entries_that_validate_unchanged(entry):
    if is_plain_item(entry):
        assert parse_entry(entry).to_wire() == entry
        assert TypeAdapter(HistoryEntry).validate_json(json.dumps(entry)).to_wire() == entry


def test_entries_the_runtime_writes_are_plain_items():
    for role in ("user", "assistant", "system"):
        prepared = prepare_append("r", [{"type": "item", "message": {"role": role, "content": "hi ✓"}}], 1)[0]
        assert is_plain_item(json.loads(prepared.data))
    assert not is_plain_item(json.loads(prepare_append("r", [seed("a")], 1)[0].data))


@given(st.sampled_from(["user", "assistant", "tool", "system"]), st.text(), st.integers(1, 2**63 - 1))
def test_plain_items_are_stored_exactly_as_the_model_would_dump_them(role, content, seq):
    entry = {"type": "item", "at": "2026-01-01T00:00:00.000000Z", "message": {"role": role, "content": content}}
    prepared = prepare_append("r", [entry], seq)[0]
    model = parse_entry({**entry, "v": RECORD_FORMAT_VERSION, "seq": seq})
    assert prepared.data == model.model_dump_json(by_alias=True, exclude_none=True)
    assert prepared.wire == model.to_wire() == json.loads(prepared.data)


def _prepared_or_error(record_id, entry, seq):
    try:
        prepared = prepare_append(record_id, [entry], seq)
    except Exception as exc:  # the same error either way: type and message
        return type(exc), str(exc)
    # an entry without a timestamp gets the call's clock: the same, once named
    return [repr(tuple(p)).replace(p.at, "<now>") if not entry.get("at") else tuple(p) for p in prepared]


_stampable = st.one_of(_entries, _plain, st.fixed_dictionaries(
    {"type": st.just("item"), "message": st.fixed_dictionaries({"role": st.sampled_from(["user", "tool", "x"]),
                                                                "content": st.one_of(st.text(), st.none())})},
    optional={"at": _near_timestamps, "v": _values, "seq": st.just(7)}))


@given(_stampable)
def test_prepare_append_decides_plain_items_on_the_entry_as_on_its_stamped_copy(entry):
    # A Mapping that is not a dict is stamped first and then tested with is_plain_item: the
    # dict fast path must store exactly the same bytes, or raise the same error.
    assert _prepared_or_error("r", entry, 7) == _prepared_or_error("r", MappingProxyType(entry), 7)
