"""AnthropicProvider: the Anthropic Messages API (``POST {base}/v1/messages``, streamed).

The request is built by :mod:`.anthropic_wire`, the stream read by :mod:`.anthropic_stream`.
Headers: ``x-api-key`` (the key, never logged or put in a message) and ``anthropic-version``.
Options besides the protocol's: ``thinking_budget`` (extended thinking with that many budget
tokens) and ``shape_body`` (below).

Thinking blocks: with thinking on, the API refuses a tool-use turn sent back without the
thinking blocks (and their signatures) it streamed. The provider keeps them for the turns it
returned (the last 1,024, in memory, keyed by the turn's first call id) and sends them back
before that turn's calls; a transcript from elsewhere is sent without them.

The seam for prompt-cache shaping: ``stream(..., shape_body=f)`` calls ``f(body)`` on the
finished wire body (a fresh dict each request) and sends what it returns;
:class:`~.cache_control.CacheControlProvider` stamps its breakpoints this way, because this
class says ``cache_breakpoints = True``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from .anthropic_stream import PROVIDER, AnthropicStreamParser
from .anthropic_wire import build_body
from .classify import classify_error_body, stream_cut_error
from .errors import ProviderConfigError
from .http import ClientCache, finish_body, require_model, stream_sse, validate_base_url
from .stream_json import decode_event
from .types import CompleteMixin, LLMStreamChunk

if TYPE_CHECKING:  # pydantic loads with the first message, not with this module
    from ..models import LLMMessage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
MAX_REMEMBERED = 1024

BodyShaper = Callable[[dict[str, Any]], dict[str, Any]]


class AnthropicProvider(CompleteMixin):
    """Claude models over the Messages API, streamed.

    Raises ProviderConfigError at construction for a missing model, a base URL that is not
    http(s), or a max_tokens below 1. ``stream`` raises LLMError for every failure (see
    :mod:`.llm.errors`), including a stream that ends before ``message_stop`` (transport).
    """

    name = PROVIDER
    cache_breakpoints = True

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str = DEFAULT_BASE_URL,
        max_tokens: int = 4096,
        *,
        api_version: str = API_VERSION,
        timeout: Any = None,
        client: Any = None,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self.model = require_model(model, provider=PROVIDER)
        self.base_url = validate_base_url(base_url, provider=PROVIDER)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ProviderConfigError(f"{PROVIDER}: max_tokens must be a positive integer (got {max_tokens!r})",
                                      provider=PROVIDER, hint="pass max_tokens=4096 or the model's output limit")
        self.max_tokens = max_tokens
        self.api_version = api_version
        self._api_key = api_key or None
        self._clients = ClientCache(client, timeout)
        self._extra_headers = dict(extra_headers or {})
        self._thinking: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> str:
        return self.base_url + "/v1/messages"

    def headers(self) -> dict[str, str]:
        """The request headers (with the key: never log them unredacted)."""
        out = {**self._extra_headers, "anthropic-version": self.api_version}
        if self._api_key:
            out["x-api-key"] = self._api_key
        return out

    def build_body(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The wire body ``stream`` would send (before ``shape_body``)."""
        return build_body(self.model, messages, max_tokens=options.get("max_tokens") or self.max_tokens,
                          tools=tools, temperature=temperature, tool_choice=options.get("tool_choice"),
                          thinking_budget=options.get("thinking_budget"), thinking=self._thinking)

    async def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> AsyncIterator[LLMStreamChunk]:
        """Stream one response; see :mod:`.anthropic_stream` for what the chunks guarantee."""
        body = self.build_body(messages, tools=tools, temperature=temperature, **options)
        shape: BodyShaper | None = options.get("shape_body")
        if shape is not None:
            body = shape(body)
        secrets = (self._api_key,)
        parser = AnthropicStreamParser(lambda data: classify_error_body(data, provider=PROVIDER, secrets=secrets))
        events = stream_sse(self._clients.get(), self.url, headers=self.headers(), body=body,
                            provider=PROVIDER, secrets=secrets, cancel=options.get("cancel"))
        async with aclosing(events):
            async for message in events:
                for chunk in parser.feed(decode_event(message.data, url=self.url, provider=PROVIDER, secrets=secrets)):
                    yield chunk
                if parser.done:
                    await finish_body(events)  # the connection goes back to the pool
                    break
        if not parser.done:
            raise stream_cut_error(url=self.url, provider=PROVIDER, expected="message_stop")
        self._remember(parser)

    def _remember(self, parser: AnthropicStreamParser) -> None:
        if parser.call_ids and parser.thinking_blocks:
            self._thinking[parser.call_ids[0]] = parser.thinking_blocks
            while len(self._thinking) > MAX_REMEMBERED:
                self._thinking.popitem(last=False)

    async def aclose(self) -> None:
        """Close the HTTP client this provider opened (a client passed in stays open)."""
        await self._clients.aclose()


__all__ = ["AnthropicProvider"]
