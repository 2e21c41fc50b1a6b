"""CoreLoop: stream a model, run its tool calls, repeat; the record written as it goes.

This module is the loop's public surface: construction, the controls another task may call while
a turn runs (steer, cancel, request_compact) and the start of a turn. A turn's rounds are
:func:`.rounds.turn_events` (the one generator of a turn), its occasional steps :mod:`.turn`, its
tool calls :mod:`.toolbatch`.

Guarantees:
- ``completion`` is always the last event of a turn; its status is completed, failed,
  budget_exhausted or cancelled. Provider errors end the turn as failed (an ``error`` event
  first) instead of raising; a storage error or a RecordFormatError raises out of the iterator.
- With a storage, after every flush ``resume_transcript(storage, record_id)`` equals the
  transcript of the next request; a crash loses at most the round in flight.
- ``cancel()`` winds the turn down at the next chunk or tool boundary; the record then holds
  the partial assistant text and a result for every call. A wait for the model's next bytes
  (or its response headers) is such a boundary: the turn's CancelSignal, handed to the provider
  as the ``cancel`` option, ends it at once (llm.cancel).
- With a ``recorder``, the trace's outcome is the completion status (ok, error,
  budget_exhausted, cancelled); closing the iterator before the turn ended records cancelled,
  closing it once the completion event was given keeps the turn's outcome.
- ``run`` raises UsageError at once for an empty transcript, a tool result whose call no earlier
  message made, or while another turn runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from ..errors import UsageError
from ..history import orphan_tool_result
from ..llm.types import LLMUsage
from ..models import AgentSession, LLMMessage
from ..tools import ToolRouter
from .config import LoopConfig
from .events import LoopEvent
from .hooks import LoopHooks, NoopHooks
from .rounds import turn_events
from .toolbatch import Approver, ToolBatch
from .unicode import has_lone_surrogate

_DEFAULT_CONFIG = LoopConfig()  # frozen: one instance serves every loop created without a config


def _as_message(message: LLMMessage | Mapping[str, Any]) -> LLMMessage:
    return message if isinstance(message, LLMMessage) else LLMMessage.model_validate(message)


def _as_messages(messages: Any) -> list[LLMMessage]:
    """``messages`` as LLMMessages (a new list); UsageError naming the first one that is not a message."""
    if type(messages) is list:  # the common call: a list of messages already (no ABC checks, no copies)
        for message in messages:
            if type(message) is not LLMMessage:
                break
        else:
            return list(messages)
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise UsageError(f"messages must be a list of messages, got {type(messages).__name__}",
                         hint="pass e.g. [{'role': 'user', 'content': '...'}]")
    out = []
    for index, message in enumerate(messages):
        try:
            out.append(_as_message(message))
        except ValueError as exc:  # pydantic's ValidationError
            problem = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc), "loc": ()}
            where = ".".join(str(p) for p in problem.get("loc", ())) or "message"
            raise UsageError(f"message {index} is not a message: {where}: {problem.get('msg')}",
                             hint="each message is an LLMMessage or a dict {'role': user|assistant|tool|system, "
                                  "'content': ...}") from None
    return out


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
        self._signal: Any = None  # the running turn's llm.cancel.CancelSignal (handed to the provider)
        self._compact = False
        self._running = False
        self._batch: ToolBatch | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None  # the running turn's (cancel from a thread)

    # --- control (callable from another task while a turn runs) ---------------------------

    @property
    def running(self) -> bool:
        """Whether a turn is in progress."""
        return self._running

    @property
    def steer_pending(self) -> bool:
        """Whether steer messages wait for a round to take them (one queued after a turn's last
        round is taken by the next turn's first)."""
        return bool(self._steer)

    @property
    def compact_pending(self) -> bool:
        """Whether a ``request_compact()`` waits for a round to take it (one made during a turn's
        last round, or before a reject, is taken by the next turn's first round)."""
        return self._compact

    def steer(self, text: str) -> bool:
        """Queue a user message for the start of the next round (a ``steer`` event when taken)."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError("steer text is empty", hint="pass the message to add to the transcript")
        if has_lone_surrogate(text):
            raise UsageError("steer text holds a lone surrogate (not valid Unicode); nothing was queued",
                             hint="decode the text properly (e.g. errors='replace') before steering")
        self._steer.append(text)
        return True

    def cancel(self) -> bool:
        """Wind the turn down at the next chunk or tool boundary (completion ``cancelled``).

        Safe from any thread: called off the turn's event loop, the flag is set at once and the
        running tool (or retry wait, or the provider's wait for the model's next bytes) is
        stopped on that loop (``call_soon_threadsafe``)."""
        self._cancel = True
        owner = self._event_loop
        if owner is not None and self._batch is not None:
            try:
                here = asyncio.get_running_loop()
            except RuntimeError:
                here = None
            if here is not owner:
                try:
                    owner.call_soon_threadsafe(self._interrupt)
                except RuntimeError:  # that loop is closed: the turn is over
                    pass
                return True
        self._interrupt()
        return True

    def _interrupt(self) -> None:
        """Stop what the running turn waits on (on the turn's own event loop)."""
        if self._cancel_event is not None:  # a retry's delay is waiting
            self._cancel_event.set()
        if self._signal is not None:  # the provider waits on the network: its read ends now
            self._signal.set()
        if self._batch is not None:
            self._batch.interrupt()

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
        transcript = _as_messages(messages)
        if not transcript:
            raise UsageError("the transcript is empty: the model has nothing to answer",
                             hint="pass at least one message, e.g. {'role': 'user', 'content': '...'}")
        orphan = orphan_tool_result(transcript)
        if orphan is not None:
            raise UsageError(f"message {orphan[0]} is a tool result for call {orphan[1]!r}, which no earlier "
                             "assistant message made (providers refuse such a transcript)",
                             hint="drop that tool message, or keep the assistant message holding its call")
        self._check_start(chat_id)
        return turn_events(self, transcript, chat_id, session, None)

    def resume(self, record_id: str, messages: Iterable[LLMMessage | Mapping[str, Any]] = (), *,
               chat_id: str | None = None, session: AgentSession | None = None) -> AsyncIterator[LoopEvent]:
        """Continue the record ``record_id`` (also one another process wrote), ``messages`` appended.

        Dangling tool calls get an "interrupted; verify its side effects" result, appended to the
        record. Raises UsageError without a storage or while a turn runs; the iterator raises
        RecordFormatError (the record untouched) for a record this build cannot read or whose
        transcript holds a tool result no earlier call asked for (history.resumable_transcript),
        and UsageError for an empty record with no new messages.
        """
        if self.storage is None:
            raise UsageError("resume needs a storage", hint="create the CoreLoop with storage=...")
        extra = _as_messages(messages)
        self._check_start(chat_id or record_id)
        return turn_events(self, extra, chat_id or record_id, session, record_id)

    def _check_start(self, chat_id: str) -> None:
        if not isinstance(chat_id, str) or not chat_id:
            raise UsageError("chat_id is required", hint="pass chat_id='...' (the record id defaults to it)")
        for name, value in (("chat_id", chat_id), ("record_id", self.record_id)):
            if isinstance(value, str) and has_lone_surrogate(value):  # no store can hold the record
                raise UsageError(f"{name} {value!r} holds a lone surrogate (not valid Unicode); nothing was written",
                                 hint="pass ids as valid Unicode text")
        if self._running:
            raise UsageError("a turn is already running on this CoreLoop",
                             hint="wait for its completion event, or cancel() it first")

    def _take_steer(self) -> list[str]:
        taken, self._steer = self._steer, []
        return taken

    def _cancelled(self) -> bool:
        return self._cancel
