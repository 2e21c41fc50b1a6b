"""Building the provider a stream's params name, with the API key from the environment.

The key is read only from the environment variable ``apiKeyEnv`` names (never from a param,
which a host might log). Provider modules (and httpx) are imported here, when the first
stream needs them, not when the sidecar starts. Over HTTP the spec arrives checked by
provider_policy.py (only allowed URLs and variables); on stdio it is the host's as given.

Seams, each wired when its module is in the build:
- ``wrap_cache_control``: CacheControlProvider around every provider unless
  ``STEERABLE_CACHE_CONTROL=0``.
- ``compaction_hooks``: CompactionHooks when the params give ``maxContextTokens``.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

from ..transport.jsonrpc import INVALID_PARAMS, RpcError
from .params import ProviderSpec

log = logging.getLogger("steerable.sidecar")

_CLASSES = {
    "openai_compat": ("openai_compat", "OpenAICompatProvider", "https://api.openai.com/v1"),
    "openai_responses": ("openai_responses", "OpenAIResponsesProvider", "https://api.openai.com/v1"),
    "anthropic": ("anthropic", "AnthropicProvider", "https://api.anthropic.com"),
    "gemini": ("gemini", "GoogleGenAIProvider", "https://generativelanguage.googleapis.com"),
}
#: kind -> the vendor's official API URL, used when ``provider.baseUrl`` is omitted
DEFAULT_BASE_URLS = {kind: url for kind, (_, _, url) in _CLASSES.items()}


def _api_key(spec: ProviderSpec) -> str | None:
    if spec.api_key_env is None:
        return None
    value = os.environ.get(spec.api_key_env)
    if not value:
        raise RpcError(INVALID_PARAMS, f"provider.apiKeyEnv names {spec.api_key_env}, which is not set in the sidecar's environment",
                       hint=f"start the sidecar with {spec.api_key_env} set, or omit apiKeyEnv for a keyless local model",
                       data={"field": "provider.apiKeyEnv"})
    return value


def _provider_class(spec: ProviderSpec) -> tuple[Any, str]:
    module_name, class_name, default_url = _CLASSES[spec.kind]
    try:
        module = importlib.import_module(f"..llm.{module_name}", __package__)
    except ImportError:
        raise RpcError(INVALID_PARAMS, f"provider kind {spec.kind!r} is not available in this build",
                       hint="use a provider kind this build ships (openai_compat works with any chat/completions server)",
                       data={"field": "provider.kind"}) from None
    return getattr(module, class_name), default_url


def build_provider(spec: ProviderSpec, *, client: Any = None) -> Any:
    """The provider for ``spec`` on the httpx ``client`` (its own one when None), wrapped by
    CacheControlProvider (see the module seams).

    Raises RpcError -32602 naming ``provider.apiKeyEnv`` when that variable is unset,
    ``provider.kind`` when this build lacks that provider, ``provider.keepReasoning`` when
    it is given for a kind other than ``openai_responses``, ``provider.model`` or
    ``provider.baseUrl`` when the provider would refuse them.
    """
    if spec.keep_reasoning is not None and spec.kind != "openai_responses":
        raise RpcError(INVALID_PARAMS, f"provider.keepReasoning is an openai_responses setting; kind {spec.kind!r} "
                                       "has no reasoning items to keep",
                       hint="omit keepReasoning, or use kind openai_responses", data={"field": "provider.keepReasoning"})
    key = _api_key(spec)
    cls, default_url = _provider_class(spec)
    base_url = spec.base_url or default_url
    check_fields(spec, base_url)
    if spec.kind == "openai_compat":
        provider = cls(spec.model, base_url, api_key=key, client=client)
    elif spec.kind == "anthropic" and spec.max_tokens:
        provider = cls(spec.model, key, base_url=base_url, max_tokens=spec.max_tokens, client=client)
    elif spec.kind == "openai_responses":
        provider = cls(spec.model, key, base_url=base_url, client=client, keep_reasoning=spec.keep_reasoning)
    else:
        provider = cls(spec.model, key, base_url=base_url, client=client)
    return wrap_cache_control(provider)


def check_fields(spec: ProviderSpec, base_url: str) -> None:
    """The provider's own checks of the model name and base URL, run first so that what they
    refuse is -32602 naming the field (the constructor's ProviderConfigError names none)."""
    from ..llm.errors import ProviderConfigError
    from ..llm.http import require_model, validate_base_url

    for field, check, value in (("provider.model", require_model, spec.model),
                                ("provider.baseUrl", validate_base_url, base_url)):
        try:
            check(value, provider=spec.kind)
        except ProviderConfigError as exc:
            raise RpcError(INVALID_PARAMS, f"invalid params for agent.chat.stream: {field}: {exc.message}",
                           hint=exc.hint, data={"field": field}) from None


def wrap_cache_control(provider: Any) -> Any:
    """CacheControlProvider around ``provider`` unless STEERABLE_CACHE_CONTROL=0."""
    if os.environ.get("STEERABLE_CACHE_CONTROL") == "0":
        return provider
    try:
        from ..llm.cache_control import CacheControlProvider
    except ImportError:
        log.debug("CacheControlProvider is not in this build: the provider runs unwrapped")
        return provider
    return CacheControlProvider(provider)


def compaction_hooks(max_context_tokens: int | None) -> Any:
    """CompactionHooks(max_context_tokens), or None when not asked for.

    Raises RpcError -32602 naming ``maxContextTokens`` when this build has no compaction.
    """
    if max_context_tokens is None:
        return None
    try:
        from ..compaction import CompactionHooks
    except ImportError:
        raise RpcError(INVALID_PARAMS, "maxContextTokens needs compaction, which is not in this build",
                       hint="omit maxContextTokens", data={"field": "maxContextTokens"}) from None
    return CompactionHooks(max_context_tokens)
