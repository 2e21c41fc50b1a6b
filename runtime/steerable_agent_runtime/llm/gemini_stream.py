"""Gemini ``streamGenerateContent`` responses -> LLMStreamChunks.

Guarantees:
- ``text`` parts -> ``content_delta``; parts marked ``thought`` -> ``reasoning_delta``;
- each ``functionCall`` part (Gemini sends a call whole, in one part) -> one ToolCall with
  an id generated here, unique within the response (``call_<response tag>_<n>``), emitted
  with the last chunks once the stream has ended with a finish reason (a stream cut mid-way
  yields no tool call at all); a
  ``thoughtSignature`` on the part is kept in :attr:`GeminiStreamParser.signatures` so the
  provider can send it back with the call;
- the last chunk (from :meth:`GeminiStreamParser.final`, when the stream ends) carries the
  finish reason and usage: STOP -> stop (tool_calls when the response had calls),
  MAX_TOKENS -> length, SAFETY / RECITATION / BLOCKLIST / PROHIBITED_CONTENT / SPII /
  IMAGE_* / LANGUAGE and a prompt blocked by promptFeedback -> content_filter;
- usage (the last usageMetadata): prompt_tokens = promptTokenCount + toolUsePromptTokenCount
  (promptTokenCount already includes cachedContentTokenCount), cached_prompt_tokens =
  cachedContentTokenCount, completion_tokens = candidatesTokenCount + thoughtsTokenCount.

Raises LLMError: an ``error`` object in the stream (classified by its code and message);
MALFORMED_FUNCTION_CALL / UNEXPECTED_TOOL_CALL / TOO_MANY_TOOL_CALLS (``server``: a retry may
succeed). ``finished`` says whether a finish reason arrived: the provider raises
``transport`` for a stream without one.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import LLMError
from .types import FinishReason, LLMStreamChunk, LLMUsage

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import ToolCall  # pydantic: on first use, not at import

PROVIDER = "gemini"

_FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                       "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "LANGUAGE"})
_BAD_CALL = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"})


class GeminiStreamParser:
    """Feed it each decoded response object; it returns the chunks that object holds."""

    def __init__(self, on_error: Callable[[dict[str, Any]], LLMError]) -> None:
        self._classify = on_error
        self._tag = secrets.token_hex(4)
        self._calls: list[ToolCall] = []
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self.signatures: dict[str, str] = {}

    def feed(self, data: dict[str, Any]) -> list[LLMStreamChunk]:
        """The chunks of one streamed GenerateContentResponse."""
        if isinstance(data.get("error"), dict):
            raise self._classify(data)
        if isinstance(data.get("usageMetadata"), dict):
            self._usage = data["usageMetadata"]
        if (data.get("promptFeedback") or {}).get("blockReason"):
            self._finish = "PROMPT_BLOCKED"
        candidates = data.get("candidates") or []
        if not candidates:
            return []
        candidate = candidates[0]
        chunks = [c for part in (candidate.get("content") or {}).get("parts") or [] for c in self._part(part)]
        if candidate.get("finishReason"):
            self._finish = candidate["finishReason"]
        return chunks

    def _part(self, part: dict[str, Any]) -> list[LLMStreamChunk]:
        call = part.get("functionCall")
        if isinstance(call, dict):
            call_id = f"call_{self._tag}_{len(self._calls) + 1}"
            if isinstance(part.get("thoughtSignature"), str):
                self.signatures[call_id] = part["thoughtSignature"]
            args = call.get("args")
            from ..models import ToolCall  # pydantic: on first use, not at import
            from ..tools import RAW_ARGUMENTS_KEY

            if not isinstance(args, dict):  # absent: no arguments; anything else: the router says so
                args = {} if args is None else {RAW_ARGUMENTS_KEY: json.dumps(args)}

            self._calls.append(ToolCall(id=call_id, name=str(call.get("name", "")), arguments=args))
            return []
        text = part.get("text")
        if not isinstance(text, str) or not text:
            return []
        if part.get("thought"):
            return [LLMStreamChunk(reasoning_delta=text)]
        return [LLMStreamChunk(content_delta=text)]

    @property
    def finished(self) -> bool:
        """Whether a finish reason arrived (a stream without one was cut)."""
        return self._finish is not None

    def final(self) -> list[LLMStreamChunk]:
        """The last chunk (finish reason + usage), once the stream has ended with a finish reason."""
        if self._finish in _BAD_CALL:
            raise LLMError(f"Gemini ended the response with {self._finish}", kind="server", provider=PROVIDER,
                           hint="retry the request; the model produced a function call it could not complete")
        calls = [LLMStreamChunk(tool_call=call) for call in self._calls]
        return [*calls, LLMStreamChunk(finish_reason=self._finish_reason(), usage=self.usage())]

    def _finish_reason(self) -> FinishReason:
        if self._finish in _FILTERED or self._finish == "PROMPT_BLOCKED":
            return "content_filter"
        if self._finish == "MAX_TOKENS":
            return "length"
        return "tool_calls" if self._calls else "stop"

    def usage(self) -> LLMUsage:
        """The usage of the last usageMetadata seen, normalised."""
        count = lambda key: int(self._usage.get(key) or 0)
        prompt = count("promptTokenCount") + count("toolUsePromptTokenCount")
        completion = count("candidatesTokenCount") + count("thoughtsTokenCount")
        return LLMUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                        cached_prompt_tokens=count("cachedContentTokenCount"))
