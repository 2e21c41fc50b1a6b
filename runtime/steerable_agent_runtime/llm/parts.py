"""Provider-neutral pieces of a request, read the same way by every wire adapter.

A message's content is a string or a list of OpenAI-form parts: ``{"type": "text", "text"}``
and ``{"type": "image_url", "image_url": {"url"}}`` (a ``data:`` URL or an http(s) URL);
tool calls are ``ToolCall.to_wire()`` dicts (or OpenAI's form). Anything else is refused with a
:class:`~steerable_agent_runtime.errors.UsageError` naming what was wrong (the request is
never sent half-converted).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..models import LLMMessage, ToolCall

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.DOTALL)


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image: inline bytes (``data`` base64 + ``mime_type``) or a remote ``url``."""

    mime_type: str | None = None
    data: str | None = None
    url: str | None = None


def content_parts(message: LLMMessage) -> list[TextPart | ImagePart]:
    """The message's content as typed parts (a string is one text part; None is none).

    Raises UsageError for a part whose type is not text or image_url, or an image URL that
    is neither a base64 data URL nor http(s).
    """
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    return [_part(part, message.role) for part in content]


def _part(part: dict[str, Any], role: str) -> TextPart | ImagePart:
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        return TextPart(str(part.get("text", "")))
    if kind in ("image_url", "input_image"):
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str):
            raise UsageError(f"an image part of a {role} message has no URL",
                             hint="give image parts as {'type': 'image_url', 'image_url': {'url': 'data:...'}}")
        return image_from_url(url)
    raise UsageError(f"a {role} message has a content part of type {kind!r}, which providers cannot send",
                     hint="use parts of type 'text' or 'image_url'")


def image_from_url(url: str) -> ImagePart:
    """An ImagePart from a base64 ``data:`` URL (decoded check) or an http(s) URL."""
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        data = match.group("data").strip()
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise UsageError("an image data URL does not hold valid base64",
                             hint="encode the image bytes with base64 in the data URL") from None
        return ImagePart(mime_type=match.group("mime") or "application/octet-stream", data=data)
    if url.startswith(("http://", "https://")):
        return ImagePart(url=url)
    raise UsageError(f"an image URL must be a base64 data: URL or http(s), not {url[:40]!r}",
                     hint="pass 'data:image/png;base64,...' or an https URL")


def text_of(message: LLMMessage) -> str:
    """The text parts of the message joined (images left out)."""
    return "".join(p.text for p in content_parts(message) if isinstance(p, TextPart))


def tool_choice_name(tool_choice: Any) -> tuple[str, str | None]:
    """An OpenAI-form tool_choice as (mode, name): mode is auto | required | none | function.

    Raises UsageError for anything else.
    """
    if tool_choice in ("auto", "required", "none"):
        return tool_choice, None
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return "function", name
    raise UsageError(f"tool_choice {tool_choice!r} is not understood",
                     hint="use 'auto', 'required', 'none' or {'type': 'function', 'function': {'name': ...}}")


def tool_call_names(messages: Sequence[LLMMessage]) -> dict[str, str]:
    """Call id -> tool name, for every tool call the assistant made in ``messages``."""
    return {call.id: call.name for message in messages for call in assistant_tool_calls(message)}


def assistant_tool_calls(message: LLMMessage) -> list[ToolCall]:
    """The message's tool calls as ToolCalls.

    Accepts the neutral form ``{id, name, arguments: dict}`` (what ``ToolCall.to_wire()``
    gives) and OpenAI's ``{id, function: {name, arguments: "<json>"}}``. Raises UsageError
    for a call without an id or name, or whose arguments are not a JSON object.
    """
    return [_tool_call(call) for call in message.tool_calls or ()]


def _tool_call(call: Any) -> ToolCall:
    hint = "give tool calls as {'id', 'name', 'arguments': {...}} (ToolCall.to_wire())"
    if not isinstance(call, dict):
        raise UsageError("an assistant tool call is not an object", hint=hint)
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name, arguments = function.get("name"), function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            arguments = None
    if not isinstance(call.get("id"), str) or not isinstance(name, str) or not isinstance(arguments, dict):
        raise UsageError(f"assistant tool call {call.get('id')!r} needs a string id, a name and object arguments",
                         hint=hint)
    return ToolCall(id=call["id"], name=name, arguments=arguments)
