"""Reading a transcript's tool calls and a tool_choice the same way for every wire adapter.

Tool calls on an assistant LLMMessage are ``ToolCall.to_wire()`` dicts ``{id, name,
arguments}``; OpenAI's ``{id, function: {name, arguments: "<json>"}}`` is read too. Anything
else raises :class:`~.errors.ProviderConfigError` naming the call; nothing is sent.

A tool_choice on a request without tools (:func:`tool_choice_to_send`), one rule for every
wire, since each API refuses a tool_choice without tools with a 400: "auto" and "none" are left
out of the body (without tools the model calls none either way); "required" and a named function,
which no request without tools can honour, raise ProviderConfigError before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import ProviderConfigError

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage, ToolCall

_CALL_HINT = "give tool calls as {'id', 'name', 'arguments': {...}} (ToolCall.to_wire())"
_CHOICE_HINT = "use 'auto', 'required', 'none' or {'type': 'function', 'function': {'name': ...}}"
_NO_TOOLS_HINT = ("pass the tools the model may call (tools=router.describe()), or use tool_choice 'auto' or "
                  "'none' (or leave it out) on a request without tools")


def assistant_tool_calls(message: LLMMessage, *, provider: str) -> list[ToolCall]:
    """The message's tool calls as ToolCalls (raises ProviderConfigError for a malformed one)."""
    return [_tool_call(call, provider) for call in message.tool_calls or ()]


def _tool_call(call: Any, provider: str) -> ToolCall:
    if not isinstance(call, dict):
        raise ProviderConfigError(f"{provider}: an assistant tool call is not an object", provider=provider,
                                  hint=_CALL_HINT)
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name, arguments = function.get("name"), function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = None
    if not isinstance(call.get("id"), str) or not isinstance(name, str) or not isinstance(arguments, dict):
        raise ProviderConfigError(f"{provider}: assistant tool call {call.get('id')!r} needs a string id, a name "
                                  "and object arguments", provider=provider, hint=_CALL_HINT)
    from ..models import ToolCall  # pydantic: on first use, not at import

    return ToolCall(id=call["id"], name=name, arguments=arguments)


def tool_call_names(messages: Sequence[LLMMessage], *, provider: str) -> dict[str, str]:
    """Call id -> tool name, for every tool call the assistant made in ``messages``."""
    return {call.id: call.name for message in messages for call in assistant_tool_calls(message, provider=provider)}


def tool_choice_mode(tool_choice: Any, *, provider: str) -> tuple[str, str | None]:
    """An OpenAI-form tool_choice as (mode, name): mode is auto | required | none | function.

    Raises ProviderConfigError for anything else.
    """
    if tool_choice in ("auto", "required", "none"):
        return tool_choice, None
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return "function", name
    raise ProviderConfigError(f"{provider}: tool_choice {tool_choice!r} is not understood", provider=provider,
                              hint=_CHOICE_HINT)


def tool_choice_to_send(tool_choice: Any, *, tool_names: Sequence[str],
                        provider: str) -> tuple[str, str | None] | None:
    """The tool_choice a request sends, as :func:`tool_choice_mode` reads it, or None to send none.

    ``tool_names``: the names of the request's tools. None when ``tool_choice`` is None, or is
    "auto" or "none" and the request has no tools. Raises ProviderConfigError for a choice not
    understood (with tools or without), for "required" or a named function on a request without
    tools, and for a named function that is not among the request's tools (every API refuses
    those with a 400).
    """
    if tool_choice is None:
        return None
    mode, name = tool_choice_mode(tool_choice, provider=provider)
    if tool_names:
        if mode == "function" and name not in tool_names:
            raise ProviderConfigError(
                f"{provider}: tool_choice names function {name!r}, which is not among this request's tools"
                f" ({', '.join(map(repr, tool_names))})", provider=provider,
                hint="name one of the tools passed in tools=, or use tool_choice 'required' to make the model call any")
        return mode, name
    if mode in ("auto", "none"):
        return None
    raise ProviderConfigError(f"{provider}: tool_choice {tool_choice!r} needs tools, and this request has no tools",
                              provider=provider, hint=_NO_TOOLS_HINT)
