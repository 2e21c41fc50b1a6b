"""CacheControlProvider: prompt-cache breakpoints, recomputed from each request.

Wraps any provider. When the inner provider has an explicit breakpoint API (it says
``cache_breakpoints = True``: AnthropicProvider) each request gets up to three breakpoints,
placed on the request being sent (never remembered from an earlier one, so a late-bound tool
simply gets the anchor next time):

1. the transcript tail: the last block of the last user turn (text, image or tool_result);
2. the system prompt, sent as a text block;
3. the last tool definition.

The marker is ``{"type": "ephemeral"}``, or ``{"type": "ephemeral", "ttl": "1h"}`` when the
retention is ``long`` (the constructor's, or ``cache_retention`` on one call) or the
environment has ``STEERABLE_PROMPT_CACHE_TTL=1h``. A body never carries more than 4
breakpoints (Anthropic's limit): ones already there count, and ours are added in the order
above until the limit. ``cache_retention="none"`` on a call sends no breakpoints (a summary of
a transcript about to be dropped is not worth a cache write); ``STEERABLE_CACHE_CONTROL=0``
(read at every request) makes the wrapper a pass-through. For other providers (implicit
prefix caches) it is always a pass-through.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, get_args

from .errors import ProviderConfigError
from .types import CacheRetention, CompleteMixin, LLMProvider, LLMStreamChunk

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage

MAX_BREAKPOINTS = 4
_OFF = frozenset({"0", "false", "off", "no"})


class CacheControlProvider(CompleteMixin):
    """A provider that adds prompt-cache breakpoints to its inner provider's requests.

    Raises ProviderConfigError for a retention other than short | long | none (at
    construction, or from ``stream`` for a call's ``cache_retention``, before anything is sent).
    """

    def __init__(self, inner: LLMProvider, retention: CacheRetention = "short") -> None:
        if retention not in get_args(CacheRetention):
            raise ProviderConfigError(f"cache retention must be short, long or none (got {retention!r})",
                                      hint="pass retention='short' (5 minutes) or 'long' (1 hour)")
        self.inner = inner
        self.retention: CacheRetention = retention

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    def __repr__(self) -> str:
        return f"CacheControlProvider({self.inner!r}, retention={self.retention!r})"

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> AsyncIterator[LLMStreamChunk]:
        """The inner provider's stream, its request body stamped (see the module docstring)."""
        marker = self.marker(options.get("cache_retention"))
        if marker is not None:
            options = {**options, "shape_body": _then(options.get("shape_body"), marker)}
        return self.inner.stream(messages, tools=tools, temperature=temperature, **options)

    def marker(self, call_retention: str | None = None) -> dict[str, str] | None:
        """The cache_control marker this request gets, or None when it gets no breakpoints."""
        retention = call_retention or self.retention
        if retention not in get_args(CacheRetention):
            raise ProviderConfigError(f"cache_retention must be short, long or none (got {retention!r})",
                                      hint="pass cache_retention='none' to skip the breakpoints for one call")
        if retention == "none" or not getattr(self.inner, "cache_breakpoints", False):
            return None
        if os.environ.get("STEERABLE_CACHE_CONTROL", "").strip().lower() in _OFF:
            return None
        if retention == "long" or os.environ.get("STEERABLE_PROMPT_CACHE_TTL", "").strip().lower() == "1h":
            return {"type": "ephemeral", "ttl": "1h"}
        return {"type": "ephemeral"}

    async def aclose(self) -> None:
        """Close the inner provider (when it has aclose)."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


def _then(first: Callable[[dict[str, Any]], dict[str, Any]] | None,
          marker: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def shape(body: dict[str, Any]) -> dict[str, Any]:
        return stamp_breakpoints(first(body) if first is not None else body, marker)
    return shape


def stamp_breakpoints(body: dict[str, Any], marker: dict[str, str]) -> dict[str, Any]:
    """A copy of the Anthropic ``body`` with breakpoints on tail, system and last tool (<= 4 in all)."""
    body = dict(body)
    room = MAX_BREAKPOINTS - count_breakpoints(body)
    for anchor in (_tail_anchor, _system_anchor, _tool_anchor):
        if room <= 0:
            break
        room -= anchor(body, dict(marker))
    return body


def count_breakpoints(body: dict[str, Any]) -> int:
    """How many cache_control markers the body holds (tools, system blocks, message blocks)."""
    blocks: list[Any] = list(body.get("tools") or [])
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)


def _tail_anchor(body: dict[str, Any], marker: dict[str, str]) -> int:
    messages = list(body.get("messages") or [])
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            turn = dict(messages[index])
            turn["content"], added = _stamp_last(turn.get("content"), marker)
            messages[index] = turn
            body["messages"] = messages
            return added
    return 0


def _system_anchor(body: dict[str, Any], marker: dict[str, str]) -> int:
    if not body.get("system"):
        return 0
    body["system"], added = _stamp_last(body["system"], marker)
    return added


def _tool_anchor(body: dict[str, Any], marker: dict[str, str]) -> int:
    tools = list(body.get("tools") or [])
    if not tools:
        return 0
    added = 0 if "cache_control" in tools[-1] else 1
    tools[-1] = {**tools[-1], "cache_control": marker}
    body["tools"] = tools
    return added


def _stamp_last(content: Any, marker: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    """Content in block form with ``marker`` on its last block, and 1 if that block had none."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    if not blocks:
        return blocks, 0
    added = 0 if "cache_control" in blocks[-1] else 1
    blocks[-1] = {**blocks[-1], "cache_control": marker}
    return blocks, added
