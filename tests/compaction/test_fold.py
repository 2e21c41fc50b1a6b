"""Folding: old tool results become excerpts; idempotent; the last readable ones stay whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.compaction import (
    FOLD_PREFIX,
    fold_tool_results,
    is_folded,
    split,
)
from steerable_agent_runtime.models import LLMMessage, ToolCall

from .transcripts import agent_transcript, assistant, result, system, user, well_formed


def test_all_but_the_last_two_results_fold_to_an_excerpt():
    messages = agent_transcript(5)
    folded = fold_tool_results(messages, keep_last=2, excerpt_chars=40).messages
    results = [m for m in folded if m.role == "tool"]
    assert [is_folded(m) for m in results] == [True, True, True, False, False]
    assert results[0].content.startswith(FOLD_PREFIX + f"{len(messages[3].content)} chars] # file 0 x = 1")
    assert results[0].tool_call_id == "call_0"
    assert [m.role for m in folded] == [m.role for m in messages]
    assert messages[3].content.startswith("# file 0")  # the input is not mutated


def test_folding_twice_changes_nothing_the_second_time():
    once = fold_tool_results(agent_transcript(6), keep_last=2, excerpt_chars=160)
    twice = fold_tool_results(once.messages, keep_last=2, excerpt_chars=160)
    assert once.changed and not twice.changed
    assert twice.messages == once.messages


def test_keep_last_counts_readable_results_only():
    messages = agent_transcript(4)
    messages[-1] = result("call_3", FOLD_PREFIX + "9 chars] folded before")  # the newest is already folded
    folded = fold_tool_results(messages, keep_last=2, excerpt_chars=40).messages
    states = [is_folded(m) for m in folded if m.role == "tool"]
    assert states == [True, False, False, True]  # results 1 and 2 are the last two readable ones


def test_a_short_result_stays_readable():
    call = ToolCall(id="c1", name="ok", arguments={})
    messages = [system(), user("go"), assistant("", call), result("c1", "ok"), assistant("done")]
    assert not fold_tool_results(messages, keep_last=0, excerpt_chars=160).changed


def test_split_head_is_systems_and_first_user_and_tail_takes_the_call_with_its_result():
    messages = [system("a"), system("b"), user("task")] + agent_transcript(3)[2:]
    parts = split(messages, keep_last=1)  # the last message is a tool result: the tail starts at its call
    assert parts.head_end == 3
    assert messages[parts.tail_start].role == "assistant" and parts.tail_start == len(messages) - 2


# -- properties over random transcripts with tool calls -------------------------------------

@st.composite
def transcripts(draw):
    messages = [LLMMessage(role="system", content="sys")] * draw(st.integers(0, 2))
    messages.append(LLMMessage(role="user", content=draw(st.text(max_size=30))))
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text", "user", "calls"]))
        if kind == "calls":
            ids = [f"c{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            messages.append(LLMMessage(role="assistant", tool_calls=[
                ToolCall(id=i, name="t", arguments={"n": n}).to_wire() for i in ids]))
            for i in ids:
                body = draw(st.one_of(st.just("ok"), st.text(min_size=0, max_size=900)))
                if draw(st.booleans()) and draw(st.booleans()):
                    body = FOLD_PREFIX + "3 chars] old"
                messages.append(LLMMessage(role="tool", content=body, tool_call_id=i))
        else:
            messages.append(LLMMessage(role="user" if kind == "user" else "assistant",
                                       content=draw(st.text(max_size=200))))
    return messages


@given(transcripts(), st.integers(0, 4), st.integers(0, 300))
def test_property_folding_twice_equals_folding_once(messages, keep, excerpt):
    once = fold_tool_results(messages, keep_last=keep, excerpt_chars=excerpt).messages
    assert fold_tool_results(once, keep_last=keep, excerpt_chars=excerpt).messages == once
    assert [(m.role, m.tool_call_id) for m in once] == [(m.role, m.tool_call_id) for m in messages]


@given(transcripts(), st.integers(0, 10))
def test_property_the_tail_never_starts_with_a_result_whose_call_is_cut_off(messages, keep):
    parts = split(messages, keep)
    kept = messages[:parts.head_end] + [user("[summary]")] + messages[parts.tail_start:]
    assert well_formed(kept)
    if parts.tail_start < len(messages) and messages[parts.tail_start].role == "tool":
        assert parts.tail_start == parts.head_end  # only when nothing is summarised at all
