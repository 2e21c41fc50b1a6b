"""Map provider failures to :class:`~.errors.LLMError` kinds (one place for every provider).

- :func:`classify_http_error`: an HTTP status + body + headers. 400/413 whose body names a
  context overflow -> ``context_overflow``; 401/403 ``auth``; 429 ``rate_limit`` (Retry-After
  in seconds or as an HTTP date, or ``retry-after-ms``); 408 ``transport``; 5xx ``server``;
  any other status ``invalid_request``.
- :func:`classify_error_body`: an error event inside a 200 stream, classified the same way
  (its numeric code when it has one, else its type/code/status words).
- :func:`transport_error` / :func:`stream_cut_error` / :func:`malformed_data_error`: httpx
  exceptions, a stream that ended before its terminal event, a data line that is not JSON.

Messages name the URL (userinfo and key-like query parameters removed) and never a secret:
every function takes ``secrets`` (the API key) and blanks each occurrence in the message and
the kept ``body``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .errors import LLMError, LLMErrorKind

# Every wording RUNTIME.md lists, plus the OpenAI/Anthropic/Gemini/vLLM/Ollama variants seen in the wild:
# "context limit" is Anthropic's 400 when the prompt plus max_tokens passes the window ("input length
# and `max_tokens` exceed context limit: ..."), "context size" llama.cpp's server ("the request exceeds
# the available context size"); both are overflows that a compaction fixes.
OVERFLOW_PHRASES: tuple[str, ...] = (
    "context length", "context window", "maximum context", "prompt is too long", "too many tokens",
    "exceeds the maximum allowed input length", "input token count", "request too large",
    "reduce the length", "range of input length", "context_length_exceeded", "maximum prompt length",
    "exceeds the context", "input is too long", "prompt too long", "context limit", "context size",
)

MAX_BODY_CHARS = 4_000
_KEY_PARAMS = frozenset({"key", "api_key", "api-key", "apikey", "access_token", "token", "sig", "signature"})
_HINTS: dict[str, str] = {
    "context_overflow": "the request is larger than the model's context window: compact the transcript or drop old tool output",
    "auth": "check the API key (the environment variable the provider reads) and that it may use this model",
    "rate_limit": "slow down or wait for the Retry-After delay; RetryPolicy retries this kind",
    "transport": "check that the base URL is reachable (server running, network, proxy settings); retried automatically",
    "server": "the provider failed on its side; retried automatically, or try again later",
    "invalid_request": "check the model name, the options and the tool definitions sent",
}


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every non-trivial secret replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, "[redacted]")
    return text


def safe_url(url: Any) -> str:
    """The URL without userinfo and with key-like query parameters blanked (one that does not
    parse, such as an unclosed IPv6 bracket or a bad port: cut at its query, userinfo dropped)."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        head = str(url).split("?", 1)[0].split("#", 1)[0]
        scheme, sep, rest = head.partition("//") if "//" in head else ("", "", head)
        netloc, slash, path = rest.partition("/")
        return scheme + sep + netloc.rpartition("@")[2] + slash + path
    netloc = parts.hostname or ""
    if port is not None:
        netloc = f"{netloc}:{port}"
    query = urlencode([(k, "[redacted]" if k.lower() in _KEY_PARAMS else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="[]:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def retry_after_ms(headers: Mapping[str, str] | None, *, now: float | None = None) -> int | None:
    """Milliseconds a server asked us to wait: ``retry-after-ms``, then ``Retry-After``.

    ``Retry-After`` is either delta-seconds (may be fractional) or an HTTP date; a date in the
    past is 0. None when absent or unreadable (a value that is not a finite number included).
    """
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0, int(float(raw_ms)))
        except (ValueError, OverflowError):  # OverflowError: float() reads "inf", int() refuses it
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        return max(0, int(float(raw) * 1000))
    except OverflowError:  # "inf", "1e400": a number, but no wait anyone can honour
        return None
    except ValueError:
        pass
    import email.utils  # only for the HTTP-date form

    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0, int((when.timestamp() - (time.time() if now is None else now)) * 1000))


def one_line(text: str, limit: int = 400) -> str:
    """``text`` with its whitespace runs collapsed to one space, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def names_overflow(text: str) -> bool:
    """Whether ``text`` (an error body or message) says the context was exceeded."""
    low = text.lower()
    return any(phrase in low for phrase in OVERFLOW_PHRASES)


def kind_for_status(status: int, text: str) -> LLMErrorKind:
    """The kind an HTTP status (with its body text) maps to."""
    if status in (400, 413) and names_overflow(text):
        return "context_overflow"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "transport"
    if status >= 500:
        return "server"
    return "invalid_request"


def error_message(body: Any) -> str:
    """The human message inside a provider error body (OpenAI, Anthropic, Gemini shapes)."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return " ".join(body.split())[:500]
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for key in ("message", "msg", "detail"):
                if isinstance(inner.get(key), str):
                    return inner[key]
            return json.dumps(inner)[:500]
        if isinstance(inner, str):
            return inner
    return str(body)[:500]


def classify_http_error(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    provider: str | None = None,
    url: Any = None,
    secrets: Iterable[str | None] = (),
) -> LLMError:
    """The :class:`LLMError` for a non-2xx response (returned, not raised)."""
    secrets = tuple(secrets)
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else (
        body if isinstance(body, str) else json.dumps(body))
    text = redact(text, secrets)
    kind = kind_for_status(status, text)
    where = f" from {safe_url(url)}" if url is not None else ""
    detail = one_line(redact(error_message(text), secrets))
    message = f"{provider or 'provider'}: HTTP {status} ({kind}){where}: {detail}"
    return LLMError(message, kind=kind, provider=provider, status_code=status,
                    retry_after_ms=retry_after_ms(headers) if kind in ("rate_limit", "server", "transport") else None,
                    body=text[:MAX_BODY_CHARS], hint=_HINTS[kind])


def _kind_for_words(words: str) -> LLMErrorKind:
    low = words.lower()
    if names_overflow(low):
        return "context_overflow"
    if "rate_limit" in low or "rate limit" in low or "resource_exhausted" in low or "quota" in low:
        return "rate_limit"
    if any(w in low for w in ("authentication", "permission", "unauthenticated", "invalid_api_key", "unauthorized")):
        return "auth"
    if any(w in low for w in ("invalid_request", "invalid_argument", "invalid_prompt", "not_found", "bad_request")):
        return "invalid_request"
    if "timeout" in low or "deadline_exceeded" in low:
        return "transport"
    return "server"


def classify_error_body(
    body: Any,
    *,
    provider: str | None = None,
    status_code: int | None = None,
    secrets: Iterable[str | None] = (),
) -> LLMError:
    """The :class:`LLMError` for an error event inside a 200 stream.

    A numeric HTTP-like code in the body (Gemini's ``error.code``) or ``status_code`` is
    classified like :func:`classify_http_error`; otherwise the error's type/code/status/message
    words decide (overload, ``server_error``, ``api_error`` and anything unrecognised are
    ``server``: the provider failed mid-answer).
    """
    secrets = tuple(secrets)
    text = redact(body if isinstance(body, str) else json.dumps(body), secrets)
    detail = one_line(redact(error_message(text), secrets))
    inner: Any = body.get("error", body) if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    numeric = status_code if status_code is not None else (code if isinstance(code, int) and 100 <= code < 600 else None)
    if numeric is not None and numeric >= 400:
        kind = kind_for_status(numeric, text)
    else:
        kind = _kind_for_words(text)
    message = f"{provider or 'provider'}: error event in the stream ({kind}): {detail}"
    return LLMError(message, kind=kind, provider=provider, status_code=numeric, body=text[:MAX_BODY_CHARS],
                    hint=_HINTS[kind])


def transport_error(exc: BaseException, *, url: Any, provider: str | None = None,
                    secrets: Iterable[str | None] = ()) -> LLMError:
    """An ``LLMError(kind="transport")`` for an httpx exception, naming the URL, never the key."""
    name = type(exc).__name__
    if "ConnectTimeout" in name:
        what = "connect timed out"
    elif "Connect" in name:
        what = "cannot connect"
    elif "ReadTimeout" in name:
        what = "no data within the read timeout"
    elif "Timeout" in name:
        what = "timed out"
    elif "RemoteProtocol" in name or "ReadError" in name:
        what = "connection dropped mid-response"
    else:
        what = "transport failure"
    reason = redact(str(exc) or name, tuple(secrets))
    message = f"{provider or 'provider'}: {what} ({safe_url(url)}): {name}: {reason}"
    return LLMError(message, kind="transport", provider=provider, hint=_HINTS["transport"])


def stream_cut_error(*, url: Any, provider: str | None = None, expected: str = "its terminal event") -> LLMError:
    """The stream ended before ``expected``: a transport failure, never a short answer."""
    return LLMError(f"{provider or 'provider'}: the stream from {safe_url(url)} ended before {expected}",
                    kind="transport", provider=provider, hint=_HINTS["transport"])


def malformed_data_error(data: str, *, url: Any, provider: str | None = None, reason: str = "not JSON",
                         secrets: Iterable[str | None] = ()) -> LLMError:
    """A data line the adapter cannot read (``invalid_request``: the server broke the wire format)."""
    excerpt = redact(data[:120], tuple(secrets))
    return LLMError(f"{provider or 'provider'}: malformed stream data from {safe_url(url)} ({reason}): {excerpt!r}",
                    kind="invalid_request", provider=provider, body=redact(data[:MAX_BODY_CHARS], tuple(secrets)),
                    hint="the server does not speak this provider's wire format: check the base URL and provider kind")
