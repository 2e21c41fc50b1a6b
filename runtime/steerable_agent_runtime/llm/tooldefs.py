"""Tool definitions in OpenAI function form, checked once for every provider.

:func:`function_tools` returns ``[{"name", "description", "parameters"}, ...]`` (the parts
every wire needs) or raises :class:`ToolDefinitionError` naming the first bad tool (by name,
or by position when it has none). Nothing is sent when it raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .errors import ToolDefinitionError

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def function_tools(tools: Iterable[Any] | None, *, provider: str) -> list[dict[str, Any]]:
    """The function parts of ``tools``; raises ToolDefinitionError for one not in function form."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools or ()):
        fn = tool.get("function") if isinstance(tool, dict) else None
        raw_name = fn.get("name") if isinstance(fn, dict) else (tool.get("name") if isinstance(tool, dict) else None)
        label = raw_name if isinstance(raw_name, str) and raw_name else f"#{index}"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise ToolDefinitionError(
                f"{provider}: tool {label} is not in OpenAI function form "
                '({"type": "function", "function": {...}})', tool=label, provider=provider)
        if not isinstance(raw_name, str) or not raw_name:
            raise ToolDefinitionError(f"{provider}: tool {label} has no function name", tool=label, provider=provider)
        params = fn.get("parameters", EMPTY_PARAMETERS)
        if not isinstance(params, dict):
            raise ToolDefinitionError(f"{provider}: tool {label}'s parameters are not a JSON schema object",
                                      tool=label, provider=provider)
        if raw_name in seen:
            raise ToolDefinitionError(f"{provider}: tool {label} is defined twice", tool=label, provider=provider)
        seen.add(raw_name)
        entry: dict[str, Any] = {"name": raw_name, "parameters": params}
        if isinstance(fn.get("description"), str):
            entry["description"] = fn["description"]
        if isinstance(fn.get("strict"), bool):
            entry["strict"] = fn["strict"]
        out.append(entry)
    return out
