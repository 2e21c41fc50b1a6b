"""CompactionHooks: four triggers (pressure, overflow, micro, manual) over one fold + summary machinery.

- Pressure (pre_step): fires when the pressure is over ``threshold_ratio * max_context_tokens``
  and, after an earlier compaction, has grown by ``recompact_margin_ratio * max_context_tokens``
  since that compaction's post-estimate (hysteresis), unless the circuit is open. It folds old
  tool results first and summarises the middle only when folding alone does not bring the
  estimate down to the low-water mark (threshold minus the margin).
- Overflow (on_request_error, an LLMError of kind ``context_overflow``): a forced fold +
  summary and a retry, at most 2 per round (the second keeps half as much), live when the
  circuit is open; then, or when nothing is left to compact, a fail: the turn fails loud.
- Micro (pre_step, ``micro_compact_interval_rounds=N`` > 0): every N rounds, fold old tool
  results whatever the pressure. Idempotent: on a clean transcript it issues no rewrite.
- Manual (``compact_now``): fold + summary, bypassing threshold, hysteresis and breaker;
  resets both breaker counts (closing the circuit); None when neither stage changes anything.

Pressure is the last request's reported prompt tokens plus an estimate of the messages
appended since (after its own rewrite: the rewrite's post-estimate plus what followed); the
whole transcript is estimated only when no usage is known. Every rewrite's ``pre_tokens`` /
``post_tokens`` are on that same scale: post = pre - the estimate removed + the estimate added.

The summary step's summarizer (any LLMProvider) gets at most ``summary_timeout_s`` (default
120 s) per call; past it the call is cancelled and the excerpt summary is used, as for a
summarizer that raises, and the rewrite's reason says so (``(excerpt; the summarizer timed out
after 120 s)``, see summary.summarize). The current request (request.py: the last user-authored
message and the steers of its turn) is never summarised while it fits half the threshold: it is
pinned whole right after the head, before the summary.

Hooks never mutate the transcript they are given. Raises ConfigValueError (a ValueError) naming
the parameter for a value out of range.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigValueError
from ..llm.errors import LLMError
from ..loop.hooks import (
    CompactionTrigger,
    LoopContext,
    LoopHooks,
    PreStepAction,
    RetryAction,
    RewriteRequest,
)
from ..models import LLMMessage
from .breakers import Breakers
from .estimate import estimate_message_tokens, estimate_tokens
from .fold import fold_tool_results
from .reminders import CircuitReason, CompactionThrashingReminder
from .request import current_request_indices, fit_requests
from .summary import kept_notes, needs_summary, split, summarize

log = logging.getLogger(__name__)

MAX_OVERFLOW_RECOVERIES_PER_ROUND = 2
DEFAULT_SUMMARY_TIMEOUT_S = 120.0
"""How long a compaction waits for the summarizer's answer before it uses the excerpt summary."""


@dataclass
class _Compacted:
    """The outcome of the fold and summary stages over one transcript."""

    messages: list[LLMMessage]
    post_tokens: int
    folded: int = 0
    summarised: int = 0
    source: str = ""  # summary.Summary.describe(): ``excerpt``, ``summarizer``, or why the excerpt was used
    request_cut: tuple[int, int] | None = None  # (kept, total) characters of a current request cut to its budget

    @property
    def changed(self) -> bool:
        return bool(self.folded or self.summarised or self.request_cut)

    def describe(self) -> str:
        parts = [f"folded {self.folded} tool result(s)"] if self.folded else []
        if self.summarised:
            parts.append(f"summarised {self.summarised} message(s) ({self.source})")
        if self.request_cut:
            parts.append("current request cut to its first {} of {} characters".format(*self.request_cut))
        return ", ".join(parts) or "nothing to compact"


@dataclass(frozen=True)
class _RoundMark:
    """One round of one run: the run's LoopContext (weakly: a new run is a new context) and its round."""

    ctx: weakref.ReferenceType[LoopContext]
    round_index: int

    @classmethod
    def of(cls, ctx: LoopContext) -> _RoundMark:
        return cls(weakref.ref(ctx), ctx.round_index)

    def matches(self, ctx: LoopContext) -> bool:
        return self.ctx() is ctx and self.round_index == ctx.round_index


def _require(condition: bool, parameter: str, message: str) -> None:
    if not condition:
        raise ConfigValueError(f"CompactionHooks: {parameter} {message}", parameter=parameter)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class CompactionHooks(LoopHooks):
    """Keep the transcript under the model's context (see the module docstring).

    Observable: ``circuit_open``, ``circuit_reason`` (``consecutive_failures | rapid_refill``),
    ``compactions`` (pressure and manual), ``micro_compactions``, ``overflow_recoveries``,
    ``last_pressure`` (the figure of the last pre_step).
    """

    def __init__(self, max_context_tokens: int, threshold_ratio: float = 0.8, keep_last_messages: int = 6,
                 keep_last_tool_results: int = 2, summarizer: Any = None, recompact_margin_ratio: float = 0.1,
                 fold_excerpt_chars: int = 160, micro_compact_interval_rounds: int = 0,
                 rapid_refill_window_rounds: int = 3, max_rapid_refills: int = 3,
                 summary_timeout_s: float = DEFAULT_SUMMARY_TIMEOUT_S) -> None:
        _require(_is_int(max_context_tokens) and max_context_tokens > 0, "max_context_tokens",
                 f"must be a positive int, got {max_context_tokens!r}")
        _require(isinstance(threshold_ratio, (int, float)) and 0 < threshold_ratio <= 1, "threshold_ratio",
                 f"must be in (0, 1], got {threshold_ratio!r}")
        _require(isinstance(recompact_margin_ratio, (int, float)) and 0 <= recompact_margin_ratio < 1,
                 "recompact_margin_ratio", f"must be in [0, 1), got {recompact_margin_ratio!r}")
        _require(_is_int(rapid_refill_window_rounds) and rapid_refill_window_rounds > 0, "rapid_refill_window_rounds",
                 f"must be a positive int, got {rapid_refill_window_rounds!r}")
        _require(_is_int(max_rapid_refills) and max_rapid_refills > 0, "max_rapid_refills",
                 f"must be a positive int, got {max_rapid_refills!r}")
        _require(isinstance(summary_timeout_s, (int, float)) and not isinstance(summary_timeout_s, bool)
                 and 0 < summary_timeout_s < math.inf, "summary_timeout_s",
                 f"must be a positive number of seconds, got {summary_timeout_s!r}")
        for name, value in (("keep_last_messages", keep_last_messages), ("keep_last_tool_results",
                            keep_last_tool_results), ("fold_excerpt_chars", fold_excerpt_chars),
                            ("micro_compact_interval_rounds", micro_compact_interval_rounds)):
            _require(_is_int(value) and value >= 0, name, f"must be an int >= 0, got {value!r}")
        self.max_context_tokens = max_context_tokens
        self.threshold_tokens = int(max_context_tokens * threshold_ratio)
        self.margin_tokens = int(max_context_tokens * recompact_margin_ratio)
        self.low_water_tokens = max(0, self.threshold_tokens - self.margin_tokens)
        self.keep_last_messages, self.keep_last_tool_results = keep_last_messages, keep_last_tool_results
        self.summarizer, self.fold_excerpt_chars = summarizer, fold_excerpt_chars
        self.summary_timeout_s = float(summary_timeout_s)
        self.request_budget_tokens = self.threshold_tokens // 2
        self.micro_compact_interval_rounds = micro_compact_interval_rounds
        self.compactions = self.micro_compactions = self.overflow_recoveries = 0
        self.last_pressure: int | None = None
        self._breakers = Breakers(window=rapid_refill_window_rounds, max_refills=max_rapid_refills)
        self._last_post: int | None = None
        # (the round it was made in, tokens, transcript length) of this instance's last rewrite.
        self._anchor: tuple[_RoundMark, int, int] | None = None
        self._overflow: tuple[_RoundMark, int] | None = None  # (the round, recoveries in it)
        # (the run's context, weakly; its round_index; that round's number on the breakers' clock)
        self._clock: tuple[weakref.ReferenceType[LoopContext], int, int] | None = None

    @property
    def circuit_open(self) -> bool:
        """Whether a breaker opened the circuit (the pressure path no longer fires)."""
        return self._breakers.circuit_open

    @property
    def circuit_reason(self) -> CircuitReason | None:
        """Which breaker opened the circuit: ``consecutive_failures`` or ``rapid_refill``; None while closed."""
        return self._breakers.circuit_reason

    # -- pressure ---------------------------------------------------------------------------

    def pressure(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> int:
        """The estimated size of the next request: a known figure plus the estimate appended since."""
        tokens, length = ctx.last_prompt_tokens, ctx.last_prompt_transcript_len
        anchor = self._anchor
        if anchor is not None and anchor[0].matches(ctx):
            tokens, length = anchor[1], anchor[2]
        if tokens is None or length is None or length > len(transcript):
            return estimate_tokens(transcript)
        return tokens + estimate_tokens(transcript[length:])

    def _round_number(self, ctx: LoopContext) -> int:
        """This round's number on a clock that runs on across runs, for the breakers' window.

        Each run (one LoopContext) numbers its rounds from 0 again, so round indices of two runs
        cannot be compared: the next run's rounds come after the last one seen (its first, one
        round later). A context seen anew with a later round index continues the count."""
        index, clock = ctx.round_index, self._clock
        if clock is None:
            number = index
        elif index > clock[1] or (index == clock[1] and clock[0]() is ctx):
            number = clock[2] + index - clock[1]
        else:  # a new run (its round index started again)
            number = clock[2] + 1
        self._clock = (weakref.ref(ctx), index, number)
        return number

    def _hysteresis_allows(self, pressure: int) -> bool:
        return self._last_post is None or pressure >= self._last_post + self.margin_tokens

    # -- the hook methods -------------------------------------------------------------------

    async def pre_step(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> PreStepAction | None:
        """Pressure compaction when due, else micro-compaction when due; None when nothing changes."""
        pressure = self.pressure(transcript, ctx)
        self.last_pressure = pressure
        number = self._round_number(ctx)
        if pressure > self.threshold_tokens:
            if not self.circuit_open and self._hysteresis_allows(pressure):
                return await self._pressure_compaction(transcript, ctx, pressure, number)
        elif self._breakers.ineffective or self._breakers.last_success_round is not None:
            self._breakers.healthy_round(number)
        if self.micro_compact_interval_rounds and self._micro_due(ctx):
            return self._micro_compaction(transcript, ctx, pressure)
        return None

    async def compact_now(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> RewriteRequest | None:
        """The manual compaction: fold + summary now, whatever the pressure; None if nothing changes."""
        self._breakers.reset()
        pre = self.pressure(transcript, ctx)
        done = await self._compact(transcript, pre, keep_messages=self.keep_last_messages,
                                   keep_results=self.keep_last_tool_results, summarise_above=None, cancel=ctx.cancel)
        if not done.changed:
            return None
        self.compactions += 1
        return self._rewrite(ctx, "manual", pre, done, f"manual compaction: {done.describe()}")

    async def on_request_error(self, error: BaseException, transcript: Sequence[LLMMessage],
                               ctx: LoopContext) -> RetryAction | None:
        """A context overflow: one bounded compaction and a retry (2 per round at most), else fail."""
        if not isinstance(error, LLMError) or error.kind != "context_overflow":
            return None
        used = self._overflow[1] if self._overflow is not None and self._overflow[0].matches(ctx) else 0
        if used >= MAX_OVERFLOW_RECOVERIES_PER_ROUND:
            return RetryAction.fail(f"context overflow: {used} compactions this round did not make the request fit")
        pre = self.pressure(transcript, ctx)
        keep_results, budget = self.keep_last_tool_results >> used, self.request_budget_tokens >> used
        done = await self._compact(transcript, pre, keep_messages=self.keep_last_messages >> used,
                                   keep_results=keep_results, summarise_above=None, cancel=ctx.cancel,
                                   request_budget=budget)
        if not done.changed and keep_results:
            # the kept results are all there is (one newest result too big for the window): fold
            # them too, to their excerpts, rather than fail this turn and every later one alike
            done = await self._compact(transcript, pre, keep_messages=self.keep_last_messages >> used,
                                       keep_results=0, summarise_above=None, cancel=ctx.cancel,
                                       request_budget=budget)
        if not done.changed:
            return RetryAction.fail("context overflow and nothing left to compact")
        self._overflow = (_RoundMark.of(ctx), used + 1)
        self.overflow_recoveries += 1
        rewrite = self._rewrite(ctx, "overflow", pre, done, f"overflow recovery {used + 1}: {done.describe()}")
        return RetryAction.retry(0, rewrite=rewrite, reason=rewrite.reason)

    # -- the triggers' bodies ---------------------------------------------------------------

    async def _pressure_compaction(self, transcript: Sequence[LLMMessage], ctx: LoopContext,
                                   pressure: int, round_number: int) -> PreStepAction | None:
        done = await self._compact(transcript, pressure, keep_messages=self.keep_last_messages,
                                   keep_results=self.keep_last_tool_results, summarise_above=self.low_water_tokens, cancel=ctx.cancel)
        tripped = self._breakers.record(round_number, done.post_tokens <= self.threshold_tokens)
        reminder = self._reminder(tripped)
        if not done.changed:
            self._last_post = pressure  # wait for the margin before trying again
            log.info("pressure %d over %d but nothing to compact", pressure, self.threshold_tokens)
            return PreStepAction.proceed(appends=[reminder]) if reminder else None
        if reminder is not None:
            done.messages.append(reminder)
            done.post_tokens += estimate_message_tokens(reminder)
        self.compactions += 1
        reason = f"pressure {pressure} > {self.threshold_tokens} tokens: {done.describe()}"
        if tripped:
            reason += f"; circuit opened ({tripped})"
        return PreStepAction.proceed(rewrite=self._rewrite(ctx, "pressure", pressure, done, reason))

    def _micro_due(self, ctx: LoopContext) -> bool:
        interval = self.micro_compact_interval_rounds
        return interval > 0 and ctx.round_index >= interval and ctx.round_index % interval == 0

    def _micro_compaction(self, transcript: Sequence[LLMMessage], ctx: LoopContext,
                          pressure: int) -> PreStepAction | None:
        fold = fold_tool_results(transcript, keep_last=self.keep_last_tool_results,
                                 excerpt_chars=self.fold_excerpt_chars)
        if not fold.changed:
            return None
        self.micro_compactions += 1
        done = _Compacted(fold.messages, pressure - fold.saved_tokens, folded=len(fold.removed))
        rewrite = self._rewrite(ctx, "micro", pressure, done, f"micro-compaction: {done.describe()}", hysteresis=False)
        return PreStepAction.proceed(rewrite=rewrite)

    # -- shared machinery -------------------------------------------------------------------

    async def _compact(self, transcript: Sequence[LLMMessage], pre: int, *, keep_messages: int,
                       keep_results: int, summarise_above: int | None, cancel: Any = None,
                       request_budget: int | None = None) -> _Compacted:
        """Fold, then summarise the middle (always, or only when still above ``summarise_above``);
        ``cancel``: the turn's CancelSignal, handed to the summarizer's call.

        The current request's messages in the middle (request.current_request_indices) are not
        summarised: they are pinned right after the head, whole, or the oldest of them cut, within
        ``request_budget`` (default: half the threshold; request.fit_requests). The summary
        follows them, kept only when it is smaller than what it replaces; the newest notes
        message of the middle stays, whole, right after the summary (summary.kept_notes).
        """
        fold = fold_tool_results(transcript, keep_last=keep_results, excerpt_chars=self.fold_excerpt_chars)
        done = _Compacted(fold.messages, pre - fold.saved_tokens, folded=len(fold.removed))
        if summarise_above is not None and done.post_tokens <= summarise_above:
            return done
        parts = split(done.messages, keep_messages)
        head, middle, tail = (done.messages[:parts.head_end], done.messages[parts.head_end:parts.tail_start],
                              done.messages[parts.tail_start:])
        notes = kept_notes(middle)
        at = [i - parts.head_end for i in current_request_indices(done.messages)
              if parts.head_end <= i < parts.tail_start]
        fitted = fit_requests([middle[i] for i in at], self.request_budget_tokens if request_budget is None
                              else request_budget)
        pinned = {i: fit for i, fit in zip(at, fitted) if fit is not None}  # middle index -> (message, cut)
        cut = next((c for _, c in pinned.values() if c is not None), None)
        rest = [m for i, m in enumerate(middle) if i not in pinned and m is not notes]
        summary = made = None
        if needs_summary(rest):
            made = await summarize(rest, self.summarizer, max_excerpt_chars=self.threshold_tokens, cancel=cancel,
                                   timeout_s=self.summary_timeout_s)
            summary = LLMMessage(role="user", content=made.text)
            if estimate_message_tokens(summary) >= estimate_tokens(rest):
                summary = None  # not smaller than what it would replace
        if summary is not None:
            kept = [*(m for m, _ in pinned.values()), summary, *([notes] if notes is not None else [])]
        elif cut is not None:  # only the request changes, in place
            kept = [pinned[i][0] if i in pinned else m for i, m in enumerate(middle)]
        else:
            return done
        done.messages = [*head, *kept, *tail]
        done.post_tokens -= estimate_tokens(middle) - estimate_tokens(kept)
        if summary is not None and made is not None:
            done.summarised, done.source = len(rest), made.describe()
        done.request_cut = cut
        return done

    def _rewrite(self, ctx: LoopContext, trigger: CompactionTrigger, pre: int, done: _Compacted, reason: str,
                 *, hysteresis: bool = True) -> RewriteRequest:
        post = max(0, done.post_tokens)
        self._anchor = (_RoundMark.of(ctx), post, len(done.messages))
        if hysteresis:
            self._last_post = post
        log.info("compaction (%s): %s", trigger, reason)
        return RewriteRequest(messages=done.messages, reason=reason, trigger=trigger, pre_tokens=pre, post_tokens=post)

    def _reminder(self, tripped: CircuitReason | None) -> LLMMessage | None:
        if tripped is None:
            return None
        count = self._breakers.max_refills + 1 if tripped == "rapid_refill" else self._breakers.max_ineffective
        fragment = CompactionThrashingReminder.for_reason(tripped, count=count, window=self._breakers.window)
        return fragment.to_message()
