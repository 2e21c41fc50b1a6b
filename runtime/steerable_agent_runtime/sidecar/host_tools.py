"""Host tools: tools the host app runs, reached through reverse requests.

- ``HostTools`` is the loop's tool set for one stream: ``describe()`` gives the host's
  function schemas (without the sidecar-only ``mode`` key), ``execute`` sends
  ``tool.invoke {name, arguments, callId, chatId}`` and turns the answer into a ToolResult.
  No answer within the timeout, an error answer or a malformed answer: a failed result
  saying so (the model reads it; the turn goes on).
- ``HostApprover`` asks ``approval.request {name, mode, arguments, chatId}``; anything but
  ``{"approved": true}`` in time (an error, a timeout, a malformed answer) is a denial.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from ..models import ToolCall
from ..tooldefs import TOOL_NAME
from ..tools import CONSENT_MODES, ToolResult
from ..transport.jsonrpc import INVALID_PARAMS, RpcError

log = logging.getLogger("steerable.sidecar")

Reverse = Callable[..., Awaitable[Any]]
MODES = ("read", "safe_write", "destructive", "local", "external")


def check_schemas(schemas: list[dict[str, Any]]) -> dict[str, str]:
    """Tool name -> mode for the host's schemas; RpcError -32602 naming the bad field."""
    modes: dict[str, str] = {}
    for index, schema in enumerate(schemas):
        fn = schema.get("function")
        if schema.get("type") != "function" or not isinstance(fn, dict):
            raise _bad(f"tools.{index}", 'each tool must be {"type": "function", "function": {...}}')
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise _bad(f"tools.{index}.function.name", f"{name!r} is not a tool name every provider takes (1-64"
                       " letters, digits, '_' or '-', starting with a letter or '_')")
        for key, kind, label in (("parameters", dict, "a JSON schema object"), ("description", str, "a string")):
            if key in fn and not isinstance(fn[key], kind):
                raise _bad(f"tools.{index}.function.{key}", f"{key} must be {label}")
        if name in modes:
            raise _bad(f"tools.{index}.function.name", f"tool {name!r} is listed twice")
        mode = schema.get("mode", "external")
        if mode not in MODES:
            raise _bad(f"tools.{index}.mode", f"mode must be one of {', '.join(MODES)}")
        modes[name] = mode
    return modes


def _bad(field: str, why: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"invalid params for agent.chat.stream: {field}: {why}",
                    hint="give tools in OpenAI function form (see docs/sidecar.md)", data={"field": field})


class HostTools:
    """The tool set of one stream, run by the host over ``tool.invoke``."""

    def __init__(self, schemas: list[dict[str, Any]], *, chat_id: str, reverse: Reverse, timeout_s: float) -> None:
        self._modes = check_schemas(schemas)
        self._schemas = [{k: v for k, v in s.items() if k != "mode"} for s in schemas]
        self.chat_id = chat_id
        self._reverse = reverse
        self.timeout_s = timeout_s

    def describe(self) -> list[dict[str, Any]]:
        return list(self._schemas)

    def mode_of(self, name: str) -> str | None:
        return self._modes.get(name)

    async def execute(self, call: ToolCall, ctx: Any = None) -> ToolResult:
        if call.name not in self._modes:
            return ToolResult(success=False, error=f"unknown tool {call.name!r}; the host offers: {', '.join(self._modes) or 'none'}")
        params = {"name": call.name, "arguments": call.arguments, "callId": call.id, "chatId": self.chat_id}
        try:
            answer = await self._reverse("tool.invoke", params, timeout=self.timeout_s)
        except TimeoutError:
            return ToolResult(success=False, error=f"the host did not answer tool.invoke for {call.name} within {self.timeout_s:g} s")
        except RpcError as err:
            return ToolResult(success=False, error=f"the host's tool {call.name} failed: {err.message}")
        except ConnectionError as exc:
            return ToolResult(success=False, error=f"the host went away while {call.name} ran: {exc}")
        return _as_result(call.name, answer)


def _as_result(name: str, answer: Any) -> ToolResult:
    if not isinstance(answer, dict):
        return ToolResult(success=False, error=f"the host answered tool.invoke for {name} with {type(answer).__name__}, not a ToolResult object")
    try:
        # strict: {"success": "no"} must not read as a success
        return ToolResult.model_validate({k: v for k, v in answer.items() if k in ("success", "data", "error", "needs_followup")},
                                         strict=True)
    except ValidationError as exc:
        return ToolResult(success=False, error=f"the host's answer for {name} is not a ToolResult: {exc.errors()[0]['msg']}")


class HostApprover:
    """Consent for ``local``/``destructive`` calls through ``approval.request``."""

    def __init__(self, tools: HostTools, *, reverse: Reverse, timeout_s: float) -> None:
        self.tools = tools
        self._reverse = reverse
        self.timeout_s = timeout_s

    async def __call__(self, call: ToolCall, mode: str | None = None, ctx: Any = None) -> bool:
        """``approver(call, mode, ctx)`` as CoreLoop calls it: True lets the call run."""
        mode = mode or self.tools.mode_of(call.name) or "external"
        if mode not in CONSENT_MODES:
            return True
        params = {"name": call.name, "mode": mode, "arguments": call.arguments, "chatId": self.tools.chat_id}
        try:
            answer = await self._reverse("approval.request", params, timeout=self.timeout_s)
        except (TimeoutError, RpcError, ConnectionError) as exc:
            log.info("approval for %s denied: %s", call.name, exc or type(exc).__name__)
            return False
        return isinstance(answer, dict) and answer.get("approved") is True
