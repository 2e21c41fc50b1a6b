"""CompactionHooks' four triggers: pressure, overflow, micro and manual (the seed's sentences)."""

from __future__ import annotations

import pytest
from steerable_agent_runtime.compaction import (
    SUMMARY_PREFIX,
    CompactionHooks,
    estimate_tokens,
    is_folded,
)
from steerable_agent_runtime.errors import ConfigValueError
from steerable_agent_runtime.llm import LLMError

from tests.helpers import run

from .transcripts import (
    agent_transcript,
    assistant,
    ctx,
    system,
    tool_round,
    user,
    well_formed,
)

OVERFLOW = LLMError("prompt is too long: 210000 tokens > 200000 maximum", kind="context_overflow",
                    provider="anthropic", status_code=400)


def hooks(**kwargs) -> CompactionHooks:
    return CompactionHooks(10_000, **kwargs)  # threshold 8,000; margin 1,000; low water 7,000


def chat(n: int) -> list:
    return [system(), user("Plan the trip.")] + [
        (user if k % 2 else assistant)(f"message {k} " + "y" * 2000) for k in range(n)]


# -- pressure --------------------------------------------------------------------------------

def test_pressure_over_threshold_folds_old_tool_results_when_that_is_enough():
    transcript = agent_transcript(10)
    h = hooks()
    action = run(h.pre_step(transcript, ctx()))
    rewrite = action.rewrite
    assert rewrite.trigger == "pressure" and rewrite.pre_tokens == estimate_tokens(transcript) > 8000
    assert len(rewrite.messages) == len(transcript)  # fold only: no summary needed
    assert sum(is_folded(m) for m in rewrite.messages) == 8
    assert rewrite.post_tokens == estimate_tokens(rewrite.messages) <= 7000
    assert h.compactions == 1 and not h.circuit_open


def test_pressure_summarises_the_middle_when_folding_is_not_enough():
    transcript = chat(20)
    rewrite = run(hooks().pre_step(transcript, ctx())).rewrite
    assert [m.content for m in rewrite.messages[:2]] == [transcript[0].content, transcript[1].content]
    assert rewrite.messages[2].content.startswith(SUMMARY_PREFIX + "14 earlier messages, excerpts]")
    assert rewrite.messages[3:] == transcript[-6:]
    assert rewrite.post_tokens == estimate_tokens(rewrite.messages) < 8000


def test_under_threshold_nothing_happens():
    transcript = agent_transcript(5)
    assert estimate_tokens(transcript) < 8000
    assert run(hooks().pre_step(transcript, ctx())) is None


def test_pressure_is_the_reported_prompt_tokens_plus_what_was_appended_since():
    transcript = agent_transcript(3)
    h = hooks()
    seen = ctx(last_prompt_tokens=7900, last_prompt_transcript_len=len(transcript) - 2)
    assert h.pressure(transcript, seen) == 7900 + estimate_tokens(transcript[-2:])
    assert run(h.pre_step(transcript, seen)).rewrite.pre_tokens == 7900 + estimate_tokens(transcript[-2:])
    # The reported figure wins over the estimate: a large transcript reported small is not compacted.
    big = agent_transcript(30)
    assert run(hooks().pre_step(big, ctx(last_prompt_tokens=500, last_prompt_transcript_len=len(big)))) is None


def test_after_its_own_rewrite_pressure_counts_from_the_post_estimate():
    h = hooks()
    loop_ctx = ctx(round_index=1, last_prompt_tokens=9500, last_prompt_transcript_len=22)
    first = run(h.pre_step(agent_transcript(10), loop_ctx)).rewrite
    later = first.messages + tool_round(99)
    # Same round (e.g. the retry after the rewrite): the stale usage of the old transcript is not used.
    assert h.pressure(later, loop_ctx) == first.post_tokens + estimate_tokens(tool_round(99))
    # Next round: the request sent after the rewrite reported its usage; that wins.
    loop_ctx.round_index, loop_ctx.last_prompt_tokens, loop_ctx.last_prompt_transcript_len = 2, 3000, len(first.messages)
    assert h.pressure(later, loop_ctx) == 3000 + estimate_tokens(tool_round(99))


def test_hysteresis_waits_for_the_margin_after_a_compaction():
    h = hooks()
    head = system("rules " * 6200)  # ~9,300 tokens of head: no compaction can get under 8,000
    transcript = [head, user("go")] + tool_round(0) + tool_round(1) + tool_round(2)
    first = run(h.pre_step(transcript, ctx(round_index=1)))
    assert first.rewrite is not None and first.rewrite.post_tokens > 8000
    grown = first.rewrite.messages + [assistant("a small step")]
    assert run(h.pre_step(grown, ctx(round_index=2))) is None  # over threshold, under the margin
    grown += tool_round(3)
    assert run(h.pre_step(grown, ctx(round_index=3))).rewrite is not None


# -- overflow --------------------------------------------------------------------------------

def test_overflow_compacts_and_retries_at_most_twice_per_round_then_fails_loud():
    h = hooks()
    loop_ctx = ctx(round_index=4)
    transcript = chat(20)
    first = run(h.on_request_error(OVERFLOW, transcript, loop_ctx))
    assert first.action == "retry" and first.rewrite.trigger == "overflow"
    assert first.rewrite.messages[2].content.startswith(SUMMARY_PREFIX)
    second = run(h.on_request_error(OVERFLOW, first.rewrite.messages, loop_ctx))
    assert second.action == "retry" and len(second.rewrite.messages) < len(first.rewrite.messages)
    third = run(h.on_request_error(OVERFLOW, second.rewrite.messages, loop_ctx))
    assert third.action == "fail" and "2 compactions this round" in third.reason
    assert h.overflow_recoveries == 2
    # A new round has its own bound.
    assert run(h.on_request_error(OVERFLOW, chat(20), ctx(round_index=5))).action == "retry"


def test_overflow_with_nothing_left_to_compact_fails():
    action = run(hooks().on_request_error(OVERFLOW, [system(), user("hi")], ctx()))
    assert action.action == "fail" and "nothing left to compact" in action.reason


def test_other_errors_are_left_to_other_hooks():
    error = LLMError("slow down", kind="rate_limit", status_code=429)
    assert run(hooks().on_request_error(error, chat(20), ctx())) is None
    assert run(hooks().on_request_error(RuntimeError("x"), chat(20), ctx())) is None


# -- micro -----------------------------------------------------------------------------------

def test_micro_compaction_folds_every_n_rounds_whatever_the_pressure():
    h = hooks(micro_compact_interval_rounds=2)
    transcript = agent_transcript(4, size=1200)
    assert estimate_tokens(transcript) < 8000
    assert run(h.pre_step(transcript, ctx(round_index=1))) is None  # not due
    rewrite = run(h.pre_step(transcript, ctx(round_index=2))).rewrite
    assert rewrite.trigger == "micro" and sum(is_folded(m) for m in rewrite.messages) == 2
    assert rewrite.post_tokens < rewrite.pre_tokens and h.micro_compactions == 1 and h.compactions == 0
    # Idempotent: the next periodic fire on the folded transcript issues no rewrite.
    assert run(h.pre_step(rewrite.messages, ctx(round_index=4))) is None
    assert h.micro_compactions == 1


def test_micro_compaction_on_a_clean_transcript_is_a_no_op():
    h = hooks(micro_compact_interval_rounds=1)
    assert run(h.pre_step(chat(4), ctx(round_index=3))) is None and h.micro_compactions == 0


# -- manual ----------------------------------------------------------------------------------

def test_compact_now_bypasses_the_threshold():
    transcript = agent_transcript(5)
    assert estimate_tokens(transcript) < 8000
    rewrite = run(hooks().compact_now(transcript, ctx()))
    assert rewrite.trigger == "manual" and rewrite.post_tokens < rewrite.pre_tokens
    assert well_formed(rewrite.messages)


def test_compact_now_on_a_minimal_transcript_is_a_no_op():
    h = hooks()
    assert run(h.compact_now([system(), user("hi"), assistant("hello")], ctx())) is None
    assert h.compactions == 0


def test_compact_now_twice_is_a_no_op_the_second_time():
    h = hooks()
    rewrite = run(h.compact_now(chat(20), ctx()))
    assert rewrite is not None
    assert run(h.compact_now(rewrite.messages, ctx())) is None


# -- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, parameter", [
    ({"threshold_ratio": 0}, "threshold_ratio"), ({"threshold_ratio": 1.01}, "threshold_ratio"),
    ({"threshold_ratio": -0.5}, "threshold_ratio"), ({"max_context_tokens": 0}, "max_context_tokens"),
    ({"max_context_tokens": -5}, "max_context_tokens"), ({"rapid_refill_window_rounds": 0},
                                                         "rapid_refill_window_rounds"),
    ({"keep_last_messages": -1}, "keep_last_messages"), ({"max_rapid_refills": 0}, "max_rapid_refills"),
])
def test_out_of_range_parameters_raise_a_value_error_naming_them(kwargs, parameter):
    arguments = {"max_context_tokens": 10_000, **kwargs}
    with pytest.raises(ValueError, match=parameter) as caught:
        CompactionHooks(**arguments)
    assert isinstance(caught.value, ConfigValueError) and caught.value.parameter == parameter
    assert caught.value.hint


def test_threshold_ratio_one_is_allowed():
    assert CompactionHooks(1000, threshold_ratio=1).threshold_tokens == 1000
