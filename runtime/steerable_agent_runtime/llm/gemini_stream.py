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
  MAX_TOKENS / CONTINUATION -> length, SAFETY / RECITATION / BLOCKLIST / PROHIBITED_CONTENT /
  SPII / IMAGE_* / LANGUAGE / ESCALATION / MODEL_ARMOR / PUP_LIMITED_DISABLED and a prompt
  blocked by promptFeedback -> content_filter;
- usage (the last usageMetadata): prompt_tokens = promptTokenCount + toolUsePromptTokenCount
  (promptTokenCount already includes cachedContentTokenCount), cached_prompt_tokens =
  cachedContentTokenCount, completion_tokens = candidatesTokenCount + thoughtsTokenCount.

Raises LLMError: an ``error`` object in the stream (classified by its code and message);
MALFORMED_FUNCTION_CALL / UNEXPECTED_TOOL_CALL / TOO_MANY_TOOL_CALLS (``server``: a retry may
succeed). ``finished`` says whether a finish reason arrived: the provider raises
``transport`` for a stream without one.

:class:`GeminiSSEDecoder` reads what Gemini writes outside the SSE framing: a 200 stream it
cannot finish (a quota 429 or an overload 503 mid-answer) ends with the error as
pretty-printed JSON lines without a ``data:`` prefix, which google-genai reads too
(``_RawJsonLineBuffer``) and raises by its code.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import LLMError
from .sse import SSEDecoder
from .types import FinishReason, LLMStreamChunk, LLMUsage

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import ToolCall  # pydantic: on first use, not at import

PROVIDER = "gemini"

#: the answer withheld or stopped by a filter or policy (and every IMAGE_* reason: an image withheld)
_FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "ESCALATION",
                       "MODEL_ARMOR", "PUP_LIMITED_DISABLED", "PROMPT_BLOCKED"})
#: a token limit cut the answer (CONTINUATION: the per-request limit, the answer not complete)
_LENGTH = frozenset({"MAX_TOKENS", "CONTINUATION"})
_BAD_CALL = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"})
#: how much text outside the SSE framing is kept (an error body is a few hundred bytes)
MAX_OUTSIDE_CHARS = 65_536


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
        finish = self._finish or ""
        if finish in _FILTERED or finish.startswith("IMAGE_"):
            return "content_filter"
        if finish in _LENGTH:
            return "length"
        return "tool_calls" if self._calls else "stop"

    def usage(self) -> LLMUsage:
        """The usage of the last usageMetadata seen, normalised."""
        count = lambda key: int(self._usage.get(key) or 0)
        prompt = count("promptTokenCount") + count("toolUsePromptTokenCount")
        completion = count("candidatesTokenCount") + count("thoughtsTokenCount")
        return LLMUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                        cached_prompt_tokens=count("cachedContentTokenCount"))


class GeminiSSEDecoder(SSEDecoder):
    """An :class:`SSEDecoder` that also keeps the lines Gemini writes outside the SSE framing,
    to find the error object it ends a failed 200 stream with (see the module docstring).

    Events decode exactly as with SSEDecoder; those lines (no SSE field) were ignored there
    and are only kept here, so a normal stream pays nothing more.
    """

    __slots__ = ("_depth", "_kept", "_outside")

    def __init__(self) -> None:
        super().__init__()
        self._outside: list[list[str]] = []  # the lines of each JSON value (or stray line), in order
        self._depth = 0  # braces still open in the last value
        self._kept = 0

    def other_line(self, line: str) -> None:
        if self._kept >= MAX_OUTSIDE_CHARS:
            return
        self._kept += len(line)
        if self._depth == 0:  # a new value starts here (nested objects are lines of the open one)
            self._outside.append([])
        self._outside[-1].append(line)
        self._depth = max(0, self._depth + _brace_balance(line))

    def error_body(self) -> dict[str, Any] | None:
        """The last ``{"error": {...}}`` object written outside the framing, or None. Ends the
        decoding (:meth:`close`): the body's last line needs no line break after it."""
        if self._pending:  # Gemini's closing "}" comes without a newline; the spec would drop it
            self._field(self._pending)
        self.close()
        found = None
        for lines in self._outside:
            try:
                value = json.loads("\n".join(lines))
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("error"), dict):
                found = value
        return found


def _brace_balance(line: str) -> int:
    """Braces opened minus closed on ``line``, those inside JSON strings not counted (a JSON
    string never spans lines, so each line starts outside one)."""
    depth, in_string, escaped = 0, False, False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
    return depth
