"""LLM providers: the protocol, the chunk and usage types, errors, retries, and four wire adapters.

The adapters import httpx and are loaded on first use (``from steerable_agent_runtime.llm
import AnthropicProvider`` imports only that module), so importing this package stays cheap.
"""

from __future__ import annotations

from ..lazy import lazy_exports
from .errors import RETRYABLE_KINDS, LLMError, LLMErrorKind, ProviderConfigError, ToolDefinitionError
from .retry import RetryPolicy
from .types import CacheRetention, FinishReason, LLMProvider, LLMStreamChunk, LLMUsage, collect

# Public name -> module that defines it, imported when first asked for.
_LAZY = {
    "ToolCall": "..models",
    "CancelSignal": ".cancel",
    "StreamCancelled": ".cancel",
    "classify_http_error": ".classify",
    "classify_error_body": ".classify",
    "transport_error": ".classify",
    "SSEDecoder": ".sse",
    "SSEMessage": ".sse",
    "OpenAICompatProvider": ".openai_compat",
    "OpenAIResponsesProvider": ".openai_responses",
    "AnthropicProvider": ".anthropic",
    "GoogleGenAIProvider": ".gemini",
    "CacheControlProvider": ".cache_control",
    "ScriptedProvider": ".scripted",
    "ScriptedResponse": ".scripted",
}

__all__ = [
    "CacheRetention", "FinishReason", "LLMError", "LLMErrorKind", "LLMProvider", "LLMStreamChunk", "LLMUsage",
    "ProviderConfigError", "RETRYABLE_KINDS", "RetryPolicy", "ToolDefinitionError", "collect", *sorted(_LAZY),
]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
