"""Compaction: keep a long run's transcript under the model's context.

``CompactionHooks`` (a LoopHooks) with four triggers (pressure, overflow, micro, manual) over
the fold and summary steps (the current request kept whole: request.py), two circuit breakers
and the CompactionThrashingReminder;
``estimate_tokens`` the cheap token estimate they use. See docs/compaction.md.
"""

from __future__ import annotations

from .breakers import Breakers
from .estimate import estimate_message_tokens, estimate_text_tokens, estimate_tokens
from .fold import FOLD_PREFIX, fold_tool_results, is_folded
from .hooks import MAX_OVERFLOW_RECOVERIES_PER_ROUND, CompactionHooks
from .reminders import CircuitReason, CompactionThrashingReminder
from .request import REQUEST_CUT_MARKER, current_request_indices, is_user_authored
from .summary import EXCERPT_CHARS, SUMMARY_PREFIX, excerpt_summary, split

__all__ = [
    "EXCERPT_CHARS",
    "FOLD_PREFIX",
    "MAX_OVERFLOW_RECOVERIES_PER_ROUND",
    "REQUEST_CUT_MARKER",
    "SUMMARY_PREFIX",
    "Breakers",
    "CircuitReason",
    "CompactionHooks",
    "CompactionThrashingReminder",
    "current_request_indices",
    "estimate_message_tokens",
    "estimate_text_tokens",
    "estimate_tokens",
    "excerpt_summary",
    "fold_tool_results",
    "is_folded",
    "is_user_authored",
    "split",
]
