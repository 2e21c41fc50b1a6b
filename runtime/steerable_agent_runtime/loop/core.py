"""CoreLoop: stream a model, run its tool calls, repeat; the record written as it goes.

A round: take steer messages -> cancel check -> max_rounds / budget_tokens guard ->
``hooks.pre_step`` (reject, rewrite, appends) -> a pending ``request_compact`` -> flush to the
record -> stream the provider (retries through ``hooks.on_request_error``) -> the assistant
message; with tool calls: flush (so a crash mid-tool leaves a call resume can repair), run
them (:mod:`.toolbatch`), flush -> next round; without: ``hooks.before_completion`` -> flush ->
completion.

Guarantees:
- ``completion`` is always the last event of a turn; its status is completed, failed,
  budget_exhausted or cancelled. Provider errors end the turn as failed (an ``error`` event
  first) instead of raising; a storage error or a RecordFormatError raises out of the iterator.
- With a storage, after every flush ``resume_transcript(storage, record_id)`` equals the
  transcript of the next request; a crash loses at most the round in flight.
- ``cancel()`` winds the turn down at the next chunk or tool boundary; the record then holds
  the partial assistant text and a result for every call.
- ``run`` raises UsageError at once for an empty transcript or while another turn runs.
"""

from __future__ import annotations

import asyncio
from types import AsyncGeneratorType
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..history import resume_transcript
from ..llm.types import LLMUsage
from ..models import AgentSession, LLMMessage, ToolCall, utc_now
from ..tools import ToolRouter
from .config import LoopConfig
from .events import CompletionStatus, LoopEvent
from .hooks import LoopContext, LoopHooks, NoopHooks, RewriteRequest, overrides
from .record import RecordWriter, repair_dangling
from .request import Attempt, SinkCancel, close_stream, provider_sink
from .spans import NULL_SPAN, null_run
from .toolbatch import Approver, ToolBatch

_DEFAULT_CONFIG = LoopConfig()  # frozen: one instance serves every loop created without a config
_OUTCOME = {"completed": "ok", "failed": "error", "budget_exhausted": "budget_exhausted", "cancelled": "cancelled"}


@dataclass
class _Turn:
    """The state of one turn (one ``run`` or ``resume``)."""

    transcript: list[LLMMessage]
    writer: RecordWriter
    ctx: LoopContext
    batch: ToolBatch
    run: Any
    round: int = 0
    rounds_run: int = 0
    usage: LLMUsage = field(default_factory=LLMUsage)
    round_usage: LLMUsage = field(default_factory=LLMUsage)
    reply: LLMMessage | None = None
    calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    stopped: bool = False
    failure: BaseException | None = None


def _as_message(message: LLMMessage | Mapping[str, Any]) -> LLMMessage:
    return message if isinstance(message, LLMMessage) else LLMMessage.model_validate(message)


def _hook_name(hooks: LoopHooks) -> str:
    return type(hooks).__name__


class CoreLoop:
    """The agent loop (RUNTIME.md, "The loop"). One turn at a time per instance.

    ``tools`` is a ToolRouter or any object with ``describe()`` and ``async execute(call, ctx)``
    (None: no tools). ``approver`` is ``async (call, mode, ctx) -> bool`` for ``local`` and
    ``destructive`` calls; without one they are denied. ``recorder`` is a TraceRecorder.
    ``text_sink`` (a relay's hot path): ``sink(kind, delta)``, called synchronously, in order,
    for each ``content_delta`` / ``reasoning_delta`` instead of yielding that event (every
    other event, and the text the record keeps, are unchanged).
    """

    def __init__(self, provider: Any, tools: Any = None, *, config: LoopConfig | None = None,
                 hooks: LoopHooks | None = None, storage: Any = None, record_id: str | None = None,
                 recorder: Any = None, approver: Approver | None = None,
                 text_sink: Callable[[str, str], None] | None = None) -> None:
        self.provider = provider
        self.tools = tools if tools is not None else ToolRouter()
        self.config = config or _DEFAULT_CONFIG
        self.hooks = hooks or NoopHooks()
        self.storage = storage
        self.record_id = record_id
        self.recorder = recorder
        self.approver = approver
        self.text_sink = text_sink
        self.transcript: list[LLMMessage] = []
        self.usage = LLMUsage()
        self.trace_id: str | None = None
        self._steer: list[str] = []
        self._cancel = False
        self._cancel_event: asyncio.Event | None = None
        self._compact = False
        self._running = False
        self._batch: ToolBatch | None = None
        self._hook_pre_step = self._hook_before_completion = True  # set per turn (see hooks.overrides)

    # --- control (callable from another task while a turn runs) ---------------------------

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self._running

    def steer(self, text: str) -> bool:
        """Queue a user message for the start of the next round (a ``steer`` event when taken)."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError("steer text is empty", hint="pass the message to add to the transcript")
        self._steer.append(text)
        return True

    def cancel(self) -> bool:
        """Wind the turn down at the next chunk or tool boundary (completion ``cancelled``)."""
        self._cancel = True
        if self._cancel_event is not None:
            self._cancel_event.set()
        if self._batch is not None:
            self._batch.interrupt()
        return True

    def request_compact(self) -> bool:
        """Ask for a manual compaction (``hooks.compact_now``) after the next regular pre_step."""
        self._compact = True
        return True

    # --- turns ------------------------------------------------------------------------------

    def run(self, messages: Iterable[LLMMessage | Mapping[str, Any]], *, chat_id: str,
            session: AgentSession | None = None) -> AsyncIterator[LoopEvent]:
        """Start a turn from ``messages``; returns the async iterator of its events.

        Raises UsageError at once for an empty transcript, a missing chat_id, or a turn
        already running. With a storage, the record ``record_id`` (default chat_id) is lined
        up with ``messages`` first (see RecordWriter.start).
        """
        transcript = [_as_message(m) for m in messages]
        if not transcript:
            raise UsageError("the transcript is empty: the model has nothing to answer",
                             hint="pass at least one message, e.g. {'role': 'user', 'content': '...'}")
        self._check_start(chat_id)
        return self._turn(transcript, chat_id, session, None)

    def resume(self, record_id: str, messages: Iterable[LLMMessage | Mapping[str, Any]] = (), *,
               chat_id: str | None = None, session: AgentSession | None = None) -> AsyncIterator[LoopEvent]:
        """Continue the record ``record_id`` (also one another process wrote), ``messages`` appended.

        Dangling tool calls get an "interrupted; verify its side effects" result, appended to the
        record. Raises UsageError without a storage or while a turn runs; the iterator raises
        RecordFormatError (the record untouched) for a record this build cannot read, and
        UsageError for an empty record with no new messages.
        """
        if self.storage is None:
            raise UsageError("resume needs a storage", hint="create the CoreLoop with storage=...")
        extra = [_as_message(m) for m in messages]
        self._check_start(chat_id or record_id)
        return self._turn(extra, chat_id or record_id, session, record_id)

    def _check_start(self, chat_id: str) -> None:
        if not isinstance(chat_id, str) or not chat_id:
            raise UsageError("chat_id is required", hint="pass chat_id='...' (the record id defaults to it)")
        if self._running:
            raise UsageError("a turn is already running on this CoreLoop",
                             hint="wait for its completion event, or cancel() it first")

    async def _turn(self, messages: list[LLMMessage], chat_id: str, session: AgentSession | None,
                    resume_id: str | None) -> AsyncIterator[LoopEvent]:
        # The one generator of a turn: the round skeleton, with every step that yields nothing
        # while it works a coroutine returning its events (one generator layer per event, not
        # one per step); only a provider attempt streams from a generator of its own.
        self._running = True
        self._cancel_event = asyncio.Event()
        if self._cancel:
            self._cancel_event.set()
        self._hook_pre_step = overrides(self.hooks, "pre_step")
        self._hook_before_completion = overrides(self.hooks, "before_completion")
        try:
            record_id = resume_id or self.record_id or chat_id
            writer = RecordWriter(self.storage, record_id)
            transcript = await self._opening(writer, messages, resume_id)
            ctx = LoopContext(chat_id=chat_id, record_id=record_id)
            batch = self._batch = ToolBatch(self.tools, self.config, self.hooks, self.approver, self._cancel_event)
            tracing = self.recorder.run(session or _default_session(chat_id)) if self.recorder else null_run()
            async with tracing as run:
                self.trace_id = run.trace_id
                t = _Turn(transcript, writer, ctx, batch, run)
                self.transcript = t.transcript
                options = self.config.request_options()
                sink = self.text_sink
                traced = run.trace_id is not None
                recording = self.storage is not None
                max_rounds, budget = self.config.max_rounds, self.config.budget_tokens
                max_tool_errors = self.config.max_tool_errors
                try:
                    while True:
                        # stage_start and each steer event go out before the next step runs, so a
                        # cancel() or steer() made on seeing them acts on this round
                        yield LoopEvent("stage_start", {"round": t.round})
                        if self._steer:
                            for text in self._take_steer():
                                transcript.append(LLMMessage(role="user", content=text))
                                yield LoopEvent("steer", {"content": text})
                        if (self._cancel or t.round >= max_rounds or self._hook_pre_step or self._compact
                                or (budget is not None and t.usage.total_tokens >= budget)):
                            for event in await self._open_round(t):  # a guard or a hook has work to do
                                yield event
                            if t.stopped:
                                return
                        else:
                            ctx.round_index = t.round
                        if recording and len(transcript) > writer.flushed:
                            await writer.flush(transcript)
                        t.reply, t.calls, t.failure = None, (), None
                        t.rounds_run = t.round + 1
                        attempt = 1
                        while True:  # the attempts of this round's request, streamed here (see .request)
                            outcome = Attempt(t.round, attempt)
                            ctx.attempt = attempt
                            yield LoopEvent("llm_request", {"round": t.round, "attempt": attempt})
                            async with (run.llm_request(outcome.span_start(self.provider), attempt=attempt)
                                        if traced else NULL_SPAN) as span:
                                # with a sink, a provider taking the text_sink option hands it text-only
                                # chunks as strings (request.provider_sink); the others ignore it
                                opts = options if sink is None else {
                                    **options, "text_sink": provider_sink(outcome.text, sink, self._cancel_event)}
                                try:
                                    stream = self.provider.stream(list(transcript), tools=self.tools.describe() or None,
                                                                  **opts).__aiter__()
                                except Exception as exc:  # noqa: BLE001 - on_request_error decides
                                    outcome.error, stream = exc, None
                                try:
                                    while stream is not None:
                                        try:
                                            chunk = await stream.__anext__()
                                        except StopAsyncIteration:
                                            break
                                        except SinkCancel:  # a cancel seen at a chunk given to the text_sink
                                            outcome.cancelled = True
                                            break
                                        except Exception as exc:  # noqa: BLE001 - on_request_error decides
                                            outcome.error = exc
                                            break
                                        content = chunk.content_delta
                                        if (content and not chunk.reasoning_delta and chunk.tool_call is None
                                                and chunk.usage is None and chunk.finish_reason is None):
                                            outcome.text.append(content)  # most chunks: text and nothing else
                                            if sink is None:
                                                yield LoopEvent("content_delta", {"delta": content})
                                            else:
                                                try:
                                                    sink("content_delta", content)
                                                except Exception as exc:  # noqa: BLE001 - fails the attempt
                                                    outcome.error = exc
                                                    break
                                        else:
                                            if content or chunk.reasoning_delta:
                                                deltas = outcome.deltas(chunk)
                                                if sink is None:
                                                    for event in deltas:
                                                        yield event
                                                elif (error := _sunk(sink, deltas)) is not None:
                                                    outcome.error = error
                                                    break
                                            if chunk.tool_call is not None:  # Attempt.take, inline
                                                outcome.calls.append(chunk.tool_call)
                                            if chunk.usage is not None:
                                                outcome.usage = chunk.usage
                                            if chunk.finish_reason is not None:
                                                outcome.finish_reason = chunk.finish_reason
                                        if self._cancel:
                                            outcome.cancelled = True
                                            break
                                finally:
                                    if stream is not None and not (type(stream) is AsyncGeneratorType
                                                                   and stream.ag_frame is None):
                                        await close_stream(stream)
                                if traced:
                                    outcome.finish_span(span)
                            yield outcome.response_event()
                            if outcome.error is None:
                                self._take_reply(t, outcome)
                                break
                            events, retry = await self._after_error(t, outcome.error)
                            for event in events:
                                yield event
                            if not retry:
                                break
                            attempt += 1
                        if t.calls and t.failure is None:
                            if recording:
                                await writer.flush(transcript)  # the calls are in the record before any runs
                            results: list[tuple[ToolCall, Any]] = []
                            for group in [t.calls] if len(t.calls) == 1 else batch.groups(t.calls):
                                if self._cancel:
                                    for event in batch.answer_cancelled(group, t.ctx, results):
                                        yield event
                                    continue
                                for call in group:
                                    yield LoopEvent("tool_call_start", {"id": call.id, "name": call.name,
                                                                        "arguments": call.arguments})
                                for event in await batch.run_group(group, t.ctx, run, results):
                                    yield event
                            for call, result in results:  # toolbatch.tool_message, inline
                                transcript.append(LLMMessage(role="tool", tool_call_id=call.id, name=call.name,
                                                               content=result.to_content()))
                            if recording:
                                await writer.flush(transcript)
                            yield LoopEvent("stage_complete", {"round": t.round, "usage": t.round_usage.to_wire()})
                            if self._cancel or batch.consecutive_errors >= max_tool_errors:
                                for event in await self._tool_guards(t):
                                    yield event
                        else:
                            for event in await self._settle(t):
                                yield event
                        if t.stopped:
                            return
                        t.round += 1
                except GeneratorExit:
                    run.set_outcome("cancelled")
                    raise
        finally:
            self._running = False
            self._cancel = False
            self._cancel_event = None
            self._batch = None

    async def _opening(self, writer: RecordWriter, messages: list[LLMMessage], resume_id: str | None) -> list[LLMMessage]:
        if resume_id is None:
            await writer.start(messages)
            return list(messages)
        stored = await resume_transcript(self.storage, resume_id)
        if not stored and not messages:
            raise UsageError(f"record {resume_id!r} is empty: nothing to resume",
                             hint="start the chat with run(messages, chat_id=...)")
        repaired, append_only = repair_dangling(stored)
        writer.adopt(stored)
        if append_only:
            await writer.flush(repaired)
        else:
            await self.storage.append_history(
                resume_id, [{"type": "seed", "messages": [m.to_wire() for m in repaired]}])
            writer.adopt(repaired)
        return [*repaired, *messages]

    # --- the rounds -------------------------------------------------------------------------

    async def _open_round(self, t: _Turn) -> list[LoopEvent]:
        """A round after its steer messages, when a guard or a hook may act: the cancel and budget
        guards, pre_step and a requested compaction (the caller then flushes). Sets ``t.stopped``
        when the turn ends here."""
        events: list[LoopEvent] = []
        if self._cancelled():
            events += await self._end(t, "cancelled", "cancelled before the request")
            return events
        exhausted = self._exhausted(t)
        if exhausted is not None:
            events.append(LoopEvent("budget_exhausted", exhausted))
            events += await self._end(t, "budget_exhausted", exhausted["reason"])
            return events
        t.ctx.round_index = t.round
        rejected = await self._pre_step(t, events)
        if rejected is not None:
            events += await self._end(t, "failed", rejected)
        return events

    def _take_steer(self) -> list[str]:
        taken, self._steer = self._steer, []
        return taken

    def _cancelled(self) -> bool:
        # cancel() sets the flag and the event together; the flag is the cheaper read
        return self._cancel

    def _exhausted(self, t: _Turn) -> dict[str, Any] | None:
        total = t.usage.total_tokens
        if t.round >= self.config.max_rounds:
            return {"reason": "max_rounds", "rounds": t.round, "totalTokens": total}
        budget = self.config.budget_tokens
        if budget is not None and total >= budget:
            return {"reason": "budget_tokens", "rounds": t.round, "totalTokens": total}
        return None

    async def _pre_step(self, t: _Turn, events: list[LoopEvent]) -> str | None:
        """hooks.pre_step, then a requested compaction, their events added to ``events``; the
        reason of a reject (None: go on). LoopHooks' own pre_step (nothing to do) is not called."""
        action = await self.hooks.pre_step(list(t.transcript), t.ctx) if self._hook_pre_step else None
        name = _hook_name(self.hooks)
        if action is not None and action.action == "reject":
            reason = action.reason or "rejected by a pre_step hook"
            events.append(LoopEvent("hook_action", {"hook": name, "action": "reject", "reason": action.reason,
                                                    "preTokens": None, "postTokens": None}))
            return reason
        if action is not None and action.rewrite is not None:
            events.append(await self._rewrite(t, action.rewrite, "rewrite"))
        if action is not None and action.appends:
            t.transcript.extend(action.appends)
            events.append(LoopEvent("hook_action", {"hook": name, "action": "append", "reason": action.reason,
                                                    "preTokens": None, "postTokens": None,
                                                    "count": len(action.appends)}))
        if self._compact:
            self._compact = False
            request = await self.hooks.compact_now(list(t.transcript), t.ctx)
            if request is not None:
                events.append(await self._rewrite(t, request, "compact"))
            else:
                events.append(LoopEvent("hook_action", {"hook": name, "action": "compact_noop",
                                                        "reason": "nothing to compact", "preTokens": None,
                                                        "postTokens": None}))
        return None

    async def _rewrite(self, t: _Turn, request: RewriteRequest, action: str) -> LoopEvent:
        """Replace the transcript (one compaction_boundary in the record) and describe it."""
        await t.writer.flush(t.transcript)
        await t.writer.rewrite(request)
        t.transcript[:] = list(request.messages)
        return LoopEvent("hook_action", {"hook": _hook_name(self.hooks), "action": action, "reason": request.reason,
                                         "trigger": request.trigger, "preTokens": request.pre_tokens,
                                         "postTokens": request.post_tokens})

    async def _after_error(self, t: _Turn, error: BaseException) -> tuple[list[LoopEvent], bool]:
        """After a failed attempt: the events to yield, and whether to make another attempt (the
        on_request_error hook asked for a retry and its delay passed without a cancel). When
        not, the round's request is done with ``t.failure`` set (or a cancel came)."""
        action = None if self._cancelled() else await self.hooks.on_request_error(error, list(t.transcript), t.ctx)
        if action is None or action.action != "retry":
            t.failure = error
            return [], False
        events = []
        if action.rewrite is not None:
            events.append(await self._rewrite(t, action.rewrite, "rewrite"))
        if action.delay_ms > 0 and self._cancel_event is not None:
            try:
                await asyncio.wait_for(self._cancel_event.wait(), action.delay_ms / 1000.0)
            except TimeoutError:
                pass
        return events, not self._cancelled()

    @staticmethod
    def _take_reply(t: _Turn, outcome: Attempt) -> None:
        usage = outcome.usage
        if usage is not None:
            t.ctx.last_prompt_tokens = usage.prompt_tokens
            t.ctx.last_prompt_transcript_len = len(t.transcript)
            t.ctx.last_cached_prompt_tokens = usage.cached_prompt_tokens
            t.ctx.last_cache_creation_tokens = usage.cache_creation_tokens
            total = t.usage  # the turn's own LLMUsage, added to in place
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
            total.total_tokens += usage.total_tokens
            total.cached_prompt_tokens += usage.cached_prompt_tokens
            total.cache_creation_tokens += usage.cache_creation_tokens
        t.round_usage = usage or LLMUsage()
        text, calls = outcome.text, outcome.calls
        if not text and not calls:  # nothing streamed: an empty reply, or none when cancelled
            t.reply = None if outcome.cancelled else LLMMessage(role="assistant", content="")
        else:
            wire_calls = ([calls[0].to_wire()] if len(calls) == 1 else [c.to_wire() for c in calls]) if calls else None
            t.reply = LLMMessage(role="assistant", content="".join(text) if text or not calls else None,
                                 tool_calls=wire_calls)
        t.calls, t.finish_reason = calls, outcome.finish_reason
        if t.reply is not None:
            t.transcript.append(t.reply)

    async def _settle(self, t: _Turn) -> list[LoopEvent]:
        """A round whose request failed or answered without tool calls: the failure, a cancel, or
        the completion (before_completion may continue the turn with appends instead)."""
        if t.failure is not None:
            return [_error_event(t.failure), *await self._end(t, "failed", str(t.failure))]
        if self._cancelled():
            return await self._end(t, "cancelled", "cancelled while streaming")
        draft = t.reply or LLMMessage(role="assistant", content="")
        decision = await self.hooks.before_completion(draft, t.ctx) if self._hook_before_completion else None
        if decision is not None and decision.action == "reject":
            reject = LoopEvent("hook_action", {"hook": _hook_name(self.hooks), "action": "reject",
                                               "reason": decision.reason, "preTokens": None, "postTokens": None})
            return [reject, *await self._end(t, "failed", decision.reason or "rejected before completion")]
        if decision is not None and decision.appends:
            t.transcript.extend(decision.appends)
            await t.writer.flush(t.transcript)
            return [LoopEvent("hook_action", {"hook": _hook_name(self.hooks), "action": "append",
                                              "reason": decision.reason, "preTokens": None, "postTokens": None,
                                              "count": len(decision.appends)}),
                    self._stage_complete(t)]
        return [self._stage_complete(t), *await self._end(t, "completed", t.finish_reason or "stop")]

    async def _tool_guards(self, t: _Turn) -> list[LoopEvent]:
        """What ends the turn after a tool round (a cancel, max_tool_errors); [] to go on."""
        if self._cancelled():
            return await self._end(t, "cancelled", "cancelled during tool calls")
        if t.batch.consecutive_errors >= self.config.max_tool_errors:
            reason = f"max_tool_errors: {t.batch.consecutive_errors} consecutive tool errors"
            error = LoopEvent("error", {"message": reason, "hint": "look at the failed tool results in the transcript"})
            return [error, *await self._end(t, "failed", reason)]
        return []

    def _stage_complete(self, t: _Turn) -> LoopEvent:
        return LoopEvent("stage_complete", {"round": t.round, "usage": t.round_usage.to_wire()})

    async def _end(self, t: _Turn, status: CompletionStatus, reason: str) -> list[LoopEvent]:
        await t.writer.flush(t.transcript)
        t.stopped = True
        self.usage = t.usage
        t.run.set_outcome(_OUTCOME[status])
        return [LoopEvent("completion", {"status": status, "reason": reason, "usage": t.usage.to_wire(),
                                         "rounds": t.rounds_run,
                                         "traceId": t.run.trace_id})]


def _sunk(sink: Callable[[str, str], None], events: tuple[LoopEvent, ...]) -> Exception | None:
    """Hand delta events to the text sink; what the sink raised (it fails the attempt), or None."""
    try:
        for event in events:
            sink(event.kind, event.data["delta"])
    except Exception as exc:  # noqa: BLE001 - a failing sink fails the attempt like a provider error
        return exc
    return None


def _error_event(error: BaseException) -> LoopEvent:
    data: dict[str, Any] = {"message": str(error), "hint": getattr(error, "hint", None) or "see the logs"}
    kind = getattr(error, "kind", None)
    if kind is not None:
        data["kind"] = kind
    return LoopEvent("error", data)


def _default_session(chat_id: str) -> AgentSession:
    now = utc_now()
    return AgentSession(session_id=f"loop-{chat_id}", user_id="local", chat_id=chat_id, current_stage="RUNNING",
                        is_active=True, created_at=now, updated_at=now)
