"""GoogleGenAIProvider: Gemini's native API (``streamGenerateContent?alt=sse``).

``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` with ``x-goog-api-key``
(the key, never logged or put in a message). The request is built by :mod:`.gemini_wire`,
the stream read by :mod:`.gemini_stream`.

Thought signatures: Gemini 3 refuses a transcript whose function calls lost the signature it
sent with them. The provider keeps the signatures of the calls it returned (the last 4,096,
in memory) and sends each back with its call. For a Gemini 3 or later model (``gemini-<major>``
with major >= 3), a step of the current turn with no kept signature (a turn resumed from the
record in a new process, calls from another provider) gets Google's documented
``skip_thought_signature_validator`` on its first call; earlier turns are not validated and go
without, as every turn does for older models.

Options besides the protocol's: ``thinking_budget`` (``thinkingConfig`` with that budget and
thoughts streamed as reasoning).

A 429's ``google.rpc.RetryInfo.retryDelay`` counts as Retry-After when the header is absent.
An error Gemini writes outside the SSE framing (raw JSON lines ending a 200 stream) is
classified by its code like one inside it (:class:`~.gemini_stream.GeminiSSEDecoder`).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .classify import classify_error_body, stream_cut_error
from .errors import LLMError
from .gemini_stream import PROVIDER, GeminiSSEDecoder, GeminiStreamParser
from .gemini_wire import build_body
from .http import ClientCache, require_model, stream_sse, validate_base_url
from .stream_json import decode_event
from .types import CompleteMixin, LLMStreamChunk

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
MAX_SIGNATURES = 4096
_DELAY = re.compile(r"([0-9]+(?:\.[0-9]+)?)s")
_MAJOR = re.compile(r"gemini-([0-9]+)")


class GoogleGenAIProvider(CompleteMixin):
    """Gemini models over generateContent, streamed.

    Raises ProviderConfigError at construction for a missing model or a base URL that is not
    http(s). ``stream`` raises LLMError for every failure, including a stream that ends
    before any finish reason (transport).
    """

    name = PROVIDER
    cache_breakpoints = False

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_version: str = "v1beta",
        timeout: Any = None,
        client: Any = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        model = require_model(model, provider=PROVIDER)
        self.model = model.removeprefix("models/")
        self.base_url = validate_base_url(base_url, provider=PROVIDER)
        self.api_version = api_version
        self._api_key = api_key or None
        self._clients = ClientCache(client, timeout)
        self._extra_headers = dict(extra_headers or {})
        self._signatures: OrderedDict[str, str] = OrderedDict()
        major = _MAJOR.match(self.model)
        self.validates_signatures = major is not None and int(major.group(1)) >= 3

    def __repr__(self) -> str:
        return f"GoogleGenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        model = quote(self.model, safe="-._~")
        return f"{self.base_url}/{self.api_version}/models/{model}:streamGenerateContent?alt=sse"

    def headers(self) -> dict[str, str]:
        """The request headers (with the key: never log them unredacted)."""
        out = dict(self._extra_headers)
        if self._api_key:
            out["x-goog-api-key"] = self._api_key
        return out

    def build_body(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The wire body ``stream`` would send."""
        return build_body(messages, tools=tools, temperature=temperature, max_tokens=options.get("max_tokens"),
                          tool_choice=options.get("tool_choice"), signatures=self._signatures,
                          thinking_budget=options.get("thinking_budget"),
                          sign_current_turn=self.validates_signatures)

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> AsyncIterator[LLMStreamChunk]:
        """Stream one response; see :mod:`.gemini_stream` for what the chunks guarantee."""
        body = self.build_body(messages, tools=tools, temperature=temperature, **options)
        secrets = (self._api_key,)
        classify = lambda data: classify_error_body(data, provider=PROVIDER, secrets=secrets)  # noqa: E731
        parser = GeminiStreamParser(classify)
        decoder = GeminiSSEDecoder()  # also keeps an error written outside the SSE framing
        events = stream_sse(self._clients.get(), self.url, headers=self.headers(), body=body,
                            provider=PROVIDER, secrets=secrets, decoder=decoder, cancel=options.get("cancel"))
        try:
            try:
                async with aclosing(events):
                    async for message in events:
                        for chunk in parser.feed(decode_event(message.data, url=self.url, provider=PROVIDER,
                                                              secrets=secrets)):
                            yield chunk
            except LLMError as exc:
                # the connection may drop right after the error was written: the error says more
                outside = decoder.error_body() if exc.kind == "transport" else None
                if outside is None:
                    raise
                raise classify(outside) from exc
            outside = decoder.error_body()
            if outside is not None:  # checked before the finish reason: such a stream has none
                raise classify(outside)
        except LLMError as exc:
            _add_retry_info(exc)
            raise
        if not parser.finished:
            raise stream_cut_error(url=self.url, provider=PROVIDER, expected="a finish reason")
        self._remember(parser.signatures)
        for chunk in parser.final():
            yield chunk

    def _remember(self, signatures: dict[str, str]) -> None:
        self._signatures.update(signatures)
        while len(self._signatures) > MAX_SIGNATURES:
            self._signatures.popitem(last=False)

    async def aclose(self) -> None:
        """Close the HTTP client this provider opened (a client passed in stays open)."""
        await self._clients.aclose()


def _add_retry_info(error: LLMError) -> None:
    """Set retry_after_ms from a RetryInfo detail when the error has none of its own."""
    if error.kind != "rate_limit" or error.retry_after_ms is not None or not error.body:
        return
    try:
        details = (json.loads(error.body).get("error") or {}).get("details") or []
    except (ValueError, AttributeError):
        return
    for detail in details:
        match = _DELAY.fullmatch(str(detail.get("retryDelay", ""))) if isinstance(detail, dict) else None
        if match is not None:
            error.retry_after_ms = int(float(match.group(1)) * 1000)
            error.extra["retry_after_ms"] = error.retry_after_ms


__all__ = ["GoogleGenAIProvider"]
