"""The two compaction circuit breakers, as one small state machine.

- Consecutive failures: a pressure compaction whose post-estimate is still over the
  threshold is ineffective; ``max_ineffective`` (3) in a row open the circuit.
- Rapid refill: a successful compaction within ``window`` rounds of the previous successful
  one counts as a refill; the first compaction of a streak is its baseline, so with the
  defaults (window 3, max 3) the fourth successful compaction within the window of the one
  before opens the circuit.

A successful compaction resets the failure count; an ineffective one ends a refill streak.
A healthy round (pressure under the threshold) resets the failure count, and the refill
streak once it is more than ``window`` rounds old. ``reset()`` (the manual compaction)
clears both counts and closes the circuit. Only pressure compactions are recorded here:
micro-compaction never counts as a refill, and overflow recovery has its own per-round bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reminders import CircuitReason


@dataclass
class Breakers:
    """Counts and the circuit; ``record`` returns the reason when this compaction tripped it."""

    window: int = 3
    max_refills: int = 3
    max_ineffective: int = 3
    ineffective: int = 0
    refills: int = 0
    last_success_round: int | None = None
    circuit_reason: CircuitReason | None = None

    @property
    def circuit_open(self) -> bool:
        return self.circuit_reason is not None

    def record(self, round_index: int, effective: bool) -> CircuitReason | None:
        """Count one pressure compaction at ``round_index``; the reason if it opened the circuit."""
        if effective:
            self.ineffective = 0
            within = self.last_success_round is not None and round_index - self.last_success_round <= self.window
            self.refills = self.refills + 1 if within else 0
            self.last_success_round = round_index
            if self.refills >= self.max_refills:
                return self._trip("rapid_refill")
            return None
        self.ineffective += 1
        self.refills, self.last_success_round = 0, None
        if self.ineffective >= self.max_ineffective:
            return self._trip("consecutive_failures")
        return None

    def healthy_round(self, round_index: int) -> None:
        """A round under the threshold: the failure count, and a refill streak past its window, reset."""
        self.ineffective = 0
        if self.last_success_round is not None and round_index - self.last_success_round > self.window:
            self.refills, self.last_success_round = 0, None

    def reset(self) -> None:
        """Both counts to zero and the circuit closed (the manual compaction)."""
        self.ineffective = self.refills = 0
        self.last_success_round = None
        self.circuit_reason = None

    def _trip(self, reason: CircuitReason) -> CircuitReason:
        self.circuit_reason = reason
        return reason
