"""Loop hooks: what a hook sees (LoopContext), what it may return, and the base class.

Hooks return values and never mutate the transcript they are given. Every method is async and
may return None, which means "nothing to do". Merging several hooks is ChainHooks' job (one
place, rule by rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from ..llm.retry import RetryPolicy
from ..models import LLMMessage, ToolCall
from .hookcalls import as_messages

if TYPE_CHECKING:
    from ..llm.cancel import CancelSignal
    from ..tools import ToolResult

CompactionTrigger = Literal["pressure", "overflow", "micro", "manual"]


@dataclass
class LoopContext:
    """The loop's state as hooks see it (read it; the loop owns it).

    ``last_prompt_tokens`` is the provider's reported prompt tokens of the last request (None
    before one), built from the first ``last_prompt_transcript_len`` messages of the
    transcript: a hook estimates only what was appended after that.
    """

    chat_id: str
    round_index: int = 0
    last_prompt_tokens: int | None = None
    last_prompt_transcript_len: int | None = None
    last_cached_prompt_tokens: int | None = None
    last_cache_creation_tokens: int | None = None
    consecutive_tool_errors: int = 0
    consent_granted: bool = False
    record_id: str | None = None
    attempt: int = 1
    """The 1-based number of the provider attempt of this round (``on_request_error`` sees the
    attempt that just failed)."""
    cancel: CancelSignal | None = None
    """The turn's cancel signal (:mod:`..llm.cancel`), set by ``CoreLoop.cancel()``: a hook that
    calls a provider itself (the compaction summariser) passes it as ``cancel=``, so a cancel
    ends that call at once too."""


@dataclass
class RewriteRequest:
    """Replace the whole transcript with ``messages`` (a compaction): one compaction_boundary."""

    messages: list[LLMMessage]
    reason: str
    trigger: CompactionTrigger = "pressure"
    pre_tokens: int = 0
    post_tokens: int = 0


@dataclass
class PreStepAction:
    """What pre_step asks for: proceed (optionally appending or rewriting) or reject the turn."""

    action: Literal["proceed", "reject"] = "proceed"
    reason: str | None = None
    appends: list[LLMMessage] = field(default_factory=list)
    rewrite: RewriteRequest | None = None

    @classmethod
    def proceed(cls, *, appends: Sequence[LLMMessage] = (), rewrite: RewriteRequest | None = None) -> PreStepAction:
        return cls("proceed", None, list(appends), rewrite)

    @classmethod
    def reject(cls, reason: str) -> PreStepAction:
        return cls("reject", reason)


@dataclass
class RetryAction:
    """What on_request_error asks for: fail the request, or retry after ``delay_ms``
    (optionally on a rewritten transcript, e.g. after an overflow compaction)."""

    action: Literal["fail", "retry"] = "fail"
    delay_ms: int = 0
    rewrite: RewriteRequest | None = None
    reason: str | None = None

    @classmethod
    def fail(cls, reason: str | None = None) -> RetryAction:
        return cls("fail", 0, None, reason)

    @classmethod
    def retry(cls, delay_ms: int = 0, *, rewrite: RewriteRequest | None = None, reason: str | None = None) -> RetryAction:
        return cls("retry", delay_ms, rewrite, reason)


class LoopHooks:
    """Base class of every hook; each method's default does nothing (returns None).

    - ``pre_step``: before each request; may reject the turn, append messages, or rewrite.
    - ``compact_now``: the manual compaction (``CoreLoop.request_compact``); a RewriteRequest
      with trigger ``manual``, or None when nothing would change.
    - ``post_tool_result``: after each tool result; may return a replacement ToolResult.
    - ``on_request_error``: a provider request failed; RetryAction or None (fail).
    - ``before_completion``: the turn is about to end with ``draft``; returning a PreStepAction
      with appends continues the loop with them, a reject fails the turn, None completes.
    """

    async def pre_step(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> PreStepAction | None:
        return None

    async def compact_now(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> RewriteRequest | None:
        return None

    async def post_tool_result(self, result: ToolResult, call: ToolCall, ctx: LoopContext) -> ToolResult | None:
        return None

    async def on_request_error(
        self, error: BaseException, transcript: Sequence[LLMMessage], ctx: LoopContext
    ) -> RetryAction | None:
        return None

    async def before_completion(self, draft: LLMMessage, ctx: LoopContext) -> PreStepAction | None:
        return None


class NoopHooks(LoopHooks):
    """Hooks that do nothing (the default)."""


def overrides(hooks: LoopHooks, name: str) -> bool:
    """Whether ``hooks`` has its own ``name`` method (False: LoopHooks' default, which does
    nothing, so the loop need not call it). Anything not a LoopHooks counts as overriding."""
    if type(hooks) is NoopHooks and not hooks.__dict__:  # the default hooks: nothing overridden
        return False
    return (not isinstance(hooks, LoopHooks) or name in getattr(hooks, "__dict__", ())
            or getattr(type(hooks), name, None) is not getattr(LoopHooks, name))


class ChainHooks(LoopHooks):
    """Several hooks as one, merged in order (the one place the merge rules live).

    - ``pre_step``: each hook sees the transcript as the hooks before it left it (their appends
      or rewrite applied, in a new list of LLMMessages: a hook's wire dicts are validated as the
      loop validates them, HookError naming that hook). The first reject wins. A rewrite drops
      the appends before it; appends after a rewrite fold into its messages, keeping its token
      figures.
    - ``compact_now``: forwarded in order to the first hook that returns a rewrite.
    - ``post_tool_result``: each hook may replace the result; the next one sees the replacement.
    - ``on_request_error``: the first retry wins; otherwise the first fail, else None.
    - ``before_completion``: the first reject wins; appends are concatenated in order.
    """

    def __init__(self, *hooks: LoopHooks) -> None:
        self.hooks: tuple[LoopHooks, ...] = tuple(h for h in hooks if h is not None)

    async def pre_step(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> PreStepAction | None:
        appends: list[LLMMessage] = []
        rewrite: RewriteRequest | None = None
        acted = False
        for hook in self.hooks:
            current = list(rewrite.messages) if rewrite else [*transcript, *appends]
            action = await hook.pre_step(current, ctx)
            if action is None:
                continue
            if action.action == "reject":
                return action
            acted = True
            # LLMMessages, not the wire dicts a hook may give: the next hook is promised a transcript
            if action.rewrite is not None:
                rewrite = replace(action.rewrite, messages=as_messages(hook, "pre_step", action.rewrite.messages))
                appends = []
            added = as_messages(hook, "pre_step", action.appends) if action.appends else []
            if rewrite is not None:
                rewrite.messages.extend(added)
            else:
                appends.extend(added)
        return PreStepAction.proceed(appends=appends, rewrite=rewrite) if acted else None

    async def compact_now(self, transcript: Sequence[LLMMessage], ctx: LoopContext) -> RewriteRequest | None:
        for hook in self.hooks:
            rewrite = await hook.compact_now(transcript, ctx)
            if rewrite is not None:
                return rewrite
        return None

    async def post_tool_result(self, result: ToolResult, call: ToolCall, ctx: LoopContext) -> ToolResult | None:
        replaced = None
        for hook in self.hooks:
            out = await hook.post_tool_result(replaced or result, call, ctx)
            if out is not None:
                replaced = out
        return replaced

    async def on_request_error(
        self, error: BaseException, transcript: Sequence[LLMMessage], ctx: LoopContext
    ) -> RetryAction | None:
        first_fail = None
        for hook in self.hooks:
            action = await hook.on_request_error(error, transcript, ctx)
            if action is None:
                continue
            if action.action == "retry":
                return action
            first_fail = first_fail or action
        return first_fail

    async def before_completion(self, draft: LLMMessage, ctx: LoopContext) -> PreStepAction | None:
        appends: list[LLMMessage] = []
        acted = False
        for hook in self.hooks:
            action = await hook.before_completion(draft, ctx)
            if action is None:
                continue
            if action.action == "reject":
                return action
            acted = True
            appends.extend(action.appends)
        return PreStepAction.proceed(appends=appends) if acted else None


class RetryHooks(LoopHooks):
    """Retries a failed provider request by ``policy`` (llm.retry.RetryPolicy: 3 attempts, 200 ms
    doubling to 5 s, +-20 % jitter, Retry-After honoured up to 180 s, only retryable kinds).

    Returns None (fail) for anything the policy does not retry, so a later hook in a chain
    (e.g. overflow compaction) may still act on a ``context_overflow``.
    """

    def __init__(self, policy: RetryPolicy | None = None) -> None:
        self.policy = policy or RetryPolicy()

    async def on_request_error(
        self, error: BaseException, transcript: Sequence[LLMMessage], ctx: LoopContext
    ) -> RetryAction | None:
        delay = self.policy.delay_ms(error, ctx.attempt)
        if delay is None:
            return None
        return RetryAction.retry(delay, reason=f"retry {ctx.attempt + 1} of {self.policy.max_attempts}")
