"""CacheDriftMonitor: a pre_step observer that flags a collapsed prompt-cache hit rate."""

from __future__ import annotations

from collections.abc import Sequence

from ..models import LLMMessage
from .hooks import LoopContext, LoopHooks, PreStepAction


class CacheDriftMonitor(LoopHooks):
    """Watches each request's cached prompt tokens (through LoopContext) and never acts.

    - It arms on the first request that shows cached tokens (a provider without cache
      accounting never arms it).
    - Once armed, a request with at least ``min_prompt_tokens`` prompt tokens and a hit rate
      (cached / prompt) below ``min_hit_rate`` is a low round; ``consecutive_rounds`` low rounds
      in a row set ``drift_detected``. A good round (large prompt, hit rate at or above the
      minimum) resets the streak and clears ``drift_detected``; a small prompt changes nothing.
    - Each request is observed once (keyed by the transcript length it was built from and its
      token counts), however often pre_step runs, and also when a later response reports no
      usage (LoopContext then still holds the figures of the request before it).
    """

    def __init__(self, min_prompt_tokens: int = 1024, min_hit_rate: float = 0.5, consecutive_rounds: int = 3) -> None:
        self.min_prompt_tokens = min_prompt_tokens
        self.min_hit_rate = min_hit_rate
        self.consecutive_rounds = consecutive_rounds
        self.armed = False
        self.drift_detected = False
        self.low_streak = 0
        self.last_hit_rate: float | None = None
        self.rounds_observed = 0
        self._last_seen: tuple[int | None, int | None, int | None] | None = None

    async def pre_step(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> PreStepAction | None:
        self.observe(ctx)
        return None

    def observe(self, ctx: LoopContext) -> None:
        """Take the last request's figures from ``ctx`` (a no-op before the first request)."""
        prompt = ctx.last_prompt_tokens
        if prompt is None:
            return
        # not the round: after a response without usage, the next round sees the same request again
        key = (ctx.last_prompt_transcript_len, prompt, ctx.last_cached_prompt_tokens)
        if key == self._last_seen:
            return
        self._last_seen = key
        self.rounds_observed += 1
        cached = ctx.last_cached_prompt_tokens or 0
        self.last_hit_rate = cached / prompt if prompt > 0 else None
        if cached > 0:
            self.armed = True
        if not self.armed or prompt < self.min_prompt_tokens:
            return
        if self.last_hit_rate is not None and self.last_hit_rate >= self.min_hit_rate:
            self.low_streak = 0
            self.drift_detected = False
            return
        self.low_streak += 1
        if self.low_streak >= self.consecutive_rounds:
            self.drift_detected = True
