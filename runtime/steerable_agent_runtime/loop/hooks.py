"""Loop hooks: what a hook sees (LoopContext), what it may return, and the base class.

Hooks return values and never mutate the transcript they are given. Every method is async and
may return None, which means "nothing to do". Merging several hooks is ChainHooks' job (one
place, rule by rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..models import LLMMessage, ToolCall

if TYPE_CHECKING:
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
    def proceed(cls, *, appends: Sequence[LLMMessage] = (), rewrite: RewriteRequest | None = None) -> "PreStepAction":
        return cls("proceed", None, list(appends), rewrite)

    @classmethod
    def reject(cls, reason: str) -> "PreStepAction":
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
    def fail(cls, reason: str | None = None) -> "RetryAction":
        return cls("fail", 0, None, reason)

    @classmethod
    def retry(cls, delay_ms: int = 0, *, rewrite: RewriteRequest | None = None, reason: str | None = None) -> "RetryAction":
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

    async def post_tool_result(self, result: "ToolResult", call: ToolCall, ctx: LoopContext) -> "ToolResult | None":
        return None

    async def on_request_error(
        self, error: BaseException, transcript: Sequence[LLMMessage], ctx: LoopContext
    ) -> RetryAction | None:
        return None

    async def before_completion(self, draft: LLMMessage, ctx: LoopContext) -> PreStepAction | None:
        return None


class NoopHooks(LoopHooks):
    """Hooks that do nothing (the default)."""
