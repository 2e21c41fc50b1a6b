"""Properties of every rewrite CompactionHooks issues, over random transcripts with tool calls."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.compaction import (
    CompactionHooks,
    current_request_indices,
    estimate_message_tokens,
    estimate_tokens,
)
from steerable_agent_runtime.llm import LLMError

from tests.helpers import run

from .test_fold import transcripts
from .transcripts import ctx, well_formed

OVERFLOW = LLMError("prompt is too long", kind="context_overflow", status_code=400)


def check(rewrite, before, hooks):
    assert well_formed(rewrite.messages)  # no tool result separated from its call
    request = [before[i] for i in current_request_indices(before)]
    if sum(map(estimate_message_tokens, request)) <= hooks.request_budget_tokens:
        assert all(m in rewrite.messages for m in request)  # the current request, whole
    head = [m for m in before[:3] if m.role == "system"]
    assert rewrite.messages[:len(head)] == head  # the leading system messages survive
    assert rewrite.post_tokens == estimate_tokens(rewrite.messages)  # no usage known: one scale
    assert rewrite.post_tokens < rewrite.pre_tokens == estimate_tokens(before)


@given(transcripts(), st.integers(200, 3000), st.integers(0, 4), st.integers(0, 3))
def test_property_every_pressure_rewrite_is_well_formed_and_smaller(messages, limit, keep_messages, keep_results):
    hooks = CompactionHooks(limit, keep_last_messages=keep_messages, keep_last_tool_results=keep_results)
    action = run(hooks.pre_step(messages, ctx()))
    if action is not None and action.rewrite is not None:
        check(action.rewrite, messages, hooks)
    elif estimate_tokens(messages) <= hooks.threshold_tokens:
        assert action is None


@given(transcripts(), st.integers(0, 4))
def test_property_manual_and_overflow_rewrites_are_well_formed_and_idempotent(messages, keep_messages):
    hooks = CompactionHooks(100_000, keep_last_messages=keep_messages)
    rewrite = run(hooks.compact_now(messages, ctx()))
    if rewrite is not None:
        check(rewrite, messages, hooks)
        assert run(hooks.compact_now(rewrite.messages, ctx())) is None  # compacting again changes nothing
    hooks = CompactionHooks(100_000, keep_last_messages=keep_messages)
    retry = run(hooks.on_request_error(OVERFLOW, messages, ctx()))
    if retry.action == "retry":
        check(retry.rewrite, messages, hooks)
