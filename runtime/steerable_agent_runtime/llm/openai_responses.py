"""OpenAIResponsesProvider: OpenAI's item-based Responses wire.

POST ``{base_url}/responses`` with ``stream: true`` and ``store: false`` (nothing is kept on
OpenAI's side; every request carries the whole transcript as input items: messages,
``function_call`` and ``function_call_output``). Guarantees, on top of
:class:`~.types.LLMProvider`'s:
- ``response.function_call_arguments.delta`` fragments are assembled per output item; each call
  is yielded once, whole, when the response completes, with ``ToolCall.id`` = the item's
  ``call_id`` (not its item id).
- Reasoning summary deltas (``response.reasoning_summary_text.delta``, and
  ``response.reasoning_text.delta`` where a model streams raw reasoning) are ``reasoning_delta``.
- Usage: ``input_tokens`` (already includes cached tokens), ``input_tokens_details.cached_tokens``.
- ``response.completed`` -> ``stop`` (``tool_calls`` when calls were made);
  ``response.incomplete`` -> ``length`` (``content_filter`` when that was the reason).
- ``response.failed`` and ``error`` events raise the classified LLMError; a stream that ends
  before one of the terminal events is ``LLMError(kind="transport")``.
- Tools go flat (``{"type": "function", name, description, parameters, strict}``) with
  ``strict: false`` unless the definition says ``strict``: the API would otherwise make every
  tool strict, every optional argument one the model must send.
- With ``keep_reasoning`` on, every request asks for ``include: ["reasoning.encrypted_content"]``
  and an assistant turn this provider returned is sent back with its encrypted reasoning items
  in place before its calls (see :mod:`.openai_reasoning`); off, the body is exactly what it is
  without the option. The default (None) turns it on for OpenAI reasoning model names only.

Raises ProviderConfigError (no model, a base URL that is not http(s), a keep_reasoning that is
not a bool or None, a tool_choice not understood or needing tools on a request without),
ToolDefinitionError (a tool not in OpenAI function form), and LLMError for every request failure.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from .classify import classify_error_body, malformed_data_error, stream_cut_error
from .errors import ProviderConfigError
from .http import finish_body, stream_sse
from .openai_compat import BearerEndpoint, parse_arguments, wire_tool_choice
from .openai_reasoning import BEFORE_TEXT, INCLUDE, ReasoningKeep, is_reasoning_model
from .parts import ImagePart, parse_parts, text_of
from .tooldefs import function_tools
from .types import FinishReason, LLMStreamChunk, LLMUsage

if TYPE_CHECKING:
    from ..models import LLMMessage, ToolCall

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})


class OpenAIResponsesProvider(BearerEndpoint):
    """A model behind OpenAI's ``/responses`` endpoint."""

    name = "openai_responses"
    path = "/responses"

    def __init__(self, model: str, api_key: str | None, base_url: str = "https://api.openai.com/v1", *,
                 client: Any = None, timeout: Any = None, extra_headers: dict[str, str] | None = None,
                 keep_reasoning: bool | None = None) -> None:
        self._setup(model, base_url, api_key, client, timeout, extra_headers)
        if keep_reasoning is not None and not isinstance(keep_reasoning, bool):
            raise ProviderConfigError(f"{self.name}: keep_reasoning must be True, False or None (got {keep_reasoning!r})",
                                      provider=self.name, hint="leave it None to decide by the model name")
        self.keep_reasoning = is_reasoning_model(self.model) if keep_reasoning is None else keep_reasoning
        self._reasoning = ReasoningKeep()

    def build_body(self, messages: Sequence[LLMMessage], *, tools: Iterable[dict[str, Any]] | None = None,
                   temperature: float | None = None, **options: Any) -> dict[str, Any]:
        """The JSON body for ``messages`` (raises ToolDefinitionError/ProviderConfigError on bad input)."""
        kept = self._reasoning if self.keep_reasoning else None
        items: list[dict[str, Any]] = []
        for message in messages:
            items.extend(to_input_items(message, self.name, kept))
        body: dict[str, Any] = {"model": self.model, "input": items, "stream": True, "store": False}
        if kept is not None:
            body["include"] = [INCLUDE]
        defs = function_tools(tools, provider=self.name)
        if defs:
            # Responses reads a tool without `strict` as strict (every property required, no
            # optional argument left); an OpenAI-form tool is non-strict unless it says so
            body["tools"] = [{"type": "function", "strict": False, **d} for d in defs]
        choice = wire_tool_choice(options.get("tool_choice"), self.name, nested=False,
                                  tool_names=[d["name"] for d in defs])
        if choice is not None:
            body["tool_choice"] = choice
        if temperature is not None:
            body["temperature"] = temperature
        if options.get("max_tokens") is not None:
            body["max_output_tokens"] = int(options["max_tokens"])
        return body

    async def stream(self, messages: Sequence[LLMMessage], *, tools: Iterable[dict[str, Any]] | None = None,
                     temperature: float | None = None, **options: Any) -> AsyncIterator[LLMStreamChunk]:
        """Stream one response (see the module docstring for the guarantees and what is raised)."""
        body = self.build_body(messages, tools=tools, temperature=temperature, **options)
        state = _ResponsesStream(self.name, self.url, self._api_key, keep_output=self.keep_reasoning)
        events = stream_sse(self._clients.get(), self.url, headers=self.headers(), body=body,
                            provider=self.name, secrets=(self._api_key,), cancel=options.get("cancel"))
        async with aclosing(events):
            async for message in events:
                chunk = state.feed(message.data)
                if chunk is not None:
                    yield chunk
                if state.terminal is not None:
                    await finish_body(events)  # the connection goes back to the pool
                    break
        chunks = state.end()
        if self.keep_reasoning:  # before the last chunks: a caller may stop reading after them
            self._reasoning.remember(state.output_items())
        for chunk in chunks:
            yield chunk

class _ResponsesStream:
    """Assembles one Responses stream: text and reasoning as they come, calls per output item."""

    __slots__ = ("calls", "done", "keep_output", "key", "provider", "terminal", "url")

    def __init__(self, provider: str, url: str, key: str | None, *, keep_output: bool = False) -> None:
        self.provider = provider
        self.url = url
        self.key = key
        self.keep_output = keep_output
        self.calls: dict[str, list[Any]] = {}  # item id -> [call_id, name, [fragments], final args | None]
        self.done: list[tuple[int, dict[str, Any]]] = []  # (output_index, item) of output_item.done
        self.terminal: dict[str, Any] | None = None

    def feed(self, data: str) -> LLMStreamChunk | None:
        try:
            event = json.loads(data)
        except ValueError:
            raise malformed_data_error(data, url=self.url, provider=self.provider, secrets=(self.key,)) from None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return LLMStreamChunk(content_delta=event.get("delta") or None)
        if kind == "response.function_call_arguments.delta":
            self._call(event.get("item_id"))[2].append(event.get("delta") or "")
        elif kind in _REASONING_DELTAS:
            return LLMStreamChunk(reasoning_delta=event.get("delta") or None)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item") or {}
            self._item(item)
            if self.keep_output and kind == "response.output_item.done" and isinstance(item, dict):
                index = event.get("output_index")
                self.done.append((index if isinstance(index, int) else len(self.done), item))
        elif kind == "response.function_call_arguments.done":
            self._call(event.get("item_id"))[3] = event.get("arguments")
        elif kind in _TERMINAL:
            self._terminal(kind, event)
        return None

    def output_items(self) -> list[dict[str, Any]]:
        """The finished output items (with ``keep_output``), in output order."""
        return [item for _, item in sorted(self.done, key=lambda pair: pair[0])]

    def _call(self, item_id: Any) -> list[Any]:
        acc = self.calls.get(item_id)
        if acc is None:
            acc = self.calls[item_id] = [None, None, [], None]
        return acc

    def _item(self, item: dict[str, Any]) -> None:
        if item.get("type") != "function_call":
            return
        acc = self._call(item.get("id") or item.get("call_id"))
        acc[0] = item.get("call_id") or acc[0]
        acc[1] = item.get("name") or acc[1]
        if item.get("status") == "completed" and isinstance(item.get("arguments"), str):
            acc[3] = item["arguments"]

    def _terminal(self, kind: str, event: dict[str, Any]) -> None:
        if kind == "error":
            raise classify_error_body(event, provider=self.provider, secrets=(self.key,))
        response = event.get("response") or {}
        if kind == "response.failed":
            raise classify_error_body({"error": response.get("error") or {"message": "response failed"}},
                                      provider=self.provider, secrets=(self.key,))
        self.terminal = response

    def end(self) -> list[LLMStreamChunk]:
        """The calls, whole, then finish reason and usage; raises if no terminal event came."""
        if self.terminal is None:
            raise stream_cut_error(url=self.url, provider=self.provider, expected="response.completed")
        calls = [LLMStreamChunk(tool_call=self._tool_call(acc)) for acc in self.calls.values()]
        reason: FinishReason
        if self.terminal.get("status") == "incomplete":
            why = (self.terminal.get("incomplete_details") or {}).get("reason")
            reason = "content_filter" if why == "content_filter" else "length"
        else:
            reason = "tool_calls" if calls else "stop"
        return [*calls, LLMStreamChunk(finish_reason=reason, usage=parse_usage(self.terminal.get("usage")))]

    def _tool_call(self, acc: list[Any]) -> ToolCall:
        call_id, name, fragments, final = acc
        text = final if isinstance(final, str) else "".join(fragments)
        from ..models import (
            ToolCall,  # pydantic: loaded with the first call, not at import
        )

        return ToolCall(id=call_id or "", name=name or "", arguments=parse_arguments(text, name or "?", self.provider))


def parse_usage(usage: dict[str, Any] | None) -> LLMUsage | None:
    """Responses usage as LLMUsage (``input_tokens`` already includes the cached ones)."""
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    return LLMUsage(prompt_tokens=prompt, completion_tokens=completion,
                    total_tokens=int(usage.get("total_tokens") or prompt + completion), cached_prompt_tokens=int(cached))


def to_input_items(message: LLMMessage, provider: str, kept: ReasoningKeep | None = None) -> list[dict[str, Any]]:
    """One LLMMessage as Responses input items (an assistant turn with calls is several items,
    with the reasoning ``kept`` for that turn, if any, each before the item it preceded)."""
    role = message.role
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id or "",
                 "output": text_of(message.content, provider=provider)}]
    if role == "assistant":
        return _assistant_items(message, provider, kept)
    content = message.content
    if content is None or isinstance(content, str):
        return [{"role": role, "content": content or ""}]
    wire: list[dict[str, Any]] = []
    for part in parse_parts(content, provider=provider):
        if isinstance(part, ImagePart):
            wire.append({"type": "input_image", "image_url": part.as_url(), "detail": part.detail or "auto"})
        else:
            wire.append({"type": "input_text", "text": part.text})
    return [{"role": role, "content": wire}]


def _assistant_items(message: LLMMessage, provider: str, kept: ReasoningKeep | None) -> list[dict[str, Any]]:
    calls: list[ToolCall] = []
    if message.tool_calls:
        # transcript reads ToolCall dicts and OpenAI's own form (and loads pydantic: not at import)
        from .transcript import assistant_tool_calls

        calls = assistant_tool_calls(message, provider=provider)
    slots = kept.slots(calls[0].id) if kept is not None and calls else {}
    lead = slots.get(BEFORE_TEXT, [])
    items: list[dict[str, Any]] = []
    text = text_of(message.content, provider=provider)
    if text:
        items += [*lead, {"role": "assistant", "content": text}]
        lead = []
    for call in calls:
        items += [*lead, *slots.get(call.id, ())]
        lead = []
        items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                      "arguments": json.dumps(call.arguments, ensure_ascii=False)})
    return items
