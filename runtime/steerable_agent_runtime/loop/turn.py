"""One turn of a CoreLoop: its state, and the steps the round skeleton calls only when they have work.

The round skeleton (:func:`.rounds.turn_events`) runs the common round inline: the events, the
request, one tool call. What runs only sometimes lives here, each step a coroutine returning the
events it made (the skeleton yields them): the guards and hooks before a request
(:meth:`Turn.open_round`), a rewrite, the retry decision after a failed attempt, the end of a
request without tool calls (:meth:`Turn.settle`), the guards after a tool round and the
completion (:meth:`Turn.end`). Every step that ends the turn sets ``stopped``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import HookError, SteerableError, UsageError
from ..history import orphan_tool_result, resumable_transcript
from ..llm.errors import LLMError
from ..llm.types import LLMUsage
from ..models import AgentSession, LLMMessage, ToolCall, utc_now
from .events import CompletionStatus, LoopEvent
from .hookcalls import as_messages, call_hook
from .hooks import LoopContext, LoopHooks, PreStepAction, RetryAction, RewriteRequest, overrides
from .messages import assistant_message, calling_message, flat_calling_message
from .record import RecordWriter, repair_dangling
from .toolbatch import ToolBatch
from .unicode import clean_message

log = logging.getLogger("steerable_agent_runtime.loop")

if TYPE_CHECKING:
    from .core import CoreLoop

OUTCOME = {"completed": "ok", "failed": "error", "budget_exhausted": "budget_exhausted", "cancelled": "cancelled"}
MAX_ATTEMPTS_PER_REQUEST = 50
"""The most attempts of one round's request, whatever on_request_error says (RetryHooks makes 3)."""
ZERO_USAGE = LLMUsage()  # the usage of a reply that reported none (only read: to_wire)


class Turn:
    """The state of one turn (one ``run`` or ``resume``) and its occasional steps."""

    __slots__ = ("loop", "hooks", "transcript", "writer", "ctx", "batch", "run", "round", "usage",
                 "round_usage", "reply", "built_reply", "finish_reason", "stopped", "failure", "pre_step",
                 "before_completion")

    def __init__(self, loop: CoreLoop, transcript: list[LLMMessage], writer: RecordWriter, ctx: LoopContext,
                 batch: ToolBatch, run: Any) -> None:
        self.loop = loop
        self.hooks: LoopHooks = loop.hooks
        self.transcript = transcript
        self.writer = writer
        self.ctx = ctx
        self.batch = batch
        self.run = run
        self.round = 0
        self.usage = LLMUsage()  # the turn's: each reply's reported usage added in
        self.round_usage = ZERO_USAGE
        self.reply: LLMMessage | None = None
        self.built_reply = False
        """Whether ``reply`` (a reply with calls) came from messages.flat_calling_message: its
        fields are exactly the values that builder checked, and nothing has run since it was
        appended until the round's next flush."""
        self.finish_reason: str | None = None
        self.stopped = False
        self.failure: BaseException | None = None
        # LoopHooks' own (no-op) methods are not called (see hooks.overrides)
        self.pre_step = overrides(self.hooks, "pre_step")
        self.before_completion = overrides(self.hooks, "before_completion")

    # --- before the request ----------------------------------------------------------------

    async def open_round(self) -> list[LoopEvent]:
        """A round after its steer messages, when a guard or a hook may act: the cancel and budget
        guards, pre_step and a requested compaction (the caller then flushes). A cancel made while
        those hooks ran ends the turn here, their appends in the record, before any request."""
        events: list[LoopEvent] = []
        if self.loop._cancel:
            events += await self.end("cancelled", "cancelled before the request", requested=False)
            return events
        exhausted = self._exhausted()
        if exhausted is not None:
            events.append(LoopEvent("budget_exhausted", exhausted))
            events += await self.end("budget_exhausted", exhausted["reason"], requested=False)
            return events
        self.ctx.round_index = self.round
        try:
            rejected = await self._pre_step(events)
        except HookError as exc:
            events.append(error_event(exc))
            rejected = str(exc)
        if rejected is not None:
            events += await self.end("failed", rejected, requested=False)
        elif self.loop._cancel:  # cancel() called while pre_step or compact_now ran: nothing is sent
            events += await self.end("cancelled", "cancelled before the request", requested=False)
        return events

    def _exhausted(self) -> dict[str, Any] | None:
        total, config = self.usage.total_tokens, self.loop.config
        if self.round >= config.max_rounds:
            return {"reason": "max_rounds", "rounds": self.round, "totalTokens": total}
        if config.budget_tokens is not None and total >= config.budget_tokens:
            return {"reason": "budget_tokens", "rounds": self.round, "totalTokens": total}
        return None

    async def _pre_step(self, events: list[LoopEvent]) -> str | None:
        """hooks.pre_step, then a requested compaction, their events added to ``events``; the
        reason of a reject (None: go on)."""
        hooks, name = self.hooks, hook_name(self.hooks)
        action = None
        if self.pre_step:
            action = await call_hook(hooks, "pre_step", PreStepAction, list(self.transcript), self.ctx)
        if action is not None and action.action == "reject":
            events.append(LoopEvent("hook_action", {"hook": name, "action": "reject", "reason": action.reason,
                                                    "preTokens": None, "postTokens": None}))
            return action.reason or "rejected by a pre_step hook"
        if action is not None and action.rewrite is not None:
            events.append(await self.rewrite(action.rewrite, "rewrite"))
        if action is not None and action.appends:
            self.transcript.extend(as_messages(hooks, "pre_step", action.appends))
            events.append(LoopEvent("hook_action", {"hook": name, "action": "append", "reason": action.reason,
                                                    "preTokens": None, "postTokens": None,
                                                    "count": len(action.appends)}))
        if self.loop._compact:
            self.loop._compact = False
            request = await call_hook(hooks, "compact_now", RewriteRequest, list(self.transcript), self.ctx)
            if request is not None:
                events.append(await self.rewrite(request, "compact"))
            else:
                events.append(LoopEvent("hook_action", {"hook": name, "action": "compact_noop",
                                                        "reason": "nothing to compact", "preTokens": None,
                                                        "postTokens": None}))
        return None

    async def rewrite(self, request: RewriteRequest, action: str) -> LoopEvent:
        """Replace the transcript (one compaction_boundary in the record) and describe it.

        Raises HookError, before anything is written, for messages that are not messages and
        for a transcript no provider takes (empty, or a tool result whose call it dropped: in
        the record such a boundary would also make the chat unresumable); a lone surrogate in
        them (a summariser's text) is replaced by U+FFFD (.unicode)."""
        messages = [clean_message(m) for m in as_messages(self.hooks, "rewrite", request.messages)]
        problem = "is empty" if not messages else _orphan_problem(messages)
        if problem is not None:
            raise HookError(f"{hook_name(self.hooks)}'s {action} would leave a transcript that {problem}; the"
                            " transcript and the record were left as they were",
                            hint="a rewrite keeps at least one message and every tool result with its call")
        if messages != request.messages:
            request = replace(request, messages=messages)
        await self.writer.flush(self.transcript)
        await self.writer.rewrite(request)
        self.transcript[:] = messages
        return LoopEvent("hook_action", {"hook": hook_name(self.hooks), "action": action, "reason": request.reason,
                                         "trigger": request.trigger, "preTokens": request.pre_tokens,
                                         "postTokens": request.post_tokens})

    # --- the request ------------------------------------------------------------------------

    async def after_error(self, error: BaseException) -> tuple[list[LoopEvent], bool]:
        """After a failed attempt: the events to yield, and whether to make another attempt (the
        on_request_error hook asked for a retry and its delay passed without a cancel). When
        not, the round's request is done with ``failure`` set (or a cancel came)."""
        loop = self.loop
        try:
            action = None if loop._cancel else await call_hook(self.hooks, "on_request_error", RetryAction, error,
                                                                 list(self.transcript), self.ctx)
            if action is not None and action.action == "retry" and self.ctx.attempt >= MAX_ATTEMPTS_PER_REQUEST:
                action = None  # the hook would retry for ever: the last error stands
            events = []
            if action is not None and action.action == "retry" and action.rewrite is not None:
                events.append(await self.rewrite(action.rewrite, "rewrite"))
        except HookError as exc:
            self.failure = exc
            return [], False
        if action is None or action.action != "retry":
            self.failure = error
            return [], False
        if action.delay_ms > 0 and not loop._cancel:
            wake = loop._cancel_event = asyncio.Event()  # cancel() sets it: the wait ends at once
            try:
                await asyncio.wait_for(wake.wait(), action.delay_ms / 1000.0)
            except TimeoutError:
                pass
            finally:
                loop._cancel_event = None
        else:
            await asyncio.sleep(0)  # a hook retrying at once still lets a cancel() from another task in
        return events, not loop._cancel

    def take_reply(self, text: list[str], calls: list[ToolCall], usage: LLMUsage | None, finish_reason: str | None,
                   cancelled: bool) -> None:
        """Keep a successful attempt: the context's token figures, the turn's usage, the assistant
        message (appended to the transcript; none when a cancel came before anything streamed)."""
        if usage is not None:
            ctx = self.ctx
            ctx.last_prompt_tokens = usage.prompt_tokens
            ctx.last_prompt_transcript_len = len(self.transcript)
            ctx.last_cached_prompt_tokens = usage.cached_prompt_tokens
            ctx.last_cache_creation_tokens = usage.cache_creation_tokens
            total = self.usage
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
            total.total_tokens += usage.total_tokens
            total.cached_prompt_tokens += usage.cached_prompt_tokens
            total.cache_creation_tokens += usage.cache_creation_tokens
            self.round_usage = usage
        else:
            self.round_usage = ZERO_USAGE
        self.finish_reason = finish_reason
        if calls:
            if len(calls) > 1 and len({c.id for c in calls}) < len(calls):
                calls[:] = unique_ids(calls)
            content = "".join(text) if text else None
            reply = flat_calling_message(content, calls)
            if reply is None:
                reply = calling_message(content, calls)
                self.built_reply = False
            else:
                self.built_reply = True  # the round's flush may take it as built (history_append.built_snapshot)
        elif text:
            reply = assistant_message("".join(text))
        elif cancelled:  # nothing streamed before the cancel: no reply
            self.reply = None
            return
        else:  # nothing streamed: an empty reply
            reply = assistant_message("")
        self.reply = reply
        self.transcript.append(reply)

    # --- after the request ------------------------------------------------------------------

    async def settle(self) -> list[LoopEvent]:
        """A round whose request failed or answered without tool calls: the failure, a cancel, or
        the completion (before_completion may continue the turn with appends instead)."""
        if self.failure is not None:
            return [error_event(self.failure), *await self.end("failed", str(self.failure))]
        if self.loop._cancel:
            return await self.end("cancelled", "cancelled while streaming")
        decision = None
        if self.before_completion:
            draft = self.reply or LLMMessage(role="assistant", content="")
            try:
                decision = await call_hook(self.hooks, "before_completion", PreStepAction, draft, self.ctx)
                appends = as_messages(self.hooks, "before_completion", decision.appends) if decision else []
            except HookError as exc:
                return [error_event(exc), *await self.end("failed", str(exc))]
        if decision is not None and decision.action == "reject":
            reject = LoopEvent("hook_action", {"hook": hook_name(self.hooks), "action": "reject",
                                               "reason": decision.reason, "preTokens": None, "postTokens": None})
            return [reject, *await self.end("failed", decision.reason or "rejected before completion")]
        if decision is not None and decision.appends:
            self.transcript.extend(appends)
            await self.writer.flush(self.transcript)
            return [LoopEvent("hook_action", {"hook": hook_name(self.hooks), "action": "append",
                                              "reason": decision.reason, "preTokens": None, "postTokens": None,
                                              "count": len(decision.appends)}),
                    self.stage_complete()]
        return [self.stage_complete(), *await self.end("completed", self.finish_reason or "stop")]

    async def tool_guards(self) -> list[LoopEvent]:
        """What ends the turn after a tool round (a cancel, max_tool_errors); [] to go on."""
        if self.loop._cancel:
            return await self.end("cancelled", "cancelled during tool calls")
        errors = self.batch.consecutive_errors
        if errors >= self.loop.config.max_tool_errors:
            reason = f"max_tool_errors: {errors} consecutive tool errors"
            error = LoopEvent("error", {"message": reason, "hint": "look at the failed tool results in the transcript",
                                        "kind": "tool_errors"})
            return [error, *await self.end("failed", reason)]
        return []

    def stage_complete(self) -> LoopEvent:
        """The ``stage_complete`` event of this round."""
        return LoopEvent("stage_complete", {"round": self.round, "usage": self.round_usage.to_wire()})

    async def end(self, status: CompletionStatus, reason: str, *, requested: bool = True) -> list[LoopEvent]:
        """End the turn: the last flush, the trace outcome, the ``completion`` event (its ``rounds``:
        the rounds that sent a request, this one included unless ``requested`` is False)."""
        writer = self.writer
        if writer.storage is not None and not writer.flush_now(self.transcript):
            await writer.flush(self.transcript)
        self.stopped = True
        usage = self.loop.usage = self.usage
        self.run.set_outcome(OUTCOME[status])
        return [LoopEvent("completion", {"status": status, "reason": reason, "usage": usage.to_wire(),
                                         "rounds": self.round + 1 if requested else self.round,
                                         "traceId": self.run.trace_id})]


async def open_transcript(storage: Any, writer: RecordWriter, messages: list[LLMMessage],
                          resume_id: str | None) -> list[LLMMessage]:
    """The transcript a turn starts from, the record lined up with it: ``messages`` (a run), or
    the record's repaired transcript with ``messages`` appended (a resume)."""
    if resume_id is None:
        await writer.start(messages)
        return messages
    stored = await resumable_transcript(storage, resume_id)
    if not stored and not messages:
        raise UsageError(f"record {resume_id!r} is empty: nothing to resume",
                         hint="start the chat with run(messages, chat_id=...)")
    repaired, append_only = repair_dangling(stored, messages)
    writer.adopt(stored)
    if append_only:
        await writer.flush(repaired)
    else:
        await storage.append_history(resume_id, [{"type": "seed", "messages": [m.to_wire() for m in repaired]}])
        writer.adopt(repaired)
    return [*repaired, *messages]


def _orphan_problem(messages: list[LLMMessage]) -> str | None:
    orphan = orphan_tool_result(messages)
    if orphan is None:
        return None
    return f"holds a tool result for call {orphan[1]!r} (message {orphan[0]}) whose call it does not hold"


def unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with a repeated id (a provider that sent one twice in a response) made unique
    (``<id>_2``, ...), so each result answers exactly one call; the first keeps its id."""
    seen: set[str] = set()
    out = []
    for call in calls:
        new, n = call.id, 1
        while new in seen:
            n += 1
            new = f"{call.id}_{n}"
        seen.add(new)
        out.append(call if new == call.id else call.model_copy(update={"id": new}))
    return out


def hook_name(hooks: LoopHooks) -> str:
    """How ``hook_action`` events name the hooks (their class)."""
    return type(hooks).__name__


def sunk(sink: Callable[[str, str], None], events: tuple[LoopEvent, ...]) -> Exception | None:
    """Hand delta events to the text sink; what the sink raised (it fails the attempt), or None."""
    try:
        for event in events:
            sink(event.kind, event.data["delta"])
    except Exception as exc:  # noqa: BLE001 - a failing sink fails the attempt like a provider error
        return exc
    return None


def error_event(error: BaseException) -> LoopEvent:
    """The ``error`` event of a failed request. An error that is no SteerableError is a bug
    (a provider's or a hook's): its hint says "see the logs", so its traceback is logged."""
    if not isinstance(error, SteerableError):
        log.error("the turn failed on an unexpected error", exc_info=(type(error), error, error.__traceback__))
    data: dict[str, Any] = {"message": str(error), "hint": getattr(error, "hint", None) or "see the logs"}
    kind = getattr(error, "kind", None)
    if kind is not None:
        data["kind"] = kind
    if isinstance(error, LLMError):  # which provider, and its HTTP status when it answered one
        data["provider"], data["statusCode"] = error.provider, error.status_code
    return LoopEvent("error", data)


def default_session(chat_id: str) -> AgentSession:
    """The session a traced run records when the caller gave none."""
    now = utc_now()
    return AgentSession(session_id=f"loop-{chat_id}", user_id="local", chat_id=chat_id, current_stage="RUNNING",
                        is_active=True, created_at=now, updated_at=now)
