"""Which model URL a stream may reach and which environment variable it may read as its API key:
anything the caller names, or only what the operator configured.

The stdio sidecar takes any ``provider.baseUrl`` and ``provider.apiKeyEnv``: only its host app
(which started it, and owns its environment) can call it. Over HTTP any client can, and a
caller-chosen pair would make the server send a request to whatever it can reach (internal
services, a cloud metadata address: server-side request forgery) carrying the value of any of
the server's variables it names (``DATABASE_URL``, ``AWS_SECRET_ACCESS_KEY``) as the API key,
with the reply streamed back. So ``create_app`` takes a policy: each provider kind's official
URL and its own key variables (:data:`OFFICIAL_KEY_ENVS`), plus what the operator lists
(``provider_base_urls``, ``provider_key_envs``).

Guarantees:
- ``ProviderPolicy.only(base_urls, key_envs)`` checks the operator's lists up front
  (ConfigValueError naming ``provider_base_urls`` / ``provider_key_envs``).
- ``check(spec)`` allows a ``baseUrl`` that is absent or the kind's official URL (the one the
  provider uses when it is omitted), or one of ``base_urls`` for any kind; URLs compare with
  their scheme and host without case and without a trailing slash, nothing else normalised.
  It allows an ``apiKeyEnv`` that is absent, one of ``key_envs`` (with any allowed URL), or one
  of the kind's own variables with the kind's official URL only (so a vendor's key never goes
  to another server). The spec it returns names the configured URL (None for the official one),
  not the client's spelling of it.
- Anything else is RpcError -32007 (NOT_ALLOWED: one line, ``data.field`` ``provider.baseUrl``
  or ``provider.apiKeyEnv``, a hint naming the create_app parameter), the URL checked first.
  The refusal names neither the client's value nor anything the operator configured, and it is
  decided without reading the environment: a variable that is set and one that is not are
  refused alike. It comes before any variable is read and before any connection.
- A ``baseUrl`` that is no usable URL stays -32602 naming ``provider.baseUrl``, as on stdio.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigValueError
from ..transport.jsonrpc import NOT_ALLOWED, RpcError
from .params import ProviderSpec
from .providers import DEFAULT_BASE_URLS, check_fields

#: kind -> the variables that conventionally hold its vendor's key (the ones the vendors' SDKs
#: read): a client may name them with the kind's official URL and nowhere else
OFFICIAL_KEY_ENVS: dict[str, tuple[str, ...]] = {
    "openai_compat": ("OPENAI_API_KEY",),
    "openai_responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOCS = '(docs/sidecar.md, "agent.chat.stream over HTTP")'
BASE_URL_HINT = ("omit baseUrl to use the provider kind's official API; the server's operator allows other model "
                 "servers with create_app(storage, provider_base_urls=[\"http://model-server:8000/v1\"]) " + _DOCS)
KEY_ENV_HINT = ("omit apiKeyEnv for a keyless model server; the server's operator allows key variables with "
                "create_app(storage, provider_key_envs=[\"MODEL_SERVER_KEY\"]) " + _DOCS)


class ProviderPolicy:
    """The model URLs and key variables a stream's ``provider`` may name (see the module guarantees)."""

    def __init__(self, base_urls: dict[str, str], key_envs: frozenset[str]) -> None:
        self._base_urls = base_urls  # canonical URL -> the configured URL
        self._key_envs = key_envs

    @classmethod
    def only(cls, base_urls: Iterable[str] | None = (), key_envs: Iterable[str] | None = ()) -> ProviderPolicy:
        """The official URLs and variables, plus ``base_urls`` and ``key_envs`` (None: none).

        Raises ConfigValueError (parameter ``provider_base_urls``) for a str instead of a list
        or a URL no provider could use (not http(s), no host, a bad port, credentials in it,
        shown masked), and (``provider_key_envs``) for a str or a name that is not an
        environment variable's (letters, digits, ``_``; not starting with a digit)."""
        allowed: dict[str, str] = {}
        for url in _listed(base_urls, "provider_base_urls", '["http://model-server:8000/v1"]'):
            configured = _configured_url(url)
            allowed[_canonical(configured)] = configured
        names = set()
        for name in _listed(key_envs, "provider_key_envs", '["MODEL_SERVER_KEY"]'):
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise ConfigValueError(f"provider_key_envs: {name!r} is not an environment variable name",
                                       parameter="provider_key_envs",
                                       hint="list variable names: letters, digits and _, not starting with a digit")
            names.add(name)
        return cls(allowed, frozenset(names))

    def check(self, spec: ProviderSpec) -> ProviderSpec:
        """``spec`` with the URL to use; RpcError -32007 when its ``baseUrl`` or ``apiKeyEnv`` is
        not allowed, -32602 when its ``baseUrl`` is not a usable URL. Reads no environment."""
        official = True
        base_url = None
        if spec.base_url is not None:
            check_fields(spec, spec.base_url)  # a malformed URL: -32602, as on stdio
            canonical = _canonical(spec.base_url)
            if canonical != _canonical(DEFAULT_BASE_URLS[spec.kind]):
                base_url = self._base_urls.get(canonical)
                if base_url is None:
                    raise RpcError(NOT_ALLOWED, "provider.baseUrl is not allowed on this server: a client may use the "
                                   "provider kind's official URL or a model server the operator configured",
                                   hint=BASE_URL_HINT, data={"field": "provider.baseUrl"})
                official = False
        name = spec.api_key_env
        if name is not None and name not in self._key_envs and \
                not (official and name in OFFICIAL_KEY_ENVS.get(spec.kind, ())):
            raise RpcError(NOT_ALLOWED, "provider.apiKeyEnv is not allowed on this server: a client may name the "
                           f"provider kind's own key variable ({' or '.join(OFFICIAL_KEY_ENVS.get(spec.kind, ()))}) "
                           "with its official URL, or a variable the operator configured",
                           hint=KEY_ENV_HINT, data={"field": "provider.apiKeyEnv"})
        return spec.model_copy(update={"base_url": base_url})


def _listed(values: Iterable[str] | None, parameter: str, example: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise ConfigValueError(f"{parameter} must be a list, not one string", parameter=parameter,
                               hint=f"pass a list: {parameter}={example}")
    return list(values)


def _configured_url(url: object) -> str:
    """An operator's model URL as the providers would use it; ConfigValueError if they could not."""
    from ..llm.classify import safe_url
    from ..llm.errors import ProviderConfigError
    from ..llm.http import validate_base_url

    try:
        text = validate_base_url(url, provider="provider_base_urls")
    except ProviderConfigError as exc:
        raise ConfigValueError(exc.message, parameter="provider_base_urls", hint=exc.hint) from None
    if "@" in urlsplit(text).netloc:
        raise ConfigValueError(f"provider_base_urls: {safe_url(text)!r} carries credentials",
                               parameter="provider_base_urls", hint="list the URL without user:password@ and give the key with provider_key_envs")
    return text


def _canonical(url: str) -> str:
    """``url`` with its scheme and host in lower case and no trailing slash (the same server)."""
    parts = urlsplit(url.strip().rstrip("/"))
    return urlunsplit(parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()))
