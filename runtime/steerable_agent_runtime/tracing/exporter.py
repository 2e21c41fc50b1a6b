"""A standard-library OTLP/HTTP JSON trace exporter (no opentelemetry-sdk; see the seed's
"Observability export decision").

Guarantees:
- One POST of the encoded request to the traces URL with exactly
  ``Content-Type: application/json`` (and ``Content-Encoding: gzip`` when compressing);
  configured headers cannot replace those two or ``Content-Length``.
- Retries only HTTP 429, 502, 503, 504 and connection failures (refused, reset, dropped
  mid-response, timed out: an attempt gets at most ``timeout`` seconds in all, however slowly
  the peer answers). The wait honours ``Retry-After`` (delta seconds or an HTTP
  date) when the server sends it, else exponential backoff with jitter. Every attempt and
  every wait fits inside ``deadline`` seconds; when the next wait would pass it, the
  exporter gives up with ExportError instead of sleeping.
- Any other status (other 4xx, 5xx, 3xx) raises ExportError at once, never retried.
- A 2xx with ``partialSuccess`` is returned as ``outcome="partial_success"`` with the
  rejected span count and message, and never retried (re-sending would duplicate the
  accepted spans).
- URL resolution (OTLP exporter spec): an explicit endpoint, else
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` used as-is, else ``OTEL_EXPORTER_OTLP_ENDPOINT``
  with ``/v1/traces`` appended, else ``http://localhost:4318/v1/traces``. An explicit endpoint is
  a base URL: ``/v1/traces`` is appended unless its path already ends with it. Appending extends
  the URL's path (``http://h:4318/otlp?tenant=a`` -> ``http://h:4318/otlp/v1/traces?tenant=a``). A URL with
  ``user:password@`` is refused (reports and errors print the URL; use headers).
- Headers: ``OTEL_EXPORTER_OTLP_HEADERS``, then ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, then
  explicit headers, later ones winning (``k=v,k2=v2``, values percent-decoded). A header HTTP
  cannot carry (a line break, a control character, non-Latin-1 text in its value; a name that
  is not a token) is a UsageError naming it, never printing its value.
  Compression: ``OTEL_EXPORTER_OTLP[_TRACES]_COMPRESSION`` (``gzip`` or ``none``) unless
  given explicitly. A malformed variable is a UsageError naming it.
"""

from __future__ import annotations

import gzip as gzip_module
import http.client
import io
import json
import os
import math
import random
import re
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict

from ..errors import ConfigValueError, ExportError, UsageError
from .otlp import count_spans, encode_request

RETRYABLE_STATUS = frozenset({429, 502, 503, 504})
DEFAULT_BASE_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"
_PROTECTED_HEADERS = frozenset({"content-type", "content-encoding", "content-length"})
_MAX_BODY = 64 * 1024
USER_AGENT = "steerable-agent-runtime-otlp-exporter"


class ExportResult(BaseModel):
    """What one successful (or partially successful) export did."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str
    outcome: Literal["success", "partial_success"]
    http_status: int
    attempts: int
    spans: int
    rejected_spans: int = 0
    message: str | None = None
    elapsed_seconds: float


# configuration --------------------------------------------------------------------------
def traces_url(endpoint: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The URL to POST traces to (see the module guarantees for the precedence).

    Raises UsageError when the chosen URL is not an http(s) URL with a host and a port in
    1-65535, or holds a space, a control or a non-ASCII character (a host must be given in
    its ASCII/punycode form), or credentials. An empty explicit endpoint is refused, not
    read as "none given".
    """
    env = os.environ if env is None else env
    if endpoint is not None:
        return _checked_url(endpoint, "--endpoint", append=True)
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return _checked_url(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return _append(_checked_url(env["OTEL_EXPORTER_OTLP_ENDPOINT"], "OTEL_EXPORTER_OTLP_ENDPOINT"))
    return _append(DEFAULT_BASE_ENDPOINT)


def _append(base: str) -> str:
    """``base`` with /v1/traces appended to its path (a query or fragment stays after it)."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + TRACES_PATH))


_URL_HINT = "pass the collector's OTLP/HTTP URL, e.g. http://localhost:4318"
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f-\U0010ffff]")
# Everything before the last "@" (after a "scheme://"): the userinfo of a URL, wherever a
# malformed URL puts it. Masking too much of a URL that is refused anyway costs nothing.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)?.*@", re.DOTALL)


def _shown(url: str) -> str:
    """``url`` as an error message may print it: escaped, any ``user:password@`` masked."""
    return ascii(_USERINFO.sub(lambda m: f"{m.group(1) or ''}***@", url))


def _checked_url(url: str, source: str, *, append: bool = False) -> str:
    """``url`` (with /v1/traces appended when ``append`` and it is not there) if it is a
    usable collector URL; else UsageError naming what is wrong (the URL shown escaped, its
    credentials masked: the URL was refused, but the error is printed and logged)."""
    shown = _shown(url)
    if not url.strip():
        raise UsageError(f"{source}: empty URL", hint=_URL_HINT)
    bad = _BAD_CHARS.search(url)
    if bad:
        what = "a space" if bad.group() == " " else "a control character" if ord(bad.group()) < 0xa0 else \
            "a non-ASCII character"
        raise UsageError(f"{source}: {shown} contains {what}",
                         hint="percent-encode the path; give a host name in its ASCII (punycode) form")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # an unclosed [IPv6 bracket, a port that is not a number or out of range
        # urllib quotes the bad port, which is a piece of the password when one holds a "/"
        detail = "" if "@" in url else f" ({exc})"
        raise UsageError(f"{source}: {shown} is not a valid URL{detail}", hint=_URL_HINT) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise UsageError(f"{source}: {shown} is not an http(s) URL", hint=_URL_HINT)
    if not parts.hostname:
        raise UsageError(f"{source}: {shown} has no host", hint=_URL_HINT)
    if port == 0:
        raise UsageError(f"{source}: {shown} has port 0 (no collector listens there)", hint=_URL_HINT)
    if parts.username is not None or parts.password is not None:
        # refused rather than used: the URL is printed in reports and errors
        raise UsageError(f"{source}: the URL carries credentials (user:password@)",
                         hint="put credentials in OTEL_EXPORTER_OTLP_HEADERS, e.g. authorization=Basic%20...")
    if append and not parts.path.rstrip("/").endswith(TRACES_PATH):
        return _append(url)
    return url


_HEADER_HINT = "use the form key1=value1,key2=value2 (percent-encode commas), e.g. authorization=Bearer%20TOKEN"
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110 field-name)
# What a field value may not hold (RFC 9110): control characters but HTAB (CR and LF would end
# the header) and, as http.client encodes values as Latin-1, anything beyond it.
_BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]|[^\x00-\xff]")


def parse_headers(text: str, *, source: str = "OTEL_EXPORTER_OTLP_HEADERS") -> dict[str, str]:
    """Parse ``key=value,key2=value2`` (values percent-decoded, blanks ignored).

    Raises UsageError naming ``source`` and the entry's position (never its text: a malformed
    entry may be a credential, e.g. ``Authorization: Bearer ...``) for an entry without ``=`` or
    with an empty key, and as ``check_headers`` does for a header HTTP cannot carry.
    """
    headers: dict[str, str] = {}
    for n, item in enumerate(text.split(","), start=1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"{source}: header entry {n} has no '=' (not key=value)", hint=_HEADER_HINT)
        if not key.strip():
            raise UsageError(f"{source}: header entry {n} has an empty key", hint=_HEADER_HINT)
        headers[unquote(key.strip())] = unquote(value.strip())
    return check_headers(headers, source=source)


def check_headers(headers: Mapping[str, str], *, source: str = "headers") -> dict[str, str]:
    """``headers`` as a dict if HTTP can carry each one; else UsageError naming ``source`` and
    the header, never its value (a credential, as often as not): a name that is not an HTTP
    token, a value that is not a str or holds a line break, another control character or a
    character beyond Latin-1. Checked up front: http.client's own refusal quotes the value."""
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise UsageError(f"{source}: {_shown_name(name)} is not a valid HTTP header name",
                             hint="header names are letters, digits and !#$%&'*+-.^_`|~")
        if not isinstance(value, str):
            raise UsageError(f"{source}: header {name!r}: the value is a {type(value).__name__}, not a str",
                             hint="pass header values as text")
        bad = _BAD_HEADER_VALUE.search(value)
        if bad:
            what = "a character beyond Latin-1" if ord(bad.group()) > 0xff else \
                "a line break" if bad.group() in "\r\n" else "a control character"
            raise UsageError(f"{source}: header {name!r}: the value holds {what}",
                             hint="strip the trailing newline a token read from a file keeps; "
                                  "HTTP header values are single-line Latin-1 text")
    return dict(headers)


def _shown_name(name: object) -> str:
    """A refused header name as a message may show it: its first word only, since a name that
    is no token may be a whole ``Authorization: Bearer ...`` line."""
    text = str(name)
    head = re.split(r"[\s:=]", text, maxsplit=1)[0][:40]
    return f"{head!r}..." if head != text else repr(head)


def configured_headers(explicit: Mapping[str, str] | None, env: Mapping[str, str]) -> dict[str, str]:
    """Env headers then explicit ones, later winning (case-insensitively); each layer checked
    (``check_headers``) and named in its error."""
    merged: dict[str, str] = {}
    layers = [parse_headers(env.get(name, ""), source=name)
              for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")]
    for layer in [*layers, check_headers(dict(explicit or {}))]:
        for key, value in layer.items():
            merged = {k: v for k, v in merged.items() if k.lower() != key.lower()}
            merged[key] = value
    return merged


def configured_gzip(explicit: bool | None, env: Mapping[str, str]) -> bool:
    """Whether to gzip: explicit choice, else the OTLP compression variables (default none)."""
    if explicit is not None:
        return explicit
    for name in ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"):
        value = env.get(name, "").strip().lower()
        if value:
            if value not in ("gzip", "none"):
                raise UsageError(f"{name}: unsupported compression {value!r}", hint="use gzip or none")
            return value == "gzip"
    return False


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta seconds or HTTP date), or None
    when absent or unreadable. A date in the past means 0."""
    if not value or not value.strip():
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # (isdigit alone takes "²", which float() refuses)
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now)


# the exporter ---------------------------------------------------------------------------
class _Retryable(Exception):
    """One attempt failed in a way worth retrying; ``wait`` is the server's Retry-After."""

    def __init__(self, reason: str, wait: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.wait, self.status = reason, wait, status


class OtlpHttpExporter:
    """Sends ExportTraceServiceRequest dicts to an OTLP/HTTP JSON collector."""

    def __init__(self, endpoint: str | None = None, *, headers: Mapping[str, str] | None = None,
                 gzip: bool | None = None, timeout: float = 10.0, deadline: float = 30.0,
                 initial_backoff: float = 0.5, max_backoff: float = 8.0,
                 env: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random) -> None:
        env = os.environ if env is None else env
        self.url = traces_url(endpoint, env)
        self.headers = configured_headers(headers, env)
        self.gzip = configured_gzip(gzip, env)
        for name, value in (("timeout", timeout), ("deadline", deadline)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigValueError(f"{name} must be a finite number of seconds above 0, not {value!r}",
                                       parameter=name)
        self.timeout, self.deadline = timeout, deadline
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self._sleep, self._rng = sleep, rng

    def export(self, request: Mapping[str, Any]) -> ExportResult:
        """POST ``request`` with retries inside the deadline (see module guarantees).

        Returns the result of the accepted attempt; raises ExportError when the collector
        refuses it or the deadline passes.
        """
        body = self._body(request)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            remaining = self.deadline - (time.monotonic() - started)
            try:
                status, response = self._post(body, max(0.001, min(self.timeout, remaining)))
            except _Retryable as failure:
                self._wait_or_give_up(failure, attempt, started)
                continue
            return self._result(status, response, attempt, count_spans(request), started)

    def _body(self, request: Mapping[str, Any]) -> bytes:
        body = encode_request(request)
        return gzip_module.compress(body) if self.gzip else body

    def _request_headers(self, body: bytes) -> dict[str, str]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _PROTECTED_HEADERS}
        headers.setdefault("User-Agent", USER_AGENT)
        headers["Content-Type"] = "application/json"
        if self.gzip:
            headers["Content-Encoding"] = "gzip"
        headers["Content-Length"] = str(len(body))
        return headers

    def _post(self, body: bytes, timeout: float) -> tuple[int, bytes]:
        """One attempt: (status, body) for a final answer; raises _Retryable or ExportError.

        The attempt's reads end ``timeout`` seconds after it started, in all: a socket timeout
        bounds each read, and a peer sending a byte now and then would keep the attempt going
        past the deadline, so each read of the answer gets only what is left (_DeadlineReader).
        When the status line and headers came in time they are the answer, even if the body is
        cut off (a 2xx is then accepted and never re-sent)."""
        ends = time.monotonic() + timeout
        parts = urlsplit(self.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_type(parts.hostname, parts.port, timeout=timeout)
        conn.response_class = lambda sock, *args, **kwargs: http.client.HTTPResponse(  # type: ignore[method-assign]
            _DeadlineSocket(sock, ends), *args, **kwargs)
        try:
            conn.connect()
            conn.sock.settimeout(max(0.001, ends - time.monotonic()))  # the send gets what is left too
            conn.request("POST", path, body=body, headers=self._request_headers(body))
            response = conn.getresponse()
            try:
                payload = response.read(_MAX_BODY)
            except TimeoutError:
                payload = b""  # the status answered in time; only the body's detail is lost
        except ssl.SSLCertVerificationError as exc:
            raise ExportError(f"{self.url}: TLS certificate rejected: {exc}", endpoint=self.url) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _Retryable(f"connection failed: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        if response.status in RETRYABLE_STATUS:
            wait = parse_retry_after(response.getheader("Retry-After"), time.time())
            raise _Retryable(f"HTTP {response.status}{_describe(payload)}", wait, response.status)
        return response.status, payload

    def _wait_or_give_up(self, failure: _Retryable, attempt: int, started: float) -> None:
        wait = failure.wait if failure.wait is not None else self._backoff(attempt)
        elapsed = time.monotonic() - started
        if elapsed + wait > self.deadline:
            raise ExportError(
                f"{self.url}: gave up after {attempt} attempt(s) in {elapsed:.2f}s "
                f"(deadline {self.deadline:g}s, next wait {wait:.2f}s): {failure.reason}",
                hint="check that the collector is up and reachable; raise the deadline for a slow one",
                endpoint=self.url, http_status=failure.status, attempts=attempt)
        self._sleep(wait)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: a random wait in [d/2, d], d = initial * 2**(n-1)."""
        ceiling = min(self.max_backoff, self.initial_backoff * 2 ** (attempt - 1))
        return ceiling * (0.5 + 0.5 * self._rng())

    def _result(self, status: int, payload: bytes, attempts: int, spans: int, started: float) -> ExportResult:
        if not 200 <= status < 300:
            raise ExportError(f"{self.url}: collector refused the export: HTTP {status}{_describe(payload)}",
                              hint=_refusal_hint(status), endpoint=self.url, http_status=status,
                              attempts=attempts)
        rejected, message = _partial_success(payload)
        return ExportResult(endpoint=self.url, outcome="partial_success" if rejected else "success",
                            http_status=status, attempts=attempts, spans=spans, rejected_spans=rejected,
                            message=message, elapsed_seconds=round(time.monotonic() - started, 6))


class _DeadlineSocket:
    """What http.client's response reads from: the socket, each read given only the time left
    until ``ends`` (so the whole answer, not each read, is bounded)."""

    def __init__(self, sock: socket.socket, ends: float) -> None:
        self._sock, self._ends = sock, ends

    def makefile(self, mode: str) -> io.BufferedReader:
        # the socket's own raw file underneath: it keeps the socket open until the response is
        # closed, as http.client expects when it closes the connection of a 'Connection: close'
        return io.BufferedReader(_DeadlineReader(self._sock, self._sock.makefile("rb", buffering=0), self._ends))


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, raw: Any, ends: float) -> None:
        self._sock, self._raw, self._ends = sock, raw, ends

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out: no complete answer in the attempt's time")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


def _partial_success(payload: bytes) -> tuple[int, str | None]:
    """(rejected spans, message) from an ExportTraceServiceResponse JSON body; a body that
    is empty or not JSON means full success."""
    try:
        partial = json.loads(payload or b"{}").get("partialSuccess") or {}
        rejected = int(partial.get("rejectedSpans") or 0)
    except (ValueError, AttributeError, TypeError):
        return 0, None
    return rejected, (partial.get("errorMessage") or None)


def _describe(payload: bytes) -> str:
    """``: <message>`` from a google.rpc.Status JSON body (or the start of the text)."""
    text = payload.decode("utf-8", "replace").strip()
    try:
        message = json.loads(text).get("message")
    except (ValueError, AttributeError):
        message = None
    message = message or text[:200]
    return f": {message}" if message else ""


def _refusal_hint(status: int) -> str:
    if status in (401, 403):
        return "the collector needs credentials: set OTEL_EXPORTER_OTLP_HEADERS (e.g. authorization=...)"
    if status == 404:
        return "check the URL: OTLP/HTTP collectors take traces at <base>/v1/traces (port 4318)"
    if status == 415:
        return "the collector does not accept OTLP/HTTP JSON; enable the JSON encoding on its receiver"
    return "the collector rejected the data; its message above says why (not retried)"
