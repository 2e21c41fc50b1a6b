"""Running one response's tool calls: consent, dedup, parallel read batches, timeouts, cancel.

Guarantees of a batch (the loop yields each group's starts, then awaits ``run_group``):
- every call gets exactly one result, appended in call order (also when calls ran together);
- consecutive ``read`` calls run concurrently when ``parallel_tools`` is on; anything else runs
  alone, in order;
- a ``local``/``destructive`` call asks the approver (inside an ``approval.wait`` span under
  its tool span); no approver, an answer other than True (False, or anything that is not a
  bool: consent fails closed) or an approver that raises is a failed result starting "denied",
  and the loop goes on;
- a call running past ``tool_timeout_s`` is stopped and answered "timed out"; a cancel stops
  the running call (or the wait for its approval) and answers it and every later call "cancelled";
- the same name + arguments seen earlier in the turn is answered from the first result
  (``tool_dedup``), without running again; an answer repeating a denial is a denial too (it
  does not count towards ``max_tool_errors``).
"""

from __future__ import annotations

import asyncio
import json
import time
from types import CoroutineType
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import replace
from typing import Any

from ..errors import HookError
from ..models import ToolCall
from ..tooloutcome import handler_failed, tool_failure
from ..tools import CONSENT_MODES, ToolConsentError, ToolResult
from .config import LoopConfig
from .deadline import await_until, resume_until
from .events import LoopEvent
from .hookcalls import call_hook
from .hooks import LoopContext, LoopHooks, overrides
from .spans import NULL_SPAN, NullRun

_perf_counter = time.perf_counter
_new = object.__new__

Approver = Callable[[ToolCall, str, LoopContext], Awaitable[bool]]
"""``await approver(call, mode, ctx)``: True lets a ``local``/``destructive`` call run."""

CANCELLED_ERROR = "cancelled: the run was cancelled before this call finished"


class _Cancelled(Exception):
    """A cancel ended the wait for approval (internal: becomes a cancelled result)."""


def _denied(call: ToolCall, mode: str, why: str) -> ToolResult:
    return ToolResult.failed(f"denied: tool {call.name!r} (mode {mode}) {why}")


_FLAT = frozenset((str, int, bool, type(None)))


def dedup_key(call: ToolCall) -> Hashable:
    """The identity of a call for dedup: its name and canonical arguments.

    One argument whose value is a str, int, bool or None (the commonest call) keys as
    (name, argument, type, value); several such arguments as a tuple of (argument, type, value)
    in argument order; either is equal exactly when their canonical JSON is (the lengths and
    element types tell the two forms apart). Anything else keys as the canonical JSON text (a
    str, never equal to a tuple)."""
    arguments = call.arguments
    if len(arguments) == 1:
        for name, value in arguments.items():
            kind = type(value)
            if kind in _FLAT:
                return (call.name, name, kind, value)
    items = []
    for name, value in arguments.items():  # a loop, not generators: this runs for every call
        kind = type(value)
        if kind not in _FLAT:
            return call.name + "\x00" + json.dumps(arguments, sort_keys=True, default=repr)
        items.append((name, kind, value))
    items.sort()  # by name: names are unique, so the types are never compared
    return (call.name, *items)


def start_event(call: ToolCall) -> LoopEvent:
    """The ``tool_call_start`` event of ``call``."""
    return LoopEvent("tool_call_start", {"id": call.id, "name": call.name, "arguments": call.arguments})


class ToolBatch:
    """Runs tool calls for one turn of a loop (holds the turn's dedup table and error streak)."""

    def __init__(self, tools: Any, config: LoopConfig, hooks: LoopHooks, approver: Approver | None,
                 cancelled: bool = False) -> None:
        self.tools = tools
        self.config = config
        self.hooks = hooks
        self.approver = approver
        self.cancelled = cancelled  # set by interrupt() (the loop's cancel)
        self.seen: dict[Hashable, ToolResult | asyncio.Future[ToolResult]] = {}  # a future while it runs
        self.denied: set[Hashable] = set()  # the keys in ``seen`` whose result is a denial
        self.consecutive_errors = 0
        self._dedup = config.tool_dedup
        self._mode_of = getattr(tools, "mode_of", None)
        self._dispatch = getattr(tools, "dispatch", None)
        self._running: set[asyncio.Timeout] = set()
        self._post_tool_result = hooks.post_tool_result if overrides(hooks, "post_tool_result") else None

    def mode(self, call: ToolCall) -> str | None:
        """The call's tool mode, when the tools object tells (a ToolRouter does)."""
        return self._mode_of(call.name) if self._mode_of else None

    def groups(self, calls: list[ToolCall]) -> list[list[ToolCall]]:
        """``calls`` cut into the groups that run together, in call order (consecutive ``read``
        calls when ``parallel_tools`` is on; anything else alone). The loop yields each group's
        ``tool_call_start`` events, then awaits :meth:`run_group` (or :meth:`answer_cancelled`
        once a cancel is set), so a consumer sees a start before its tool runs."""
        if len(calls) == 1:
            return [calls]
        return self._groups(calls)

    def answer_cancelled(self, group: list[ToolCall], ctx: LoopContext,
                         results: list[tuple[ToolCall, ToolResult]]) -> list[LoopEvent]:
        """Answer every call of ``group`` "cancelled" without running it: start and result events."""
        events: list[LoopEvent] = []
        for call in group:
            events.append(start_event(call))
            events.append(self._finish(call, ToolResult.failed(CANCELLED_ERROR), 0.0, ctx, results, False))
        return events

    def single(self, call: ToolCall, ctx: LoopContext, run: Any,
               results: list[tuple[ToolCall, ToolResult]]) -> LoopEvent | Coroutine[Any, Any, LoopEvent]:
        """Run one call alone, as ``run_group([call], ...)`` does: its ``tool_call_result`` event, or
        a coroutine giving it when the call does not finish in its first step.

        A call with nothing around it (untraced, no consent to ask or grant, no post_tool_result
        hook, not answered by dedup, no cancel) runs its first step right here, with no coroutine
        of the batch's own; anything else, and the rest of a call that waits, goes the general way
        (same result, same event, same dedup entry, the timeout dated from the same start)."""
        mode_of = self._mode_of
        if (self.cancelled or self._post_tool_result is not None or ctx.consent_granted or type(run) is not NullRun
                or (mode_of is not None and mode_of(call.name) in CONSENT_MODES)):
            return self._one_event(call, ctx, run, results)
        dispatch = self._dispatch
        if self._dedup:
            key = None
            arguments = call.arguments
            if len(arguments) == 1:  # dedup_key's commonest form, inline
                for argument, value in arguments.items():
                    kind = type(value)
                    if kind in _FLAT:
                        key = (call.name, argument, kind, value)
            if key is None:
                key = dedup_key(call)
            if key in self.seen:
                return self._one_event(call, ctx, run, results)
        else:
            key = None
        started = _perf_counter()
        try:  # _start, inline (consent_granted is False here)
            pending = dispatch(call, consent_granted=False, context=ctx) if dispatch is not None else \
                self.tools.execute(call, ctx)
            if type(pending) is not CoroutineType:
                return self._rest(call, ctx, pending, None, started, key, results)
            first = pending.send(None)
        except StopIteration as done:
            result = done.value
            if type(result) is not ToolResult:
                result = _checked(call, result)
        except BaseException as exc:  # noqa: BLE001 - mapped to a failed result as _execute maps it
            if not handler_failed(exc):
                raise
            result, denied = self._failure(call, exc)
            if key is not None:
                self.seen[key] = result
                if denied:
                    self.denied.add(key)
            return self._finish(call, result, (_perf_counter() - started) * 1000.0, ctx, results, denied)
        else:
            return self._rest(call, ctx, pending, first, started, key, results)
        ms = (_perf_counter() - started) * 1000.0
        if key is not None:
            self.seen[key] = result
        # _finish(call, result, ms, ctx, results, False), inline; the event built as LoopEvent's
        # __init__ builds it (see events.py)
        results.append((call, result))
        success = result.success
        event = _new(LoopEvent)
        event.kind = "tool_call_result"
        if success:
            self.consecutive_errors = ctx.consecutive_tool_errors = 0
            event.data = {"id": call.id, "name": call.name, "success": success,
                          "durationMs": round(ms * 1000.0) / 1000.0}
            return event
        ctx.consecutive_tool_errors = self.consecutive_errors = self.consecutive_errors + 1
        event.data = {"id": call.id, "name": call.name, "success": success,
                      "durationMs": round(ms * 1000.0) / 1000.0, "error": result.error}
        return event

    async def _one_event(self, call: ToolCall, ctx: LoopContext, run: Any,
                         results: list[tuple[ToolCall, ToolResult]]) -> LoopEvent:
        result, ms, denied, dup = await self._one(call, ctx, run)
        return self._finish(call, result, ms, ctx, results, denied, dup)

    async def _rest(self, call: ToolCall, ctx: LoopContext, pending: Any, first: Any, started: float,
                    key: Hashable | None, results: list[tuple[ToolCall, ToolResult]]) -> LoopEvent:
        """The rest of a :meth:`single` call that waits (``first``: what its first step yielded;
        None with an awaitable that is not a native coroutine, not started yet)."""
        try:
            if first is None and type(pending) is not CoroutineType:
                value = await await_until(pending, self._deadline(started), self._arm, self._running.discard)
            else:
                value = await resume_until(pending, first, self._deadline(started), self._arm, self._running.discard)
        except BaseException as exc:  # noqa: BLE001 - mapped to a failed result as _execute maps it
            if not handler_failed(exc):
                raise
            result, denied = self._failure(call, exc)
            if denied and key is not None:
                self.denied.add(key)
        else:
            result, denied = (value if type(value) is ToolResult else _checked(call, value)), False
        ms = (_perf_counter() - started) * 1000.0
        if key is not None:
            self.seen[key] = result
        return self._finish(call, result, ms, ctx, results, denied)

    async def run_group(self, group: list[ToolCall], ctx: LoopContext, run: Any,
                        results: list[tuple[ToolCall, ToolResult]]) -> list[LoopEvent]:
        """Run ``group`` (together when it has several calls), append (call, result) to ``results``
        in call order and return the ``tool_call_result`` events."""
        if len(group) == 1:
            call = group[0]
            result, ms, denied, dup = await self._one(call, ctx, run)
            return [self._finish(call, result, ms, ctx, results, denied, dup)]
        outcomes = await asyncio.gather(*(self._one(call, ctx, run, True) for call in group))
        return [self._finish(call, result, ms, ctx, results, denied, dup)
                for call, (result, ms, denied, dup) in zip(group, outcomes)]

    def _groups(self, calls: list[ToolCall]) -> list[list[ToolCall]]:
        groups: list[list[ToolCall]] = []
        for call in calls:
            parallel = self.config.parallel_tools and self.mode(call) == "read"
            if parallel and groups and self.mode(groups[-1][-1]) == "read":
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    def _finish(self, call: ToolCall, result: ToolResult, ms: float, ctx: LoopContext,
                results: list[tuple[ToolCall, ToolResult]], denied: bool, dup: bool = False) -> LoopEvent:
        results.append((call, result))
        success = result.success
        if success:
            self.consecutive_errors = 0
        elif not denied:
            self.consecutive_errors += 1
        ctx.consecutive_tool_errors = self.consecutive_errors
        # ms to 3 decimals: round(ms, 3) formats the float through its decimal digits, 2x the cost
        data: dict[str, Any] = {"id": call.id, "name": call.name, "success": success,
                                "durationMs": round(ms * 1000.0) / 1000.0}
        if not success:
            data["error"] = result.error
        if dup:
            data["deduplicated"] = True
        return LoopEvent("tool_call_result", data)

    async def _one(self, call: ToolCall, ctx: LoopContext, run: Any,
                   together: bool = False) -> tuple[ToolResult, float, bool, bool]:
        key = dedup_key(call) if self.config.tool_dedup else None
        if key is not None and key in self.seen:
            earlier = self.seen[key]
            result = earlier if isinstance(earlier, ToolResult) else await asyncio.shield(earlier)
            # (read after the wait: a twin's first records its denial before its future resolves)
            return result, 0.0, key in self.denied, True
        first: asyncio.Future[ToolResult] | None = None
        if key is not None and together:  # registered before running, so a twin in the same batch waits for it
            first = self.seen[key] = asyncio.get_running_loop().create_future()
        try:
            started = _perf_counter()
            if type(run) is not NullRun:
                result, denied = await self._traced(call, ctx, run)
            else:  # no recorder: no span to open
                mode = self._mode_of(call.name) if self._mode_of else None
                if mode in CONSENT_MODES or ctx.consent_granted or self._post_tool_result is not None:
                    result, denied = await self._call(call, mode, ctx, NULL_SPAN)
                else:  # what _call does for such a call: run it, nothing else
                    result, denied = await self._execute(call, ctx, started)
            ms = (_perf_counter() - started) * 1000.0
        except BaseException:
            if first is not None:
                del self.seen[key]
                first.cancel()
            raise
        if denied and key is not None:  # a repeat answered from it is a denial too (not a tool error)
            self.denied.add(key)
        if first is not None:
            first.set_result(result)
        elif key is not None:
            self.seen[key] = result
        return result, ms, denied, False

    async def _traced(self, call: ToolCall, ctx: LoopContext, run: Any) -> tuple[ToolResult, bool]:
        mode = self.mode(call)
        async with run.tool(call.name, {"tool.call_id": call.id, "tool.mode": mode or "host"}) as span:
            result, denied = await self._call(call, mode, ctx, span)
            span.set_attrs({"tool.success": result.success, **({"tool.error": result.error} if result.error else {})})
        return result, denied

    async def _call(self, call: ToolCall, mode: str | None, ctx: LoopContext, span: Any) -> tuple[ToolResult, bool]:
        """Consent, the call, the post_tool_result hook: the result, and whether it is a denial."""
        if mode in CONSENT_MODES:
            try:
                granted, why = await self._ask(call, mode, ctx, span)
            except _Cancelled:
                return ToolResult.failed(CANCELLED_ERROR), True
            if not granted:
                return _denied(call, mode, why), True
            result, denied = await self._execute(call, ctx if ctx.consent_granted else replace(ctx, consent_granted=True))
        else:
            result, denied = await self._execute(call, ctx if not ctx.consent_granted else replace(ctx, consent_granted=False))
        if self._post_tool_result is not None:  # a hook that fails: the call's result says so (a tool error)
            try:
                result = await call_hook(self.hooks, "post_tool_result", ToolResult, result, call, ctx) or result
            except HookError as exc:
                return ToolResult.failed(str(exc)), False
        return result, denied

    async def _ask(self, call: ToolCall, mode: str, ctx: LoopContext, span: Any) -> tuple[bool, str]:
        if self.approver is None:
            return False, "needs approval and no approver is configured"
        async with span.approval({"approval.tool": call.name, "approval.mode": mode}) as wait:
            stop = asyncio.timeout(None)  # a cancel fires it (interrupt), so a wait for the user ends
            self._running.add(stop)
            try:
                async with stop:
                    answer = await self.approver(call, mode, ctx)
            except TimeoutError:
                wait.set_attrs({"approval.approved": False, "approval.cancelled": True})
                raise _Cancelled from None
            except BaseException as exc:  # noqa: BLE001 - an approver that fails is a denial, never a crash
                if not handler_failed(exc):
                    raise
                wait.set_attrs({"approval.approved": False, "approval.error": type(exc).__name__})
                return False, f"was not approved (the approver failed: {type(exc).__name__})"
            finally:
                self._running.discard(stop)
            if type(answer) is not bool:  # consent fails closed: only True approves ("no" is truthy)
                wait.set_attrs({"approval.approved": False, "approval.error": f"returned {type(answer).__name__}"})
                return False, f"was not approved (the approver returned {type(answer).__name__}, not a bool)"
            wait.set_attrs({"approval.approved": answer})
        return answer, "was not approved by the user"

    def interrupt(self) -> None:
        """Stop the running calls now (a cancel): their timeouts fire at once, and no call starts."""
        self.cancelled = True
        if not self._running:
            return
        now = asyncio.get_running_loop().time()
        for deadline in list(self._running):
            deadline.reschedule(now)

    async def _execute(self, call: ToolCall, ctx: LoopContext, started: float | None = None) -> tuple[ToolResult, bool]:
        """Run the call: its result, and whether a host executor refused it (a denial).

        ``started`` (``time.perf_counter()`` when the call began, default now) dates the timeout."""
        # In this task (no helper tasks), under a timeout armed once the call first waits (see
        # .deadline), at tool_timeout_s after ``started``; a cancel reschedules it to now.
        if self.cancelled:
            return ToolResult.failed(CANCELLED_ERROR), False
        if started is None:
            started = _perf_counter()
        try:
            pending = self._start(call, ctx)
            if type(pending) is CoroutineType:  # await_until, its first step inline
                try:
                    first = pending.send(None)
                except StopIteration as done:
                    value = done.value
                else:
                    value = await resume_until(pending, first, self._deadline(started), self._arm,
                                               self._running.discard)
            else:
                value = await await_until(pending, self._deadline(started), self._arm, self._running.discard)
        except BaseException as exc:  # noqa: BLE001 - see _failure
            if not handler_failed(exc):
                raise
            return self._failure(call, exc)
        return (value if type(value) is ToolResult else _checked(call, value)), False

    def _start(self, call: ToolCall, ctx: LoopContext) -> Any:
        """The call's awaitable (nothing of it has run yet for a router's coroutine)."""
        if self._dispatch is not None:
            return self._dispatch(call, consent_granted=ctx.consent_granted, context=ctx)
        return self.tools.execute(call, ctx)

    def _deadline(self, started: float) -> Callable[[], float]:
        """The loop time ``tool_timeout_s`` after ``started``, as a function: read only if a timer is armed."""
        timeout_s = self.config.tool_timeout_s

        def when() -> float:
            return asyncio.get_running_loop().time() + timeout_s - (_perf_counter() - started)
        return when

    def _failure(self, call: ToolCall, exc: BaseException) -> tuple[ToolResult, bool]:
        """What a call that raised gets: timed out (or cancelled, when the timeout was a cancel's),
        denied (a host executor's ToolConsentError), or the exception for the model to read."""
        if isinstance(exc, TimeoutError):
            if self.cancelled:
                return ToolResult.failed(CANCELLED_ERROR), False
            return ToolResult.failed(f"tool {call.name!r} timed out after {self.config.tool_timeout_s:g} s"
                                     " and was stopped"), False
        if isinstance(exc, ToolConsentError):  # a host executor refused: the same as a denial
            return ToolResult.failed(f"denied: {exc}"), True
        return ToolResult.failed(tool_failure(call.name, exc)), False

    def _arm(self, timeout: asyncio.Timeout) -> None:
        self._running.add(timeout)
        if self.cancelled:  # the cancel came while the call's first step ran
            timeout.reschedule(asyncio.get_running_loop().time())


def _checked(call: ToolCall, value: Any) -> ToolResult:
    """A host executor's return value as a ToolResult; anything else is a failed result."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict) and isinstance(value.get("success"), bool):
        try:
            return ToolResult.model_validate(value)
        except ValueError:
            pass
    return ToolResult.failed(f"tool {call.name!r} returned {type(value).__name__}, not a ToolResult")
