"""Running one response's tool calls: consent, dedup, parallel read batches, timeouts, cancel.

Guarantees of :meth:`ToolBatch.run`:
- every call gets exactly one result, appended in call order (also when calls ran together);
- consecutive ``read`` calls run concurrently when ``parallel_tools`` is on; anything else runs
  alone, in order;
- a ``local``/``destructive`` call asks the approver (inside an ``approval.wait`` span under
  its tool span); no approver, a False answer or an approver that raises is a failed result
  starting "denied", and the loop goes on;
- a call running past ``tool_timeout_s`` is stopped and answered "timed out"; a cancel stops
  the running call (or the wait for its approval) and answers it and every later call "cancelled";
- the same name + arguments seen earlier in the turn is answered from the first result
  (``tool_dedup``), without running again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from ..models import LLMMessage, ToolCall
from ..tools import CONSENT_MODES, ToolConsentError, ToolResult
from .config import LoopConfig
from .events import LoopEvent
from .hooks import LoopContext, LoopHooks

Approver = Callable[[ToolCall, str, LoopContext], Awaitable[bool]]
"""``await approver(call, mode, ctx)``: True lets a ``local``/``destructive`` call run."""

CANCELLED_ERROR = "cancelled: the run was cancelled before this call finished"


class _Cancelled(Exception):
    """A cancel ended the wait for approval (internal: becomes a cancelled result)."""


def _denied(call: ToolCall, mode: str, why: str) -> ToolResult:
    return ToolResult.failed(f"denied: tool {call.name!r} (mode {mode}) {why}")


def dedup_key(call: ToolCall) -> str:
    """The identity of a call for dedup: its name and canonical arguments."""
    return call.name + "\x00" + json.dumps(call.arguments, sort_keys=True, default=repr)


def tool_message(call: ToolCall, result: ToolResult) -> LLMMessage:
    """The transcript message carrying ``result`` for ``call``."""
    return LLMMessage(role="tool", tool_call_id=call.id, name=call.name, content=result.to_content())


class ToolBatch:
    """Runs tool calls for one turn of a loop (holds the turn's dedup table and error streak)."""

    def __init__(self, tools: Any, config: LoopConfig, hooks: LoopHooks, approver: Approver | None,
                 cancelled: asyncio.Event) -> None:
        self.tools = tools
        self.config = config
        self.hooks = hooks
        self.approver = approver
        self.cancelled = cancelled
        self.seen: dict[str, asyncio.Future[ToolResult]] = {}
        self.consecutive_errors = 0
        self._mode_of = getattr(tools, "mode_of", None)
        self._dispatch = getattr(tools, "dispatch", None)
        self._running: set[asyncio.Timeout] = set()

    def mode(self, call: ToolCall) -> str | None:
        """The call's tool mode, when the tools object tells (a ToolRouter does)."""
        return self._mode_of(call.name) if self._mode_of else None

    async def run(self, calls: list[ToolCall], ctx: LoopContext, run: Any,
                  results: list[tuple[ToolCall, ToolResult]]) -> AsyncIterator[LoopEvent]:
        """Run ``calls``, yield their events, and append (call, result) to ``results`` in call order."""
        for group in self._groups(calls):
            if self.cancelled.is_set():
                for call in group:
                    yield self._start_event(call)
                    yield self._finish(call, ToolResult.failed(CANCELLED_ERROR), 0.0, ctx, results, False)
                continue
            for call in group:
                yield self._start_event(call)
            if len(group) == 1:
                outcomes = [await self._one(group[0], ctx, run)]
            else:
                outcomes = await asyncio.gather(*(self._one(call, ctx, run) for call in group))
            for call, (result, ms, denied, dup) in zip(group, outcomes):
                yield self._finish(call, result, ms, ctx, results, denied, dup)

    def _groups(self, calls: list[ToolCall]) -> list[list[ToolCall]]:
        groups: list[list[ToolCall]] = []
        for call in calls:
            parallel = self.config.parallel_tools and self.mode(call) == "read"
            if parallel and groups and self.mode(groups[-1][-1]) == "read":
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    @staticmethod
    def _start_event(call: ToolCall) -> LoopEvent:
        return LoopEvent("tool_call_start", {"id": call.id, "name": call.name, "arguments": call.arguments})

    def _finish(self, call: ToolCall, result: ToolResult, ms: float, ctx: LoopContext,
                results: list[tuple[ToolCall, ToolResult]], denied: bool, dup: bool = False) -> LoopEvent:
        results.append((call, result))
        if result.success:
            self.consecutive_errors = 0
        elif not denied:
            self.consecutive_errors += 1
        ctx.consecutive_tool_errors = self.consecutive_errors
        data: dict[str, Any] = {"id": call.id, "name": call.name, "success": result.success,
                                "durationMs": round(ms, 3)}
        if not result.success:
            data["error"] = result.error
        if dup:
            data["deduplicated"] = True
        return LoopEvent("tool_call_result", data)

    async def _one(self, call: ToolCall, ctx: LoopContext, run: Any) -> tuple[ToolResult, float, bool, bool]:
        key = dedup_key(call) if self.config.tool_dedup else None
        if key is not None and key in self.seen:
            return await asyncio.shield(self.seen[key]), 0.0, False, True
        first: asyncio.Future[ToolResult] | None = None
        if key is not None:  # registered before running, so a twin in the same parallel batch waits for it
            first = self.seen[key] = asyncio.get_running_loop().create_future()
        try:
            result, ms, denied = await self._timed(call, ctx, run)
        except BaseException:
            if first is not None:
                del self.seen[key]
                first.cancel()
            raise
        if first is not None:
            first.set_result(result)
        return result, ms, denied, False

    async def _timed(self, call: ToolCall, ctx: LoopContext, run: Any) -> tuple[ToolResult, float, bool]:
        started = time.perf_counter()
        mode = self.mode(call)
        attrs = {"tool.call_id": call.id, "tool.mode": mode or "host"} if run.trace_id is not None else None
        async with run.tool(call.name, attrs) as span:
            result, denied = await self._consent_and_execute(call, mode, ctx, span)
            replaced = await self.hooks.post_tool_result(result, call, ctx)
            result = replaced or result
            if span.span_id is not None:
                span.set_attrs({"tool.success": result.success, **({"tool.error": result.error} if result.error else {})})
        return result, (time.perf_counter() - started) * 1000.0, denied

    async def _consent_and_execute(self, call: ToolCall, mode: str | None, ctx: LoopContext,
                                   span: Any) -> tuple[ToolResult, bool]:
        granted = False
        if mode in CONSENT_MODES:
            try:
                granted, why = await self._ask(call, mode, ctx, span)
            except _Cancelled:
                return ToolResult.failed(CANCELLED_ERROR), True
            if not granted:
                return _denied(call, mode, why), True
        call_ctx = ctx if ctx.consent_granted == granted else replace(ctx, consent_granted=granted)
        try:
            return await self._execute(call, call_ctx), False
        except ToolConsentError as exc:  # a host executor refused: the same as a denial
            return ToolResult.failed(f"denied: {exc}"), True

    async def _ask(self, call: ToolCall, mode: str, ctx: LoopContext, span: Any) -> tuple[bool, str]:
        if self.approver is None:
            return False, "needs approval and no approver is configured"
        async with span.approval({"approval.tool": call.name, "approval.mode": mode}) as wait:
            stop = asyncio.timeout(None)  # a cancel fires it (interrupt), so a wait for the user ends
            self._running.add(stop)
            try:
                async with stop:
                    approved = bool(await self.approver(call, mode, ctx))
            except TimeoutError:
                wait.set_attrs({"approval.approved": False, "approval.cancelled": True})
                raise _Cancelled from None
            except Exception as exc:  # noqa: BLE001 - an approver that fails is a denial, never a crash
                wait.set_attrs({"approval.approved": False, "approval.error": type(exc).__name__})
                return False, f"was not approved (the approver failed: {type(exc).__name__})"
            finally:
                self._running.discard(stop)
            wait.set_attrs({"approval.approved": approved})
        return approved, "was not approved by the user"

    def interrupt(self) -> None:
        """Stop the running calls now (a cancel): their timeouts fire at once."""
        now = asyncio.get_running_loop().time()
        for deadline in list(self._running):
            deadline.reschedule(now)

    async def _execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        # In this task under asyncio.timeout (no helper tasks); a cancel reschedules the timeout to now.
        if self.cancelled.is_set():
            return ToolResult.failed(CANCELLED_ERROR)
        deadline = asyncio.timeout(self.config.tool_timeout_s)
        self._running.add(deadline)
        try:
            async with deadline:
                if self._dispatch is not None:
                    value = await self._dispatch(call, consent_granted=ctx.consent_granted, context=ctx)
                else:
                    value = await self.tools.execute(call, ctx)
        except TimeoutError:
            if self.cancelled.is_set():
                return ToolResult.failed(CANCELLED_ERROR)
            return ToolResult.failed(f"tool {call.name!r} timed out after {self.config.tool_timeout_s:g} s"
                                     " and was stopped")
        except ToolConsentError:
            raise
        except Exception as exc:  # noqa: BLE001 - a host executor's failure is the model's to read
            return ToolResult.failed(f"tool {call.name!r} raised {type(exc).__name__}: {exc}")
        finally:
            self._running.discard(deadline)
        return _checked(call, value)


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
