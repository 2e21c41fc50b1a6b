"""Anthropic Messages stream events -> LLMStreamChunks.

Guarantees:
- text_delta -> ``content_delta``; thinking_delta -> ``reasoning_delta``; the thinking
  blocks themselves (text + signature, redacted ones too) are kept whole in
  :attr:`AnthropicStreamParser.thinking_blocks`, so the provider can send them back before
  the tool calls of this turn, as the API requires when thinking is on;
- a tool_use block's ``input_json_delta`` fragments are assembled per block index; each
  call is emitted once, whole, at message_stop (in block order, before the last chunk), so a
  stream cut or failed mid-way yields no tool call at all;
- the last chunk (at message_stop) carries the finish reason and the usage: end_turn /
  stop_sequence / pause_turn -> stop, max_tokens / model_context_window_exceeded -> length,
  tool_use -> tool_calls, refusal -> content_filter; tool_calls whenever there are calls;
- usage: prompt_tokens = input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens; message_delta's cumulative counts replace message_start's.

Raises LLMError: an ``error`` event (classified by its error type and message). Arguments
that are not a JSON object reach the router as ``tools.decode_arguments`` gives them. ``done``
says whether message_stop arrived: the provider raises ``transport`` for a stream without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import LLMError
from .types import FinishReason, LLMStreamChunk, LLMUsage

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import ToolCall  # pydantic: on first use, not at import

PROVIDER = "anthropic"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
    "max_tokens": "length", "model_context_window_exceeded": "length",
    "tool_use": "tool_calls", "refusal": "content_filter",
}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass
class _ToolBlock:
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)


class AnthropicStreamParser:
    """Feed it each decoded event; it returns the chunks that event completes."""

    def __init__(self, on_error: Callable[[dict[str, Any]], LLMError]) -> None:
        self._classify = on_error
        self._tools: dict[int, _ToolBlock] = {}
        self._counts: dict[str, int] = {}
        self._stop_reason: str | None = None
        self._calls: dict[int, ToolCall] = {}
        self._thinking: dict[int, dict[str, Any]] = {}
        self.thinking_blocks: list[dict[str, Any]] = []
        self.done = False

    @property
    def call_ids(self) -> list[str]:
        """The ids of the calls assembled so far, in block order."""
        return [self._calls[index].id for index in sorted(self._calls)]

    def feed(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        """The chunks for one event's JSON ``data``; unknown event types are ignored."""
        handler = getattr(self, "_on_" + str(data.get("type")), None)
        return handler(data) if handler is not None else []

    def _on_message_start(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        self._merge_usage((data.get("message") or {}).get("usage"))
        return []

    def _on_content_block_start(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        block = data.get("content_block") or {}
        if block.get("type") == "tool_use":  # server_tool_use runs at Anthropic: not ours to call
            initial = block.get("input") if isinstance(block.get("input"), dict) else {}
            self._tools[int(data.get("index", 0))] = _ToolBlock(str(block.get("id", "")), str(block.get("name", "")),
                                                                initial=initial)
        elif block.get("type") == "text" and block.get("text"):
            return [LLMStreamChunk(content_delta=block["text"])]
        elif block.get("type") in ("thinking", "redacted_thinking"):
            self._thinking[int(data.get("index", 0))] = dict(block)
            if block.get("thinking"):
                return [LLMStreamChunk(reasoning_delta=block["thinking"])]
        return []

    def _on_content_block_delta(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [LLMStreamChunk(content_delta=delta["text"])]
        thinking = self._thinking.get(int(data.get("index", 0)))
        if kind == "thinking_delta" and delta.get("thinking"):
            if thinking is not None:
                thinking["thinking"] = thinking.get("thinking", "") + delta["thinking"]
            return [LLMStreamChunk(reasoning_delta=delta["thinking"])]
        if kind == "signature_delta" and thinking is not None:
            thinking["signature"] = thinking.get("signature", "") + str(delta.get("signature", ""))
        if kind == "input_json_delta":
            block = self._tools.get(int(data.get("index", 0)))
            if block is not None:
                block.fragments.append(str(delta.get("partial_json", "")))
        return []

    def _on_content_block_stop(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        index = int(data.get("index", 0))
        if index in self._thinking:
            self.thinking_blocks.append(self._thinking.pop(index))
        block = self._tools.pop(index, None)
        if block is None:
            return []
        from ..models import ToolCall  # pydantic: on first use, not at import

        self._calls[index] = ToolCall(id=block.id, name=block.name, arguments=_arguments(block))
        return []

    def _on_message_delta(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        self._stop_reason = (data.get("delta") or {}).get("stop_reason") or self._stop_reason
        self._merge_usage(data.get("usage"))
        return []

    def _on_message_stop(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        self.done = True
        finish = "tool_calls" if self._calls else _FINISH.get(self._stop_reason or "", "stop")
        calls = [LLMStreamChunk(tool_call=self._calls[index]) for index in sorted(self._calls)]
        return [*calls, LLMStreamChunk(finish_reason=finish, usage=self.usage())]

    def _on_error(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        raise self._classify(data)

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key in _USAGE_KEYS:
                if isinstance(usage.get(key), int):
                    self._counts[key] = usage[key]

    def usage(self) -> LLMUsage:
        """The usage so far, normalised (prompt_tokens includes cache reads and writes)."""
        read = self._counts.get("cache_read_input_tokens", 0)
        created = self._counts.get("cache_creation_input_tokens", 0)
        prompt = self._counts.get("input_tokens", 0) + read + created
        completion = self._counts.get("output_tokens", 0)
        return LLMUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                        cached_prompt_tokens=read, cache_creation_tokens=created)


def _arguments(block: _ToolBlock) -> dict[str, Any]:
    """The call's arguments; text that is not a JSON object comes back as ``decode_arguments``
    gives it (``{RAW_ARGUMENTS_KEY: text}``), so the router answers it with a failed result the
    model reads, as with every other provider."""
    text = "".join(block.fragments)
    if not text.strip():
        return dict(block.initial)
    from ..tools import decode_arguments  # pydantic: on first use, not at import

    return decode_arguments(text)
