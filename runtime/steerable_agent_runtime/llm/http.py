"""The HTTP plumbing every provider shares: settings checks, the client, one streaming POST.

- :func:`validate_base_url` / :func:`require_model`: a :class:`ProviderConfigError` with a
  hint at construction time, before anything is sent.
- :class:`ClientCache`: one ``httpx.AsyncClient`` per event loop (a client's pool is bound to
  the loop that opened its connections), with :data:`DEFAULT_TIMEOUT`; or the caller's own client.
- :func:`stream_sse` (:func:`stream_sse_batches`: the same, one list of events per network
  read): POST a JSON body and yield the response's SSE events. A non-2xx status
  raises :func:`~.classify.classify_http_error`'s error; a JSON body where a stream was
  expected raises its error event classified; every httpx failure (refused, timeout, dropped)
  raises ``LLMError(kind="transport")`` naming the URL. The API key never reaches a log line
  or a message (:func:`redact_headers`, ``secrets``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from typing import Any
from urllib.parse import urlsplit

import httpx

from .classify import (
    classify_error_body,
    classify_http_error,
    malformed_data_error,
    safe_url,
    transport_error,
)
from .cancel import CancelSignal, StreamCancelled
from .errors import LLMError, ProviderConfigError
from .sse import SSEDecoder, SSEMessage, aiter_sse_batches, aiter_sse_data_batches

log = logging.getLogger("steerable_agent_runtime.llm")

#: connect 10 s (an unreachable server fails fast), read 300 s between bytes (long reasoning
#: pauses), write 30 s, 10 s to get a pooled connection.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0)
#: no cap on open connections: one client serves every concurrent stream (the sidecar's), and
#: httpx's default cap of 100 made the 101st wait for a free one and fail after the pool
#: timeout while the others still streamed; idle keep-alive connections stay capped.
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=20)
USER_AGENT = "steerable-agent-runtime/0.1"
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie",
                            "proxy-authorization"})


def validate_base_url(base_url: Any, *, provider: str) -> str:
    """``base_url`` without a trailing slash; raises ProviderConfigError unless it is http(s) with a host."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ProviderConfigError(f"{provider}: a base URL is required (got {base_url!r})", provider=provider,
                                  hint="pass base_url='http://127.0.0.1:11434/v1' or the provider's https URL")
    text = base_url.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number or out of range
    except ValueError:  # an unclosed IPv6 bracket, a bad port: no URL httpx could send to
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderConfigError(f"{provider}: base URL {safe_url(text)!r} is not an http:// or https:// URL",
                                  provider=provider,
                                  hint="give the full URL with its scheme, e.g. https://api.openai.com/v1")
    return text.rstrip("/")


def require_model(model: Any, *, provider: str) -> str:
    """``model`` stripped; raises ProviderConfigError when it is missing or empty."""
    if not isinstance(model, str) or not model.strip():
        raise ProviderConfigError(f"{provider}: a model name is required (got {model!r})", provider=provider,
                                  hint="pass model='...' as the provider's API names it (e.g. gpt-4o-mini)")
    return model.strip()


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` safe to log: credentials replaced by ``[redacted]``."""
    return {k: ("[redacted]" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def make_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """:data:`DEFAULT_TIMEOUT`, or ``timeout`` (a number sets connect, write and pool; read stays 300 s)."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(connect=float(timeout), read=DEFAULT_TIMEOUT.read, write=float(timeout),
                         pool=float(timeout))


def make_client(timeout: float | httpx.Timeout | None = None) -> httpx.AsyncClient:
    """An AsyncClient with our timeouts and no cap on concurrent connections (:data:`LIMITS`);
    proxies and CA bundles come from the environment.

    The TLS context is built once per process (per ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    value) and shared: loading the CA bundle costs tens of milliseconds, which every new
    provider would otherwise pay before its first request.
    """
    return httpx.AsyncClient(timeout=make_timeout(timeout), headers={"user-agent": USER_AGENT}, verify=ssl_context(),
                             limits=LIMITS)


_SSL_CONTEXTS: dict[tuple[str | None, str | None], Any] = {}


def ssl_context() -> Any:
    """The shared ``ssl.SSLContext`` httpx would build by default (certifi, or the
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` the environment names), one per such setting."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _SSL_CONTEXTS.get(key)
    if context is None:
        context = _SSL_CONTEXTS[key] = httpx.create_ssl_context()
    return context


class ClientCache:
    """The caller's client, or one client of our own per running event loop."""

    def __init__(self, client: httpx.AsyncClient | None = None,
                 timeout: float | httpx.Timeout | None = None) -> None:
        self._given = client
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._loop: Any = None

    def get(self) -> httpx.AsyncClient:
        """The client to use on the current loop (created on first use)."""
        if self._given is not None:
            return self._given
        import asyncio  # a running loop means asyncio is loaded; importing it here is free

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = make_client(self._timeout)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close our own client (never the caller's)."""
        import asyncio

        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = None


def encode_json(body: Any) -> bytes:
    """Compact UTF-8 JSON (what the SDKs send)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def stream_sse(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Any,
    provider: str,
    secrets: Iterable[str | None] = (),
    decoder: SSEDecoder | None = None,
    cancel: CancelSignal | None = None,
) -> AsyncIterator[SSEMessage]:
    """POST ``body`` as JSON to ``url`` and yield the SSE events of the response.

    Raises LLMError: the classified HTTP error (non-2xx), the error a JSON body carries when
    the server answered without a stream, or ``transport`` for every httpx failure, the
    connect timeout included. It does not decide whether the stream ended properly: each
    provider knows its terminal event (:func:`~.classify.stream_cut_error`). With ``cancel``,
    setting it ends the stream at once with StreamCancelled (:mod:`.cancel`).
    """
    batches = stream_sse_batches(client, url, headers=headers, body=body, provider=provider, secrets=secrets,
                                 decoder=decoder, cancel=cancel)
    async with aclosing(batches):
        async for batch in batches:
            for message in batch:
                yield message


async def stream_sse_batches(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Any,
    provider: str,
    secrets: Iterable[str | None] = (),
    decoder: SSEDecoder | None = None,
    data_only: bool = False,
    cancel: CancelSignal | None = None,
) -> AsyncIterator[list[Any]]:
    """:func:`stream_sse`, one list of events per network read (never an empty one).

    Same requests, errors and guarantees; for a provider that wants one async step per read
    rather than per event (:func:`~.sse.aiter_sse_batches`). ``data_only``: lists of the
    events' data strings instead of :class:`~.sse.SSEMessage` objects (for a wire whose
    reader looks at nothing else, :func:`~.sse.aiter_sse_data_batches`). ``cancel``: see
    :mod:`.cancel` (StreamCancelled once it is set; the response closed).
    """
    secrets = tuple(secrets)
    sent = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    log.debug("%s: POST %s headers=%s", provider, safe_url(url), redact_headers(sent))
    if cancel is None:
        watch = None
    else:
        from asyncio import CancelledError  # a running loop means asyncio is loaded: free here

        watch = ReadWatch(cancel)  # armed from here to the first yield
    try:
        async with client.stream("POST", url, headers=sent, content=encode_json(body)) as response:
            if not 200 <= response.status_code < 300:
                raw = await response.aread()
                raise classify_http_error(response.status_code, raw, response.headers, provider=provider,
                                          url=url, secrets=secrets)
            ctype = response.headers.get("content-type", "")
            if "json" in ctype and "event-stream" not in ctype:
                raise _json_instead_of_stream(await response.aread(), url=url, provider=provider, secrets=secrets)
            batches = (aiter_sse_data_batches if data_only else aiter_sse_batches)(response, decoder)
            if watch is None:
                async for batch in batches:
                    yield batch
            else:  # the watch is armed while this waits on a read, never while a batch is out
                async with aclosing(batches):
                    async for batch in batches:
                        watch.reading = False
                        yield batch
                        if cancel._set:  # set while the batch was out: read no more
                            raise StreamCancelled("the stream was cancelled")
                        watch.reading = True
    except httpx.HTTPError as exc:
        if watch is not None and watch.withdraw():
            raise StreamCancelled("the stream was cancelled") from None
        raise transport_error(exc, url=url, provider=provider, secrets=secrets) from exc
    except BaseException as exc:
        if watch is not None and isinstance(exc, CancelledError) and watch.withdraw():
            raise StreamCancelled("the stream was cancelled") from None
        raise
    finally:
        if watch is not None:
            watch.close()


#: how long to wait, after a stream's terminal event, for the end of the response body
DRAIN_S = 1.0


async def finish_body(rest: AsyncIterator[Any], grace_s: float = DRAIN_S) -> None:
    """Read a response to its end after the terminal event (``[DONE]``, ``message_stop``,
    ``response.completed``), for at most ``grace_s`` seconds; ``rest`` is the stream's iterator.

    The end of the body normally arrives with the terminal event; reading it lets httpx put the
    connection back in its pool (the next round's request skips a TCP and TLS handshake)
    instead of closing it. What follows is ignored; a server that keeps the body open, or
    drops the connection now, only costs the connection. A cancel set now ends the wait.
    """
    import asyncio  # a running loop means asyncio is loaded: free here, not at module import

    try:
        async with asyncio.timeout(grace_s):
            async for _ in rest:
                pass
    except (TimeoutError, LLMError, StreamCancelled):
        pass


def _json_instead_of_stream(raw: bytes, *, url: str, provider: str, secrets: tuple[str | None, ...]) -> LLMError:
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, list) and body:  # an array of bodies (Gemini streams one without alt=sse)
        body = body[0]
    if isinstance(body, dict) and "error" in body:  # anything else is no error body: malformed below
        return classify_error_body(body, provider=provider, secrets=secrets)
    return malformed_data_error(text, url=url, provider=provider, secrets=secrets,
                                reason="a JSON body where an event stream was expected")


class ReadWatch:
    """Interrupts the task reading one stream when its CancelSignal is set (see :mod:`.cancel`).

    ``reading`` is True exactly while the stream's generator is between yields, that is while
    the task waits inside it on the network (or runs its code); the signal's callback cancels
    the task only then, and only from outside the task (its own code never sets the signal
    mid-read), so the CancelledError lands at that await and nowhere else. The generator turns
    it into StreamCancelled, the cancellation withdrawn (:meth:`withdraw`). The task is the one
    that started the stream (a stream is read by one task, as ``asyncio.timeout`` assumes):
    looking it up again per read would cost more than the rest of the watch. Construction
    raises StreamCancelled when the signal is already set (nothing is sent)."""

    __slots__ = ("current", "fired", "loop", "reading", "signal", "task")

    def __init__(self, signal: CancelSignal) -> None:
        import asyncio  # not at module import (the sidecar starts inside a desktop app)

        self.signal = signal
        self.loop = asyncio.get_running_loop()
        self.current = asyncio.current_task
        self.task = self.current()
        self.reading = True
        self.fired = False
        if not signal.watch(self):
            raise StreamCancelled("the stream was cancelled before its request was sent")

    def __call__(self) -> None:
        """The signal was set (on any thread): interrupt the read on the stream's own loop."""
        from asyncio import _get_running_loop

        if _get_running_loop() is self.loop:
            self._interrupt()
        else:
            try:
                self.loop.call_soon_threadsafe(self._interrupt)
            except RuntimeError:  # that loop is closed: the stream is long gone
                pass

    def _interrupt(self) -> None:
        task = self.task
        if self.reading and not self.fired and task is not None and task is not self.current():
            self.fired = True
            task.cancel("steerable: the stream's CancelSignal was set")

    def withdraw(self) -> bool:
        """After the read was interrupted (an exception on its way out): withdraw this watch's
        cancellation of the task. True when the stream was interrupted by the signal and by
        nothing else (the caller raises StreamCancelled); False when the signal did not fire,
        or someone else cancelled the task too (the CancelledError must go on)."""
        if not self.fired:
            return False
        self.fired = False  # withdrawn once
        task = self.task
        return task is None or task.uncancel() == 0

    def close(self) -> None:
        self.reading = False
        self.signal.unwatch(self)
