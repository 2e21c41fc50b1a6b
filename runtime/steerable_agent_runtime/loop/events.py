"""LoopEvent: what ``CoreLoop.run`` yields, one typed event per step of a turn.

Kinds and their data (camelCase keys, JSON-ready):

- ``stage_start`` {round}: a round begins (before its steer messages and hooks).
- ``steer`` {content}: a steer message entered the transcript.
- ``hook_action`` {hook, action, reason, preTokens, postTokens}: a hook rejected, appended
  (``append``), rewrote (``rewrite``) or a requested compaction ran (``compact``).
- ``llm_request`` {round, attempt}: a provider attempt starts.
- ``content_delta`` {delta} / ``reasoning_delta`` {delta}: streamed text.
- ``llm_response`` {round, attempt, promptTokens, cachedPromptTokens, completionTokens} on
  success, {round, attempt, errorKind} on failure.
- ``tool_call_start`` {id, name, arguments} / ``tool_call_result`` {id, name, success,
  durationMs} (+ ``error`` when it failed, ``deduplicated`` when answered from an earlier call).
- ``stage_complete`` {round, usage}: a round ended (its usage, cached tokens included).
- ``budget_exhausted`` {reason, rounds, totalTokens}: max_rounds or budget_tokens reached.
- ``error`` {message, hint, kind?}: the turn failed (``kind``: the LLMError kind).
- ``completion`` {status: completed | failed | budget_exhausted | cancelled, reason, usage}:
  always the last event of a turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

EventKind = Literal[
    "stage_start", "llm_request", "content_delta", "reasoning_delta", "llm_response", "tool_call_start",
    "tool_call_result", "hook_action", "steer", "stage_complete", "budget_exhausted", "completion", "error",
]
EVENT_KINDS: frozenset[str] = frozenset(get_args(EventKind))
CompletionStatus = Literal["completed", "failed", "budget_exhausted", "cancelled"]


@dataclass(slots=True)
class LoopEvent:
    """One event of a turn: ``kind`` (one of EVENT_KINDS) and its JSON-ready ``data``.

    Treat it as read-only (not frozen only because a frozen dataclass costs twice as much to make,
    and a turn makes several per round). The loop's hot path makes its events as this
    ``__init__`` does, without the call: ``object.__new__(LoopEvent)``, then ``kind`` and ``data``
    set (a third of an event's cost). tests/loop/test_events_fast.py holds the two forms equal
    and fails if this class gains a field, a ``__post_init__`` or an ``__init__`` of its own."""

    kind: EventKind
    data: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": ..., "data": ...}`` (what a transport sends)."""
        return {"kind": self.kind, "data": self.data}
