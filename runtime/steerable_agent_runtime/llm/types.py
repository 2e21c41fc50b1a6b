"""The provider contract: usage, stream chunks and the LLMProvider protocol.

Guarantees every provider gives (and tests hold them to):
- ``LLMUsage.prompt_tokens`` always includes cached and cache-creation tokens (Anthropic
  reports them apart; its adapter adds them), so pressure and hit rate mean the same for
  every provider.
- A ``LLMStreamChunk.tool_call`` is a whole :class:`ToolCall`: argument fragments are
  assembled per call index/block inside the adapter and each call is emitted once, complete.
- ``finish_reason`` is one of ``stop | length | tool_calls | content_filter``; ``tool_calls``
  whenever the response ended in tool calls, whatever the wire calls it. It and ``usage``
  arrive on the last chunk(s) of a stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:  # pydantic loads with the first message built, not with this module
    from ..models import LLMMessage, ToolCall

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
CacheRetention = Literal["short", "long", "none"]


@dataclass
class LLMUsage:
    """Token counts of one request. ``prompt_tokens`` includes cached and cache-creation tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_creation_tokens: int = 0

    def to_wire(self) -> dict[str, int]:
        """camelCase dict (events, sidecar notifications)."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "cachedPromptTokens": self.cached_prompt_tokens,
            "cacheCreationTokens": self.cache_creation_tokens,
        }

    def __add__(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_prompt_tokens + other.cached_prompt_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
        )


@dataclass(slots=True)
class LLMStreamChunk:
    """One piece of a streamed response; any subset of the fields may be set.

    Slotted: a provider makes one per streamed delta, and a slotted instance is cheaper to
    build (the relay's hot path makes tens of thousands a second)."""

    content_delta: str | None = None
    reasoning_delta: str | None = None
    tool_call: ToolCall | None = None
    finish_reason: FinishReason | None = None
    usage: LLMUsage | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class LLMProvider(Protocol):
    """A model behind a streaming API.

    ``stream`` yields chunks as they arrive and raises :class:`~.errors.LLMError` for every
    failure (HTTP status, transport, an error event inside the stream, a stream cut before
    its terminal event, malformed data). ``tools`` are OpenAI function-form definitions
    (``{"type": "function", "function": {name, description, parameters}}``, what
    ``ToolRouter.describe()`` returns). ``options``: ``max_tokens``, ``tool_choice`` (without
    tools: auto and none are not sent, required or a named function raise ProviderConfigError
    before any request), ``cache_retention`` (``short | long | none``), ``cancel`` (a :class:`~.cancel.CancelSignal`:
    once set, the stream ends promptly, also while the server is silent, raising
    :class:`~.cancel.StreamCancelled`); unknown options are ignored.
    """

    name: str
    model: str

    def stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> AsyncIterator[LLMStreamChunk]: ...

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> tuple[LLMMessage, LLMUsage]: ...


async def collect(chunks: AsyncIterator[LLMStreamChunk]) -> tuple[LLMMessage, LLMUsage, FinishReason | None]:
    """Drain a stream into one assistant message, its usage and its finish reason.

    Every provider's ``complete`` is this over its ``stream``.
    """
    from ..models import LLMMessage

    text: list[str] = []
    calls: list[ToolCall] = []
    usage = LLMUsage()
    finish: FinishReason | None = None
    async for chunk in chunks:
        if chunk.content_delta:
            text.append(chunk.content_delta)
        if chunk.tool_call is not None:
            calls.append(chunk.tool_call)
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.finish_reason is not None:
            finish = chunk.finish_reason
    message = LLMMessage(
        role="assistant",
        content="".join(text) if text or not calls else None,
        tool_calls=[c.to_wire() for c in calls] or None,
    )
    return message, usage, finish


class CompleteMixin:
    """``complete`` built on ``stream`` (mix into a provider class)."""

    async def complete(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Iterable[dict[str, Any]] | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> tuple[LLMMessage, LLMUsage]:
        message, usage, _ = await collect(
            self.stream(messages, tools=tools, temperature=temperature, **options)  # type: ignore[attr-defined]
        )
        return message, usage
