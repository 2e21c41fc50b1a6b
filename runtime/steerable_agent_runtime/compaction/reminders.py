"""CompactionThrashingReminder: the notice appended on the round a compaction breaker trips.

Model- and UI-visible: it tells the model why the context stopped being compacted and what
converges (finish the step, read less at a time), so the run ends instead of spinning.
"""

from __future__ import annotations

from typing import Literal

from ..context.fragment import ContextFragment

CircuitReason = Literal["consecutive_failures", "rapid_refill"]

_WHY = {
    "consecutive_failures": "the last {n} compactions could not bring the context under its limit",
    "rapid_refill": "the context refilled within {window} rounds of each of the last {n} compactions",
}


class CompactionThrashingReminder(ContextFragment):
    """``[system notice] Context thrashing: ...`` (capped at 200 tokens)."""

    role = "user"
    content_kind = "system-notice"
    start_marker = "[system notice] "
    end_marker = "\n[end of system notice]"
    max_tokens = 200

    @classmethod
    def for_reason(cls, reason: CircuitReason, *, count: int, window: int) -> CompactionThrashingReminder:
        """The reminder for the breaker that tripped (``count`` compactions, refill ``window``)."""
        why = _WHY[reason].format(n=count, window=window)
        return cls(f"Context thrashing: {why}, so automatic compaction is now off for this chat. "
                   "Converge: finish the current step with what you already have, read or print smaller "
                   "pieces at a time, and avoid repeating large tool calls. The user can still compact by hand.")
