"""LoopConfig: the loop's limits and switches, with the defaults RUNTIME.md gives."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError


@dataclass(frozen=True)
class LoopConfig:
    """How far and how a turn may run.

    - ``max_rounds`` (32): provider requests per turn; the next round past it ends the turn with
      ``budget_exhausted`` (reason ``max_rounds``).
    - ``max_tool_errors`` (3): consecutive failed tool results (a denial is not an error) that
      end the turn as ``failed``.
    - ``tool_timeout_s`` (300): a tool running longer gets a failed "timed out" result and the
      loop goes on.
    - ``parallel_tools`` (True): consecutive ``read`` calls of one response run together;
      results are always appended in call order.
    - ``tool_dedup`` (True): the same name + arguments twice in a turn is answered from the first.
    - ``budget_tokens`` (None): when the turn's total tokens reach it, the next round ends the
      turn with ``budget_exhausted`` (reason ``budget_tokens``).
    - ``temperature`` / ``max_tokens`` (None): passed to every provider request when set.

    Raises UsageError for a limit below 1 (or not a whole number; a timeout that is NaN).
    """

    max_rounds: int = 32
    max_tool_errors: int = 3
    tool_timeout_s: float = 300.0
    parallel_tools: bool = True
    tool_dedup: bool = True
    budget_tokens: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_tool_errors"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise UsageError(f"LoopConfig.{name} must be a whole number, got {value!r}",
                                 hint=f"pass {name}=1 or more")
            if value < 1:
                raise UsageError(f"LoopConfig.{name} must be at least 1, got {getattr(self, name)}",
                                 hint=f"pass {name}=1 or more")
        if not self.tool_timeout_s > 0:  # also NaN
            raise UsageError(f"LoopConfig.tool_timeout_s must be positive, got {self.tool_timeout_s}",
                             hint="pass a timeout in seconds, e.g. 300")
        if self.budget_tokens is not None and not self.budget_tokens >= 1:
            raise UsageError(f"LoopConfig.budget_tokens must be at least 1, got {self.budget_tokens}",
                             hint="pass None for no token budget")

    def request_options(self) -> dict[str, object]:
        """The provider options this config sets (``temperature``, ``max_tokens``)."""
        options: dict[str, object] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        return options
