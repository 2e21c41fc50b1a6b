"""LLMError: every provider failure, classified into one of six kinds.

Kinds: ``transport`` (connection refused or reset, timeouts, 408, a stream cut before its
terminal event), ``rate_limit`` (429), ``context_overflow`` (400/413 whose body names a
context overflow, or such an error event inside a stream), ``auth`` (401/403),
``invalid_request`` (other 4xx, malformed data), ``server`` (5xx, overloaded).

An API key never appears in a message, a hint or ``body``.
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import SteerableError

LLMErrorKind = Literal["transport", "rate_limit", "context_overflow", "auth", "invalid_request", "server"]

RETRYABLE_KINDS: frozenset[str] = frozenset({"transport", "rate_limit", "server"})


class LLMError(SteerableError):
    """A provider request failed; ``kind`` says how, ``retryable`` whether trying again may help."""

    default_hint = "check the provider's base URL, model name and API key, then retry"

    def __init__(
        self,
        message: str,
        *,
        kind: LLMErrorKind,
        provider: str | None = None,
        status_code: int | None = None,
        retry_after_ms: int | None = None,
        body: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.kind: LLMErrorKind = kind
        self.provider = provider
        self.status_code = status_code
        self.retry_after_ms = retry_after_ms
        self.body = body
        self.extra.update({"kind": kind, "provider": provider, "status_code": status_code,
                           "retry_after_ms": retry_after_ms})

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (transport, rate_limit, server)."""
        return self.kind in RETRYABLE_KINDS


class ProviderConfigError(SteerableError):
    """A provider was built or called with settings it cannot use (no model, a non-http(s) base URL).

    Raised before any request is sent; nothing is changed.
    """

    default_hint = "pass the model name and an http:// or https:// base URL"

    def __init__(self, message: str, *, provider: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.provider = provider
        if provider is not None:
            self.extra["provider"] = provider


class ToolDefinitionError(ProviderConfigError):
    """A tool definition is not in OpenAI function form; ``tool`` names it (or its position)."""

    default_hint = 'give tools as {"type": "function", "function": {"name", "description", "parameters"}} (ToolRouter.describe())'

    def __init__(self, message: str, *, tool: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.tool = tool
        self.extra["tool"] = tool
