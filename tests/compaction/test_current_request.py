"""The current request (the last user-authored message) survives compaction whole.

Without this, a long request that is not the chat's first user message fell into the middle
after a few tool rounds and shrank to a 200-character excerpt line (or into the summarizer's
prose): the model lost the task it was working on.
"""

from __future__ import annotations

import asyncio

from steerable_agent_runtime import SqliteStorage, resume_transcript
from steerable_agent_runtime.compaction import (
    REQUEST_CUT_MARKER,
    SUMMARY_PREFIX,
    CompactionHooks,
    CompactionThrashingReminder,
    current_request_indices,
    estimate_message_tokens,
    estimate_tokens,
)
from steerable_agent_runtime.context import NotesFragment
from steerable_agent_runtime.llm import LLMError, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import ChainHooks, CoreLoop, RetryHooks

from tests.helpers import run

from .test_loop_integration import boundaries, file_router, rewrites
from .transcripts import assistant, ctx, system, tool_round, user

FIRST = "Say hello."
# several KB, with its details spread to the very end (an excerpt of 200 characters keeps none of them)
REQUEST = "Port the parser to the new tokenizer. Constraints:\n" + "".join(
    f"- rule {n}: keep behaviour {n} exactly as documented in section {n} of SPEC.md\n" for n in range(80)
) + "Finally: do not touch tests/legacy/, and report every renamed symbol."


def chat_with_request(rounds: int) -> list:
    """system, a first short exchange, the long current request, then ``rounds`` tool rounds."""
    messages = [system(), user(FIRST), assistant("Hello!"), user(REQUEST)]
    for n in range(rounds):
        messages += tool_round(n)
    return messages


def holds_request_whole(messages) -> bool:
    return sum(m.content == REQUEST for m in messages) == 1


def test_the_request_is_several_kb():
    assert len(REQUEST) > 5000


def test_without_a_summarizer_the_long_current_request_is_kept_whole_and_the_first_user_message_too():
    rewrite = run(CompactionHooks(100_000).compact_now(chat_with_request(10), ctx()))
    messages = rewrite.messages
    assert holds_request_whole(messages)
    assert [m.content for m in messages[:3]] == [system().content, FIRST, REQUEST]  # head, then the request
    assert messages[3].content.startswith(SUMMARY_PREFIX) and REQUEST[:200] not in messages[3].content
    assert rewrite.post_tokens == estimate_tokens(messages) < rewrite.pre_tokens


def test_with_a_summarizer_the_long_current_request_is_kept_whole_and_not_sent_to_it():
    summarizer = ScriptedProvider(["Read files 0-7; nothing renamed yet."])
    rewrite = run(CompactionHooks(100_000, summarizer=summarizer).compact_now(chat_with_request(10), ctx()))
    messages = rewrite.messages
    assert holds_request_whole(messages) and messages[1].content == FIRST
    assert messages[3].content.endswith("Read files 0-7; nothing renamed yet.")
    [asked] = summarizer.requests
    assert "rule 79" not in asked.messages[-1].content and "Hello!" in asked.messages[-1].content


def test_compacting_again_changes_nothing_and_the_request_stays_where_it_was():
    hooks = CompactionHooks(100_000)
    once = run(hooks.compact_now(chat_with_request(10), ctx())).messages
    assert run(hooks.compact_now(once, ctx())) is None
    more = once + tool_round(10) + tool_round(11) + tool_round(12) + tool_round(13)
    twice = run(hooks.compact_now(more, ctx())).messages
    assert twice[:3] == once[:3] and holds_request_whole(twice)  # a stable prefix: head + the request


def test_the_current_request_is_the_last_user_authored_message_and_the_steers_of_its_turn():
    notes = NotesFragment("<agent-notes level=\"file\" path=\"/n\">n</agent-notes>").to_message()
    notice = CompactionThrashingReminder.for_reason("rapid_refill", count=4, window=3).to_message()
    summary = user(SUMMARY_PREFIX + "3 earlier messages, excerpts]\n[user] x")
    messages = [system(), user("a"), assistant("done with a"), user(REQUEST), notes, *tool_round(0), summary,
                *tool_round(1), notice]
    assert current_request_indices(messages) == [3]  # not the notes, the summary, the notice, a tool result
    steered = messages + [user("also rename Lexer to Scanner")]  # a steer: a user message, within the turn
    assert current_request_indices(steered) == [3, len(steered) - 1]
    answered = steered + [assistant("Done.")]  # between turns: the last turn's request
    assert current_request_indices(answered) == [3, len(steered) - 1]
    assert current_request_indices(answered + [user("next")]) == [len(answered)]
    assert current_request_indices([system(), assistant("hi")]) == []


STEER = "Also rename Lexer to Scanner everywhere, and keep a deprecated alias."


def test_a_steer_does_not_push_the_request_it_amends_out():
    messages = chat_with_request(5) + [user(STEER)]
    for n in range(5, 10):
        messages += tool_round(n)
    rewrite = run(CompactionHooks(100_000).compact_now(messages, ctx()))
    assert [m.content for m in rewrite.messages[1:4]] == [FIRST, REQUEST, STEER]
    assert rewrite.messages[4].content.startswith(SUMMARY_PREFIX)
    assert run(CompactionHooks(100_000).compact_now(rewrite.messages, ctx())) is None


def test_a_request_over_half_the_threshold_is_pinned_cut_to_that_budget_and_says_so():
    """Decision: a current request whose estimate alone is over half the threshold is kept cut:
    its first part, within that budget, ending with REQUEST_CUT_MARKER (how much was kept);
    the rest is summarised with the middle. Whole, it alone would keep every compaction over
    the threshold (and an overflow recovery would have nothing to cut)."""
    huge = REQUEST * 6  # ~8,800 tokens
    messages = [system(), user(FIRST), assistant("Hello!"), user(huge)] + tool_round(0) + tool_round(1)
    hooks = CompactionHooks(10_000, keep_last_messages=2)  # threshold 8,000: a budget of 4,000
    rewrite = run(hooks.compact_now(messages, ctx()))
    pinned = rewrite.messages[2]
    assert pinned.role == "user" and pinned.content.startswith(huge[:10_000])
    assert REQUEST_CUT_MARKER.format(kept=len(pinned.content.split("\n…[")[0]), total=len(huge)) in pinned.content
    assert estimate_message_tokens(pinned) <= 4000 < estimate_message_tokens(user(huge))
    assert "current request cut" in rewrite.reason
    assert rewrite.post_tokens == estimate_tokens(rewrite.messages) <= hooks.threshold_tokens
    assert run(hooks.compact_now(rewrite.messages, ctx())) is None  # the cut form fits: kept as it is


def test_over_budget_the_newest_message_of_the_request_is_fitted_first_and_the_oldest_cut():
    huge = REQUEST * 6
    messages = [system(), user(FIRST), assistant("Hello!"), user(huge), *tool_round(0), user(STEER),
                *tool_round(1), *tool_round(2)]
    hooks = CompactionHooks(10_000, keep_last_messages=2)
    rewrite = run(hooks.compact_now(messages, ctx()))
    assert rewrite.messages[3].content == STEER and REQUEST_CUT_MARKER.split("{")[0] in rewrite.messages[2].content
    assert estimate_message_tokens(rewrite.messages[2]) + estimate_message_tokens(rewrite.messages[3]) <= 4000
    assert run(hooks.compact_now(rewrite.messages, ctx())) is None


OVERFLOW = LLMError("prompt is too long", kind="context_overflow", status_code=400, provider="scripted")


def commentary_reads(n: int) -> list[ScriptedResponse]:
    """n rounds, each with a long commentary (text: not foldable) and one read, then an answer."""
    script = [ScriptedResponse(text=f"Step {k}: " + "analysis " * 400,
                               tool_calls=[{"id": f"r{k}", "name": "read_file", "arguments": {"path": f"f{k}.py"}}])
              for k in range(n)]
    return script + [ScriptedResponse(text="Ported; renamed: none.")]


def loop_run(tmp_path, summarizer):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        compaction = CompactionHooks(8000, summarizer=summarizer)
        provider = ScriptedProvider(commentary_reads(10))
        loop = CoreLoop(provider, file_router(), hooks=ChainHooks(RetryHooks(), compaction), storage=store)
        chat = [{"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": FIRST},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": REQUEST}]
        events = asyncio.run(_drive(loop, chat))
        assert events[-1].data["status"] == "completed"
        summarised = [d for d in rewrites(events) if "summarised" in d["reason"]]
        assert summarised  # the middle was summarised, not just folded
        # every request the model got holds the request whole, and the first user message
        for request in provider.requests:
            assert holds_request_whole(request.messages) and request.messages[1].content == FIRST
        stored = boundaries(store)
        assert stored and all(sum(m.get("content") == REQUEST for m in b["replacement"]) == 1 for b in stored)
        assert asyncio.run(resume_transcript(store, "c1")) == loop.transcript
    finally:
        asyncio.run(store.close())


async def _drive(loop, chat):
    return [event async for event in loop.run(chat, chat_id="c1")]


def test_in_the_loop_without_a_summarizer_every_request_holds_the_current_request_whole(tmp_path):
    loop_run(tmp_path, None)


def test_in_the_loop_with_a_summarizer_every_request_holds_the_current_request_whole(tmp_path):
    loop_run(tmp_path, ScriptedProvider(["Summary: files read, analysis done so far."] * 20))
