"""LLMMessages and OpenAI-form tools -> an Anthropic Messages request body.

The conversion (guaranteed, and asserted against the request the official SDK sends):
- system messages become the top-level ``system`` string (several are joined by a blank line);
- no text block is empty or only whitespace (the API refuses both): such text is left out, a
  turn left with nothing is left out, and a tool result with no text is sent without content;
- user text stays a string; parts become ``text`` / ``image`` blocks (a data URL becomes a
  ``base64`` source, an http(s) URL a ``url`` source);
- an assistant message becomes a ``text`` block (when it has text) and one ``tool_use`` block
  per call, after the thinking blocks that turn streamed when the provider kept them (the API
  requires them back when thinking is on); an assistant message with neither is left out
  (the API refuses empty content);
- a tool result becomes a ``tool_result`` block in a user turn; consecutive user-side
  messages (tool results, then user text) are merged into one user turn, so parallel calls'
  results travel together as the API requires;
- tools become ``{name, description, input_schema}``; tool_choice auto / required / none /
  a named function becomes ``auto`` / ``any`` / ``none`` / ``tool``; without tools, auto and
  none are left out and required or a named function raise (:func:`.transcript.tool_choice_to_send`:
  the API answers a tool_choice without tools with a 400).
- a request without tools whose transcript holds tool calls (a chat resumed by a host that
  registers no tools now, a turn run with none) declares each tool the transcript calls, by
  name (sorted), as unavailable (``input_schema`` any object), with tool_choice ``none``: the API
  refuses ``tool_use`` / ``tool_result`` blocks in a request that defines no tools ("Requests
  which include tool_use or tool_result blocks must define tools"), and with ``none`` the
  model calls none of them. The transcript itself is sent unchanged.

Raises ProviderConfigError for content or tool calls it cannot convert (ToolDefinitionError
for a tool that is not in OpenAI function form); nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .parts import Part, TextPart, parse_parts, text_of
from .tooldefs import function_tools
from .transcript import assistant_tool_calls, tool_choice_to_send

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage

PROVIDER = "anthropic"


def build_body(
    model: str,
    messages: Sequence[LLMMessage],
    *,
    max_tokens: int,
    tools: Iterable[dict[str, Any]] | None = None,
    temperature: float | None = None,
    tool_choice: Any = None,
    thinking_budget: int | None = None,
    thinking: Mapping[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages`` (with ``stream: true``).

    ``thinking_budget`` turns extended thinking on with that many budget tokens;
    ``thinking`` maps a turn's first tool-call id to the thinking blocks it came with.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    system = [text_of(m.content, provider=PROVIDER) for m in messages if m.role == "system"]
    system = [s for s in system if _has_text(s)]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = wire_messages([m for m in messages if m.role != "system"], thinking or {})
    converted = [_tool(t) for t in function_tools(tools, provider=PROVIDER)]
    choice = tool_choice_to_send(tool_choice, tool_names=[t["name"] for t in converted], provider=PROVIDER)
    if not converted:
        converted = unavailable_tools(body["messages"])
        choice = ("none", None) if converted else choice
    if converted:
        body["tools"] = converted
    if choice is not None:
        body["tool_choice"] = _tool_choice(*choice)
    if temperature is not None:
        body["temperature"] = temperature
    if thinking_budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": int(thinking_budget)}
    body["stream"] = True
    return body


UNAVAILABLE = "Not available in this conversation any more: do not call it."
"""The description of a tool the transcript calls that the request does not offer."""


def unavailable_tools(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool each ``tool_use`` block of ``turns`` (the wire messages) names, once each and
    sorted by name, declared unavailable; one placeholder when only ``tool_result`` blocks are
    there; none when the turns hold no tool block. Sorted, the list changes only when the set
    of names does (a compaction that folds a tool's last call away), not when the first call
    of a tool is folded: the tools lead the prompt cache's prefix."""
    names: dict[str, None] = {}
    results = False
    for turn in turns:
        content = turn["content"]
        if isinstance(content, list):
            for block in content:
                if block["type"] == "tool_use":
                    names.setdefault(block["name"], None)
                elif block["type"] == "tool_result":
                    results = True
    if not names and results:
        names["unavailable_tool"] = None
    return [{"name": name, "description": UNAVAILABLE, "input_schema": {"type": "object"}} for name in sorted(names)]


def wire_messages(messages: Sequence[LLMMessage],
                  thinking: Mapping[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """The ``messages`` array: user/assistant turns, user-side runs merged into one turn."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, content = _turn(message, thinking or {})
        if content is None:
            continue
        if turns and role == "user" and turns[-1]["role"] == "user":
            turns[-1]["content"] = _blocks(turns[-1]["content"]) + _blocks(content)
        else:
            turns.append({"role": role, "content": content})
    return turns


def _turn(message: LLMMessage, thinking: Mapping[str, list[dict[str, Any]]]) -> tuple[str, Any]:
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        content = _user_content(message)
        if content:  # an empty result is sent without content (empty text is refused)
            result["content"] = content
        return "user", [result]
    if message.role == "assistant":
        calls = assistant_tool_calls(message, provider=PROVIDER)
        blocks = [dict(b) for b in thinking.get(calls[0].id, ())] if calls else []
        parts = map(_block, parse_parts(message.content, provider=PROVIDER))
        blocks += [b for b in parts if b["type"] != "text" or _has_text(b["text"])]
        blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in calls]
        return "assistant", blocks or None
    content = _user_content(message)
    return "user", content if content else None


def _user_content(message: LLMMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str) or message.content is None:
        text = message.content or ""
        return text if _has_text(text) else ""
    blocks = (_block(p) for p in parse_parts(message.content, provider=PROVIDER))
    return [b for b in blocks if b["type"] != "text" or _has_text(b["text"])]


def _has_text(text: str) -> bool:
    """Whether ``text`` may be a text block: the API refuses an empty or all-whitespace one."""
    return text != "" and not text.isspace()


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {"type": "image", "source": {"type": "base64", "media_type": part.mime_type, "data": part.data}}


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        out["description"] = tool["description"]
    out["input_schema"] = tool["parameters"]
    return out


def _tool_choice(mode: str, name: str | None) -> dict[str, Any]:
    if mode == "function":
        return {"type": "tool", "name": name}
    return {"type": {"auto": "auto", "required": "any", "none": "none"}[mode]}
