"""Chat streams: one CoreLoop per agent.chat.stream, its events relayed as notifications.

Guarantees:
- At most one running stream per chat: a second is refused with -32002 naming the running
  stream (``data.streamId``); streams on different chats run concurrently.
- The request is answered ``{streamId}`` before any notification of that stream.
- Relay: content -> ``stream.chunk {streamId, delta}``, reasoning -> ``{reasoningDelta}``,
  a tool call starting -> ``{toolCall}``, its result -> ``{toolResult}``, steer / hook
  actions / budget -> ``{notice}``; a failed turn -> ``stream.error {streamId, code,
  message, data}``; always last: ``stream.done {streamId, status, reason, usage, traceId}``.
- A steer accepted during a turn's last round (the model's final answer) is not dropped: the
  stream goes on with one more turn whose first round takes it; ``stream.done`` (its usage
  the sum of the turns') follows that turn.
- A compact accepted during a turn's last round is not dropped either: it is left for the chat's
  next stream (as a CoreLoop keeps it for its next turn), whose first round takes it before its
  request when that stream has compaction (``maxContextTokens``); taken once either way.
- A resume (``resume: true``) reads the record first: a record this build cannot read, or
  one holding a tool result that answers no call, is -32003 on the request itself and
  nothing is written.
- ``stop_all`` cancels every stream and waits (up to a grace period) for each to write its
  partial turn to the record.
- The streams share one HTTP client (one TLS context, pooled keep-alive connections to the
  model), opened with the first stream and closed by ``aclose``.
- Content and reasoning deltas on the default sink go through the transport's
  ``text_chunk_writer`` when it has one, which the loop calls itself (CoreLoop
  ``text_sink``: no LoopEvent, no generator hop, no await and no generic JSON encode per
  chunk; the same notification bytes): one notification per chunk, in order with every other
  notification of the stream, nothing merged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..models import AgentSession, utc_now
from ..storage import StorageAdapter
from ..transport.base import SSEEvent
from ..transport.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, NOT_FOUND, UNAVAILABLE, RpcError
from . import params as p
from .host_tools import HostApprover, HostTools
from .rpc_errors import to_rpc_error

log = logging.getLogger("steerable.sidecar")

Notify = Callable[[SSEEvent], Awaitable[None]]
Reverse = Callable[..., Awaitable[Any]]
TextWriter = Callable[[str, str], None]  # (key: "delta" | "reasoningDelta", text)

_NOTICE_KINDS = frozenset({"steer", "hook_action", "budget_exhausted"})


@dataclass
class RunningStream:
    stream_id: str
    chat_id: str
    loop: Any
    notify: Notify
    session: AgentSession | None = None
    events: Any = None
    write_text: TextWriter | None = None
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class StreamManager:
    """Starts, steers, cancels and relays chat streams."""

    def __init__(self, storage: StorageAdapter, *, notify: Notify, reverse: Reverse,
                 text_writer: Callable[[str], TextWriter] | None = None) -> None:
        self.storage = storage
        self.notify = notify
        self.reverse = reverse
        self.text_writer = text_writer  # stream id -> the default sink's synchronous delta writer
        self.running: dict[str, RunningStream] = {}
        self._by_chat: dict[str, str] = {}
        # chats whose last stream ended with an accepted compact it had no round left for
        self._compact_next: set[str] = set()
        self._recorder: Any = None
        self._http: Any = None

    # methods ---------------------------------------------------------------------------
    async def start(self, args: p.ChatStream, *, notify: Notify | None = None,
                    reverse: Reverse | None = None) -> dict[str, Any]:
        """agent.chat.stream: build the loop, register the stream, start relaying."""
        busy = self._by_chat.get(args.chat_id)
        if busy is not None:
            raise RpcError(UNAVAILABLE, f"chat {args.chat_id!r} already has a running stream {busy}",
                           hint=f"cancel {busy} with agent.chat.cancel, or wait for its stream.done",
                           data={"streamId": busy, "chatId": args.chat_id})
        stream_id = "st-" + uuid.uuid4().hex[:16]
        self._by_chat[args.chat_id] = stream_id  # claimed before any await: no race on one chat
        write_text = self.text_writer(stream_id) if notify is None and self.text_writer is not None else None
        try:
            stream = await self._build(stream_id, args, notify or self.notify, reverse or self.reverse, write_text)
        except BaseException:
            self._by_chat.pop(args.chat_id, None)
            raise
        self._compact_next.discard(args.chat_id)  # taken by this stream (_build) or, without compaction, dropped
        self.running[stream_id] = stream
        stream.task = asyncio.create_task(self._run(stream, args))
        return {"streamId": stream_id}

    async def cancel(self, args: p.StreamRef) -> dict[str, Any]:
        stream = self.running.get(args.stream_id)
        if stream is None:
            return {"accepted": False, "reason": "no running stream with that id"}
        stream.loop.cancel()
        return {"accepted": True}

    async def steer(self, args: p.ChatSteer) -> dict[str, Any]:
        stream = self.running.get(args.stream_id)
        if stream is None:
            return {"accepted": False, "reason": "no running stream with that id"}
        stream.loop.steer(args.content)
        return {"accepted": True}

    async def compact(self, args: p.StreamRef) -> dict[str, Any]:
        stream = self.running.get(args.stream_id)
        if stream is None:
            return {"accepted": False, "reason": "no running stream with that id"}
        from ..loop.hooks import overrides

        if not overrides(stream.loop.hooks, "compact_now"):  # nothing could compact it
            return {"accepted": False, "reason": "this stream has no compaction: start it with maxContextTokens"}
        stream.loop.request_compact()
        return {"accepted": True}

    def cancel_all(self) -> list[RunningStream]:
        """Ask every running stream to wind down (CoreLoop.cancel); the streams asked."""
        streams = list(self.running.values())
        for stream in streams:
            stream.loop.cancel()
        return streams

    async def stop_all(self, grace_s: float, *, after_cancel: Callable[[], None] | None = None) -> None:
        """Cancel every stream; wait up to ``grace_s`` for their records, then hard-cancel.

        ``after_cancel`` runs once the streams were asked to stop (the sidecar fails its
        unanswered reverse requests there, so a stream waiting for an approval winds down too).
        """
        streams = self.cancel_all()
        if after_cancel is not None:
            after_cancel()
        tasks = [s.task for s in streams if s.task is not None]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        for task in late:
            log.warning("a stream did not wind down within %.1f s: cancelling it", grace_s)
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace_s)

    async def aclose(self) -> None:
        """Close the shared HTTP client (after ``stop_all``). Idempotent."""
        client, self._http = self._http, None
        if client is not None:
            await client.aclose()

    def http_client(self) -> Any:
        """The HTTP client every stream's provider uses (opened on first use)."""
        if self._http is None or self._http.is_closed:
            from ..llm.http import make_client

            self._http = make_client()
        return self._http

    # building --------------------------------------------------------------------------
    async def _session(self, args: p.ChatStream) -> tuple[AgentSession, bool]:
        """The stream's session and whether it is a new one (not stored yet: ``_build`` stores
        it once nothing can refuse the request any more)."""
        if args.session_id is not None:
            session = await self.storage.get_session(args.session_id)
            if session is None:
                raise RpcError(NOT_FOUND, f"session {args.session_id!r} not found",
                               hint="create it with agent.session.create, or omit sessionId",
                               data={"sessionId": args.session_id})
            return session, False
        active = await self.storage.list_sessions(chat_id=args.chat_id, active_only=True)
        if active:
            return active[-1], False
        now = utc_now()
        return AgentSession(session_id=uuid.uuid4().hex, user_id="local", chat_id=args.chat_id, current_stage="CHAT",
                            is_active=True, created_at=now, updated_at=now), True

    def recorder(self) -> Any:
        if self._recorder is None:
            from ..tracing import TraceRecorder

            self._recorder = TraceRecorder(self.storage)
        return self._recorder

    async def _build(self, stream_id: str, args: p.ChatStream, notify: Notify, reverse: Reverse,
                     write_text: TextWriter | None) -> RunningStream:
        # Every refusal comes before the first write (a new session included): a refused
        # request leaves the store as it was.
        p.check_messages(args.messages)
        if args.resume:
            from ..history import resumable_transcript

            stored = await resumable_transcript(self.storage, args.chat_id)  # fail closed before writing anything
            if not stored and not args.messages:
                raise RpcError(INVALID_PARAMS, f"record {args.chat_id!r} is empty: nothing to resume",
                               hint="start the chat with messages (resume: false), or give resume new messages",
                               data={"field": "messages"})
        # the loop, httpx and a provider: imported when the first stream starts
        from .loop_glue import events_of, make_loop

        session, new_session = await self._session(args)
        tools = HostTools(args.tools, chat_id=args.chat_id, reverse=reverse, timeout_s=args.tool_timeout_s)
        approver = HostApprover(tools, reverse=reverse, timeout_s=args.approval_timeout_s)
        loop = make_loop(args, tools=tools, approver=approver, storage=self.storage, recorder=self.recorder(),
                         client=self.http_client(), text_sink=write_text)
        try:
            events = events_of(loop, args, session)  # an empty transcript is refused here, on the request
        except UsageError as exc:
            raise RpcError(INVALID_PARAMS, exc.message, hint=exc.hint, data={"field": "messages"}) from None
        if args.chat_id in self._compact_next:
            from ..loop.hooks import overrides

            if overrides(loop.hooks, "compact_now"):
                loop.request_compact()
        if new_session:
            await self.storage.upsert_session(session)
        return RunningStream(stream_id, args.chat_id, loop, notify, session, events, write_text)

    # relaying --------------------------------------------------------------------------
    async def _run(self, stream: RunningStream, args: p.ChatStream) -> None:
        done: dict[str, Any] | None = None
        try:
            # with a text writer the loop hands it the deltas itself (its text_sink): these
            # events never come through here
            async for event in stream.events:
                done = await self._relay(stream, event.kind, event.data) or done
            # A steer accepted during the turn's last round (while the model wrote its final
            # answer) has no round of that turn left to take it, and the loop dies with the
            # stream: it was acknowledged, so the stream goes on with one more turn on the same
            # loop, whose first round takes it (resume: the record is the transcript).
            while done is not None and done.get("status") == "completed" and stream.loop.steer_pending:
                before, done = done, None
                stream.events = stream.loop.resume(stream.chat_id, chat_id=stream.chat_id, session=stream.session)
                async for event in stream.events:
                    done = await self._relay(stream, event.kind, event.data) or done
                if done is not None:
                    done = {**done, "usage": _sum_usage(before.get("usage"), done.get("usage"))}
        except asyncio.CancelledError:
            done = {"status": "cancelled", "reason": "the sidecar stopped the stream"}
            raise
        except Exception as exc:
            err = to_rpc_error(exc, "agent.chat.stream")
            await self._error(stream, err)
            done = {"status": "failed", "reason": err.message}
        finally:
            if getattr(stream.loop, "compact_pending", False):  # accepted, but no round was left to take it
                self._compact_next.add(stream.chat_id)
            self.running.pop(stream.stream_id, None)
            self._by_chat.pop(stream.chat_id, None)
            await self._done(stream, done)

    async def _relay(self, stream: RunningStream, kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
        sid = stream.stream_id
        if kind == "content_delta":
            await stream.notify(SSEEvent("stream.chunk", {"streamId": sid, "delta": data.get("delta", "")}))
        elif kind == "reasoning_delta":
            await stream.notify(SSEEvent("stream.chunk", {"streamId": sid, "reasoningDelta": data.get("delta", "")}))
        elif kind == "tool_call_start":
            await stream.notify(SSEEvent("stream.chunk", {"streamId": sid, "toolCall": data}))
        elif kind == "tool_call_result":
            await stream.notify(SSEEvent("stream.chunk", {"streamId": sid, "toolResult": data}))
        elif kind in _NOTICE_KINDS:
            await stream.notify(SSEEvent("stream.chunk", {"streamId": sid, "notice": {"kind": kind, **data}}))
        elif kind == "error":
            await self._error(stream, _loop_error(data))
        elif kind == "completion":
            return data
        return None

    async def _error(self, stream: RunningStream, err: RpcError) -> None:
        await stream.notify(SSEEvent("stream.error", {"streamId": stream.stream_id, "code": err.code,
                                                      "message": err.message, "data": err.data}))

    async def _done(self, stream: RunningStream, done: dict[str, Any] | None) -> None:
        done = done or {"status": "failed", "reason": "the loop ended without a completion"}
        payload = {"streamId": stream.stream_id, "status": done.get("status"), "reason": done.get("reason"),
                   "usage": done.get("usage"), "traceId": done.get("traceId") or getattr(stream.loop, "trace_id", None)}
        try:
            await stream.notify(SSEEvent("stream.done", payload))
        except Exception as exc:  # noqa: BLE001 - the client went away: nothing left to tell it
            log.warning("could not send stream.done for %s: %s", stream.stream_id, exc)
        stream.done.set()


def _sum_usage(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The usage of two turns of one stream, field by field."""
    if not a or not b:
        return b or a
    return {key: (a.get(key) or 0) + (b.get(key) or 0) for key in {**a, **b}}


def _loop_error(data: dict[str, Any]) -> RpcError:
    """The stream.error of the loop's ``error`` event: a provider's failure (an LLMError kind) is
    -32005 with its kind, provider and statusCode; max_tool_errors (kind ``tool_errors``) -32006;
    anything else (a hook's, kind ``hook``: the sidecar's own hooks, so a bug) -32603."""
    from typing import get_args

    from ..llm.errors import LLMErrorKind
    from ..transport.jsonrpc import PROVIDER_ERROR, TURN_FAILED

    kind = data.get("kind")
    message, hint = str(data.get("message", "the turn failed")), data.get("hint")
    if kind in get_args(LLMErrorKind):
        return RpcError(PROVIDER_ERROR, message, hint=hint,
                        data={"kind": kind, "provider": data.get("provider"), "statusCode": data.get("statusCode")})
    if kind == "tool_errors":  # max_tool_errors: the host's tools kept failing (no bug)
        return RpcError(TURN_FAILED, message, hint=hint, data={"kind": kind})
    return RpcError(data.get("code", INTERNAL_ERROR), message, hint=hint, data={"kind": kind} if kind else {})
