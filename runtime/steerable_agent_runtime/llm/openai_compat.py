"""OpenAICompatProvider: the chat/completions wire (OpenAI, Ollama, vLLM, DeepSeek, Groq, ...).

POST ``{base_url}/chat/completions`` with ``stream: true`` and ``stream_options.include_usage``.
Guarantees, on top of :class:`~.types.LLMProvider`'s:
- Tool-call fragments are assembled per ``index`` (several calls, arguments split across any
  number of chunks) and each call is yielded once, whole, after the last content, followed by
  one chunk with the finish reason and the usage. A fragment without an ``index`` counts at
  its position in its chunk; a call head (an id and a name) with a new id at an index already
  in use is another call (servers that number every call 0, or give none, and send each call
  whole); a fragment without a name continues the call streamed at its index. Calls come in
  index order, those at one index in the order they came.
- ``reasoning_content`` (DeepSeek, vLLM) and ``reasoning`` (Ollama, OpenRouter) deltas are
  passed through as ``reasoning_delta``; ``refusal`` deltas as ``content_delta`` (the answer).
- Usage: ``prompt_tokens`` (which already includes cached tokens on this wire);
  ``cached_prompt_tokens`` from ``prompt_tokens_details.cached_tokens`` (or DeepSeek's
  ``prompt_cache_hit_tokens``).
- Finish reasons: ``stop | length | tool_calls | content_filter``; ``tool_calls`` whenever
  calls were assembled (some servers say ``stop``), ``function_call`` -> ``tool_calls``,
  anything else -> ``stop``.
- Option ``max_tokens`` is sent as ``max_tokens``, or as ``max_completion_tokens`` for a bare
  OpenAI o-series / gpt-5 / codex model name (those models refuse ``max_tokens``).
- Option ``text_sink``: a callable that takes the text of each chunk read through the
  stream's template (text and nothing else: the hot path, see ``openai_compat_template``)
  instead of that chunk being yielded; it is called in the chunks' order, and every other
  chunk is yielded as usual. What it raises ends the stream (the response is closed). When
  the sink has a ``many`` attribute, a run of such chunks that the SSE decoder read whole
  (``SSEDecoder.text_runs``) goes to ``sink.many(texts)`` in one call instead (the same
  non-empty texts, in order).
- The stream must end with ``data: [DONE]``, or at least have carried a finish reason;
  otherwise it was cut: ``LLMError(kind="transport")``, never a silently short answer.
  Anything after ``[DONE]`` is ignored; the body's end is awaited briefly (:func:`finish_body`)
  so the connection can serve the next request.

Raises ProviderConfigError (no model, a base URL that is not http(s); a tool_choice not
understood, or one that needs tools on a request without: ``transcript.tool_choice_to_send``),
ToolDefinitionError (a tool not in OpenAI function form), and LLMError for every request failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from .classify import classify_error_body, malformed_data_error, stream_cut_error
from .errors import LLMError, ProviderConfigError
from .http import ClientCache, finish_body, require_model, stream_sse_batches, validate_base_url
from .openai_compat_template import ChunkTemplate, learn
from .parts import ImagePart, parse_parts, text_of
from .sse import SSEDecoder
from .tooldefs import function_tools
from .types import CompleteMixin, FinishReason, LLMStreamChunk, LLMUsage

if TYPE_CHECKING:
    from ..models import LLMMessage, ToolCall

#: templates a stream may try to learn freely; after that, one more only once the last read this many chunks
LEARN_FREELY = 3
RELEARN_AFTER = 32

#: OpenAI's o-series and gpt-5 models (the bare names OpenAI and Azure take) refuse ``max_tokens``
_COMPLETION_TOKENS_MODEL = re.compile(r"(o\d|gpt-5|codex-)", re.IGNORECASE)

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_calls",
                                    "function_call": "tool_calls", "content_filter": "content_filter"}


class BearerEndpoint(CompleteMixin):
    """What both OpenAI wires share: model and base-URL checks, a Bearer key, one endpoint path.

    The key is kept private: never in ``repr``, an error or a log line (``secrets`` of stream_sse).
    """

    name = "openai"
    path = ""

    def _setup(self, model: str, base_url: str, api_key: str | None, client: Any, timeout: Any,
               extra_headers: dict[str, str] | None) -> None:
        self.model = require_model(model, provider=self.name)
        self.base_url = validate_base_url(base_url, provider=self.name)
        if api_key is not None and not isinstance(api_key, str):
            raise ProviderConfigError(f"{self.name}: api_key must be a string or None", provider=self.name,
                                      hint="pass api_key=os.environ['OPENAI_API_KEY'] (None for a keyless local server)")
        self._api_key = api_key or None
        self._clients = ClientCache(client, timeout)
        self._extra_headers = dict(extra_headers or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return self.base_url + self.path

    def headers(self) -> dict[str, str]:
        """The request headers (the key as a Bearer token; none for a keyless local server)."""
        out = dict(self._extra_headers)
        if self._api_key:
            out["authorization"] = f"Bearer {self._api_key}"
        return out

    async def aclose(self) -> None:
        """Close the HTTP client this provider opened (not one it was given)."""
        await self._clients.aclose()


class OpenAICompatProvider(BearerEndpoint):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "openai_compat"
    path = "/chat/completions"

    def __init__(self, model: str, base_url: str, api_key: str | None = None, *,
                 client: Any = None, timeout: Any = None, extra_headers: dict[str, str] | None = None) -> None:
        self._setup(model, base_url, api_key, client, timeout, extra_headers)
        # o-series and gpt-5 answer max_tokens with 400 "Use 'max_completion_tokens' instead"; a
        # routed name ("openai/gpt-5") goes to a router that takes max_tokens, as other servers do
        self.max_tokens_field = ("max_completion_tokens" if _COMPLETION_TOKENS_MODEL.match(self.model)
                                 else "max_tokens")

    def build_body(self, messages: Sequence[LLMMessage], *, tools: Iterable[dict[str, Any]] | None = None,
                   temperature: float | None = None, **options: Any) -> dict[str, Any]:
        """The JSON body for ``messages`` (raises ToolDefinitionError/ProviderConfigError on bad input)."""
        body: dict[str, Any] = {"model": self.model, "messages": [to_wire_message(m, self.name) for m in messages],
                                "stream": True, "stream_options": {"include_usage": True}}
        defs = function_tools(tools, provider=self.name)
        if defs:
            body["tools"] = [{"type": "function", "function": d} for d in defs]
        choice = wire_tool_choice(options.get("tool_choice"), self.name, nested=True,
                                  tool_names=[d["name"] for d in defs])
        if choice is not None:
            body["tool_choice"] = choice
        if temperature is not None:
            body["temperature"] = temperature
        if options.get("max_tokens") is not None:
            body[self.max_tokens_field] = int(options["max_tokens"])
        return body

    async def stream(self, messages: Sequence[LLMMessage], *, tools: Iterable[dict[str, Any]] | None = None,
                     temperature: float | None = None, **options: Any) -> AsyncIterator[LLMStreamChunk]:
        """Stream one response (see the module docstring for the guarantees and what is raised)."""
        body = self.build_body(messages, tools=tools, temperature=temperature, **options)
        decoder = SSEDecoder()  # reads runs of chunks in the learned frame whole (text_runs)
        state = _ChatStream(self.name, self.url, decoder)
        batches = stream_sse_batches(self._clients.get(), self.url, headers=self.headers(), body=body,
                                     provider=self.name, secrets=(self._api_key,), decoder=decoder, data_only=True,
                                     cancel=options.get("cancel"))
        feed = state.feed
        sink = options.get("text_sink")
        many = getattr(sink, "many", None)  # takes a run's texts in one call
        async with aclosing(batches):
            async for batch in batches:  # one async step per network read, not per event
                at, size = 0, len(batch)  # each event's data: this wire reads neither type nor id
                while at < size:
                    data = batch[at]
                    if type(data) is list:  # a run of chunks in the learned frame: their texts
                        at += 1
                        state.hits += len(data)
                        if "" in data:
                            data = [text for text in data if text]
                            if not data:
                                continue
                        if many is not None:
                            many(data)
                        elif sink is not None:
                            for text in data:
                                sink(text)
                        else:
                            for text in data:
                                yield LLMStreamChunk(text, None)
                        continue
                    template = state.template
                    if template is not None:  # a run of chunks in the stream's frame, as data strings
                        if sink is not None:
                            end = template.read(batch, at, sink)
                        else:
                            texts: list[str] = []
                            end = template.read(batch, at, texts.append)
                            for text in texts:
                                yield LLMStreamChunk(text, None)
                        state.hits += end - at
                        at = end
                        if at == size:
                            break
                        data = batch[at]
                        if type(data) is list:
                            continue
                    at += 1
                    if data == "[DONE]":
                        state.done = True
                        break
                    out = feed(data)
                    if out is not None:
                        for chunk in out:
                            yield chunk
                if state.done:
                    await finish_body(batches)
                    break
        for chunk in state.end():
            yield chunk


class _ChatStream:
    """Assembles one chat/completions stream: content as it comes, tool calls per index."""

    __slots__ = ("calls", "current", "decoder", "done", "finish_reason", "hits", "learned", "loads", "provider",
                 "template", "url", "usage")

    def __init__(self, provider: str, url: str, decoder: SSEDecoder | None = None) -> None:
        self.decoder = decoder  # told each template learned (SSEDecoder.text_runs)
        self.provider = provider
        self.url = url
        self.calls: dict[tuple[Any, int], list[Any]] = {}  # (index, arrival) -> [id, name, [argument fragments]]
        self.current: dict[Any, tuple[Any, int]] = {}  # index -> the key of the call now streamed there
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.loads = json_loader()
        self.template: ChunkTemplate | None = None  # see openai_compat_template
        self.learned = 0  # templates tried
        self.hits = 0  # chunks the current template read

    def feed(self, data: str) -> list[LLMStreamChunk] | None:
        """The chunks one ``data`` field carries (None when it carries none)."""
        try:
            obj = self.loads(data)
        except ValueError:
            raise malformed_data_error(data, url=self.url, provider=self.provider) from None
        if type(obj) is not dict:
            raise malformed_data_error(data, url=self.url, provider=self.provider, reason="not a JSON object")
        get = obj.get
        if get("error"):  # some servers send "error": null in every chunk
            raise classify_error_body(obj, provider=self.provider)
        usage = get("usage")
        if not usage:
            groq = get("x_groq")
            usage = groq.get("usage") if groq else None
        if usage:
            self.usage = usage
        choices = get("choices")
        if not choices:
            return None
        out: list[LLMStreamChunk] | None = None
        for choice in choices:
            delta = choice.get("delta")
            if delta:
                # a refusal (OpenAI: structured outputs, safety) is the answer's text, as the
                # Responses wire's refusal deltas are; only read when a chunk has no content
                content = delta.get("content") or delta.get("refusal")
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if content or reasoning:
                    chunk = LLMStreamChunk(content or None, reasoning or None)
                    if out is None:
                        out = [chunk]
                    else:
                        out.append(chunk)
                fragments = delta.get("tool_calls")
                if fragments:
                    self._fragments(fragments)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if out is not None and (self.learned < LEARN_FREELY or self.hits >= RELEARN_AFTER):
            self._learn(data, obj)
        return out

    def _learn(self, data: str, obj: dict[str, Any]) -> None:
        """Learn the frame of a content chunk (a few tries per stream; more only while the
        frames learned keep paying: a server whose every chunk differs costs a few parses)."""
        self.learned += 1
        self.hits = 0
        template = learn(data, obj, self.loads)
        if template is not None:
            self.template = template
            if self.decoder is not None:
                self.decoder.text_runs(template.head, template.tail)

    def _fragments(self, fragments: list[dict[str, Any]]) -> None:
        for position, frag in enumerate(fragments):
            index = frag.get("index")
            if index is None:  # Gemini's OpenAI-compatible endpoint sends none
                index = position
            fn = frag.get("function") or {}
            call_id, name = frag.get("id"), fn.get("name")
            key = self.current.get(index)
            acc = self.calls.get(key)
            if acc is None or (call_id and name and acc[1] and call_id != acc[0]):
                # A new call: the first at this index, or a call head (id and name) with another
                # id at an index in use: Ollama numbers parallel calls 0 each and Gemini's
                # endpoint gives none, each call whole in its own chunk. A continuation carries
                # no name (OpenAI sends id and name once), so it stays in its call even when a
                # server repeats the id or sends another one (Poolside).
                key = self.current[index] = (index, len(self.calls))
                acc = self.calls[key] = [None, None, []]
            if call_id and not acc[0]:
                acc[0] = call_id
            if name:
                acc[1] = name
            if fn.get("arguments"):
                acc[2].append(fn["arguments"])

    def end(self) -> list[LLMStreamChunk]:
        """The tool calls, whole, then the finish reason and usage; raises if the stream was cut."""
        if not self.done and self.finish_reason is None:
            raise stream_cut_error(url=self.url, provider=self.provider, expected="[DONE]")
        # in index order; calls at one index in the order they came
        calls = [LLMStreamChunk(tool_call=self._call(key[0], acc)) for key, acc in sorted(self.calls.items())]
        reason: FinishReason = "tool_calls" if calls else _FINISH.get(self.finish_reason or "stop", "stop")
        return [*calls, LLMStreamChunk(finish_reason=reason, usage=parse_usage(self.usage))]

    def _call(self, index: int, acc: list[Any]) -> ToolCall:
        call_id, name, fragments = acc
        if not name:
            raise LLMError(f"{self.provider}: tool call #{index} arrived without a function name",
                           kind="server", provider=self.provider, hint="retry the request")
        from ..models import (
            ToolCall,  # pydantic: loaded with the first call, not at import
        )

        return ToolCall(id=call_id or f"call_{index}", name=name,
                        arguments=parse_arguments("".join(fragments), name, self.provider))


def json_loader() -> Callable[[str], Any]:
    """A ``json.loads`` twin for stream data, faster on the hot path.

    pydantic_core's parser (pydantic is a run-time dependency; imported here, when a stream
    starts, not with this module) reads the common case about twice as fast; where it refuses
    text that ``json.loads`` accepts (lone surrogates in ``\\u`` escapes, nesting deeper than
    its limit) ``json.loads`` decides, so the value, and the ValueError for bad data, are
    exactly ``json.loads``'s.
    """
    try:
        from pydantic_core import from_json
    except ImportError:  # pragma: no cover - pydantic 2 always ships pydantic_core
        return json.loads

    def loads(text: str) -> Any:
        try:
            return from_json(text, cache_strings="keys")  # values rarely repeat: caching them costs
        except ValueError:
            return json.loads(text)

    return loads


def parse_arguments(text: str, name: str, provider: str) -> dict[str, Any]:
    """A tool call's assembled arguments as a dict ('' is {}).

    Text that is not a JSON object (the model's broken JSON) is kept as
    ``{"__raw_arguments__": text}`` (``tools.decode_arguments``): the call still reaches the
    router, which answers it with a failed result the model can read and correct, instead of
    the whole response failing. ``name`` and ``provider`` are kept for the callers' signature.
    """
    from ..tools import decode_arguments

    return decode_arguments(text)


def wire_tool_choice(choice: Any, provider: str, *, nested: bool, tool_names: Sequence[str]) -> Any:
    """An OpenAI-form tool_choice for the wire: chat/completions nests the name, Responses does not.

    ``tool_names``: the request's tools. None when there is none to send (none given; auto or
    none without tools). Raises ProviderConfigError for a choice that is not auto | required |
    none | a named function, for required or a named function without tools, and for a named
    function not among the tools (:func:`.transcript.tool_choice_to_send`).
    """
    from .transcript import tool_choice_to_send

    to_send = tool_choice_to_send(choice, tool_names=tool_names, provider=provider)
    if to_send is None:
        return None
    mode, name = to_send
    if name is None:
        return mode
    return {"type": "function", "function": {"name": name}} if nested else {"type": "function", "name": name}


def parse_usage(usage: dict[str, Any] | None) -> LLMUsage | None:
    """chat/completions usage as LLMUsage (prompt_tokens already includes the cached ones)."""
    if not usage:
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or 0
    return LLMUsage(prompt_tokens=prompt, completion_tokens=completion,
                    total_tokens=int(usage.get("total_tokens") or prompt + completion),
                    cached_prompt_tokens=int(cached))


def to_wire_message(message: LLMMessage, provider: str) -> dict[str, Any]:
    """One LLMMessage in chat/completions form."""
    role = message.role
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "",
                "content": text_of(message.content, provider=provider)}
    if role == "assistant":
        # null only beside tool_calls (OpenAI's own form); without them the API refuses a null
        # content, and the loop keeps a reply that streamed nothing as ""
        text = text_of(message.content, provider=provider)
        out: dict[str, Any] = {"role": "assistant", "content": text or (None if message.tool_calls else "")}
        if message.tool_calls:
            # transcript reads ToolCall dicts and OpenAI's own form (and loads pydantic: not at import)
            from .transcript import assistant_tool_calls

            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                                 for c in assistant_tool_calls(message, provider=provider)]
        return out
    out = {"role": role, "content": _content(message.content, provider)}
    if message.name:
        out["name"] = message.name
    return out


def _content(content: Any, provider: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    parts = parse_parts(content, provider=provider)
    if not any(isinstance(p, ImagePart) for p in parts):
        return [{"type": "text", "text": p.text} for p in parts]  # type: ignore[union-attr]
    wire: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            image: dict[str, Any] = {"url": part.as_url()}
            if part.detail:
                image["detail"] = part.detail
            wire.append({"type": "image_url", "image_url": image})
        else:
            wire.append({"type": "text", "text": part.text})
    return wire
