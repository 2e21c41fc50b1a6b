"""Both breakers: three ineffective compactions; rapid refill; resets; the reminder."""

from __future__ import annotations

from steerable_agent_runtime.compaction import (
    CompactionHooks,
    CompactionThrashingReminder,
    estimate_text_tokens,
    estimate_tokens,
)
from steerable_agent_runtime.llm import LLMError

from tests.helpers import run

from .transcripts import agent_transcript, assistant, ctx, system, tool_round, user

NOTICE = "[system notice] Context thrashing:"
OVERFLOW = LLMError("context length exceeded", kind="context_overflow", status_code=400)


def stuck_transcript():
    """A head of ~9,300 tokens: every compaction folds something yet stays over 8,000."""
    return [system("rules " * 6200), user("go")] + tool_round(0) + tool_round(1) + tool_round(2)


def grow_until_compaction(h, transcript, round_index):
    """Append one tool round per loop round until the hooks rewrite; the action and the round."""
    while True:
        action = run(h.pre_step(transcript, ctx(round_index=round_index)))
        if action is not None:
            return action, round_index
        transcript = transcript + tool_round(round_index + 100)
        round_index += 1


def test_three_ineffective_compactions_open_the_circuit_and_pressure_stops_but_overflow_stays_live():
    h = CompactionHooks(10_000)
    transcript, round_index = stuck_transcript(), 1
    actions = []
    for _ in range(3):
        action, round_index = grow_until_compaction(h, transcript, round_index)
        actions.append(action)
        transcript = action.rewrite.messages + tool_round(round_index + 200)
        round_index += 1
    assert [a.rewrite.post_tokens > 8000 for a in actions] == [True, True, True]
    assert h.circuit_open and h.circuit_reason == "consecutive_failures"
    assert actions[-1].rewrite.messages[-1].content.startswith(NOTICE)
    assert not any(m.content and str(m.content).startswith(NOTICE) for a in actions[:2] for m in a.rewrite.messages)
    # The pressure path stops firing however much it grows...
    for extra in range(4):
        transcript = transcript + tool_round(300 + extra)
        assert run(h.pre_step(transcript, ctx(round_index=round_index + extra))) is None
    assert h.compactions == 3
    # ...while overflow recovery stays live.
    retry = run(h.on_request_error(OVERFLOW, transcript, ctx(round_index=round_index + 9)))
    assert retry.action == "retry" and retry.rewrite.trigger == "overflow"


def test_a_healthy_round_resets_the_failure_count():
    h = CompactionHooks(10_000)
    transcript, round_index = stuck_transcript(), 1
    for _ in range(2):
        action, round_index = grow_until_compaction(h, transcript, round_index)
        transcript = action.rewrite.messages + tool_round(round_index + 200)
        round_index += 1
    assert h._breakers.ineffective == 2
    healthy = ctx(round_index=round_index, last_prompt_tokens=100, last_prompt_transcript_len=len(transcript))
    assert run(h.pre_step(transcript, healthy)) is None
    assert h._breakers.ineffective == 0
    action, round_index = grow_until_compaction(h, transcript + tool_round(999), round_index + 1)
    assert action.rewrite is not None and not h.circuit_open


def refill(h, transcript, rounds):
    """One compaction per listed round, refilling the transcript between them."""
    actions = []
    for round_index in rounds:
        while estimate_tokens(transcript) <= 8000:
            transcript = transcript + tool_round(len(transcript))
        action = run(h.pre_step(transcript, ctx(round_index=round_index)))
        actions.append(action)
        transcript = action.rewrite.messages
    return actions, transcript


def test_rapid_refill_within_the_window_opens_the_circuit_on_the_fourth_compaction():
    h = CompactionHooks(10_000)
    actions, transcript = refill(h, agent_transcript(2), [1, 3, 5, 7])
    assert all(a.rewrite.post_tokens <= 8000 for a in actions)
    assert [h.compactions, h.circuit_open, h.circuit_reason] == [4, True, "rapid_refill"]
    reminder = actions[-1].rewrite.messages[-1]
    assert reminder.content.startswith(NOTICE) and "refilled within 3 rounds" in reminder.content
    assert CompactionThrashingReminder.recognises(reminder.content)
    assert not any(str(m.content).startswith(NOTICE) for a in actions[:3] for m in a.rewrite.messages)
    transcript = transcript + tool_round(1) * 8
    assert run(h.pre_step(transcript, ctx(round_index=8))) is None  # circuit open: no more pressure rewrites


def test_compactions_further_apart_than_the_window_never_trip():
    h = CompactionHooks(10_000)
    refill(h, agent_transcript(2), [1, 5, 9, 13, 17, 21])
    assert h.compactions == 6 and not h.circuit_open


def test_healthy_rounds_past_the_window_reset_the_refill_streak():
    h = CompactionHooks(10_000)
    _, transcript = refill(h, agent_transcript(2), [1, 3, 5])
    assert h._breakers.refills == 2
    run(h.pre_step(transcript, ctx(round_index=9)))  # healthy, 4 rounds after the last compaction
    assert h._breakers.refills == 0
    refill(h, transcript, [10, 12])
    assert not h.circuit_open


def test_micro_compaction_never_counts_as_a_refill():
    h = CompactionHooks(10_000, micro_compact_interval_rounds=1)
    transcript = agent_transcript(3, size=1200)
    for round_index in range(1, 12):
        action = run(h.pre_step(transcript, ctx(round_index=round_index)))
        assert action is not None and action.rewrite.trigger == "micro"
        transcript = action.rewrite.messages + tool_round(round_index, size=1200)
    assert h.micro_compactions == 11 and h.compactions == 0 and not h.circuit_open


def test_compact_now_bypasses_an_open_circuit_and_resets_both_counts():
    h = CompactionHooks(10_000)
    _, transcript = refill(h, agent_transcript(2), [1, 3, 5, 7])
    assert h.circuit_open
    rewrite = run(h.compact_now(transcript + [assistant("x " * 3000), user("and now?")] + tool_round(5), ctx(8)))
    assert rewrite is not None and rewrite.trigger == "manual"
    assert not h.circuit_open and h.circuit_reason is None
    assert (h._breakers.refills, h._breakers.ineffective) == (0, 0)


def test_the_reminder_fits_its_200_token_cap():
    for reason in ("consecutive_failures", "rapid_refill"):
        text = CompactionThrashingReminder.for_reason(reason, count=4, window=3).render()
        assert text.startswith(NOTICE)
        assert estimate_text_tokens(text) <= CompactionThrashingReminder.max_tokens == 200


def test_the_refill_window_counts_rounds_across_runs_not_round_indices():
    # Each run (one LoopContext) numbers its rounds from 0 again; the breakers count rounds as
    # they happened, so the next run's rounds come after the last run's, whatever their index.
    from steerable_agent_runtime.loop.hooks import LoopContext

    h = CompactionHooks(10_000)
    state = {"transcript": agent_transcript(2)}

    def compact(run_ctx, round_index):
        transcript = state["transcript"]
        while estimate_tokens(transcript) <= 8000:
            transcript = transcript + tool_round(len(transcript))
        run_ctx.round_index, run_ctx.last_prompt_tokens, run_ctx.last_prompt_transcript_len = round_index, None, None
        action = run(h.pre_step(transcript, run_ctx))
        assert action is not None and action.rewrite.trigger == "pressure"
        state["transcript"] = action.rewrite.messages

    def healthy(run_ctx, round_index):
        run_ctx.round_index, run_ctx.last_prompt_tokens = round_index, 100
        run_ctx.last_prompt_transcript_len = len(state["transcript"])
        assert run(h.pre_step(state["transcript"], run_ctx)) is None

    first = LoopContext(chat_id="c1")
    for round_index in range(10):
        healthy(first, round_index)
    compact(first, 10)
    healthy(first, 11)
    compact(first, 12)  # a refill: 2 rounds after the one before
    healthy(first, 13)
    assert h._breakers.refills == 1
    second = LoopContext(chat_id="c1")  # the next turn: its rounds are 14, 15, ... of the chat
    for round_index in range(5):
        healthy(second, round_index)
    assert h._breakers.refills == 0  # 6 healthy rounds since the last compaction: the streak is over
    compact(second, 5)  # the baseline of a new streak
    compact(second, 7)
    assert h._breakers.refills == 1 and not h.circuit_open
