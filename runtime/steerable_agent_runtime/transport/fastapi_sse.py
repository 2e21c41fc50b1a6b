"""FastAPISseTransport and ``create_app``: the sidecar's methods as HTTP POST routes answering
with ``text/event-stream`` (extra ``[server]``; this is the only module importing fastapi).

Routes: ``POST /{method}`` (e.g. ``/agent.session.create``) with the params as the JSON body;
``POST /rpc.reply`` ``{id, result | error}`` answers a reverse request (``tool.invoke``,
``approval.request``) that a stream sent as an SSE event carrying ``id:``. Every response is
an event stream: ``event: result`` (or ``event: error`` with the JSON-RPC error object and an
HTTP status that matches it), and for ``agent.chat.stream`` then every ``stream.chunk`` /
``stream.error`` event and a last ``stream.done``.

Guarantees:
- Bounded: each response has a queue of ``queue_size`` events; when the client reads slowly
  the stream's producer waits for room (nothing is dropped, memory stays bounded).
- A ``: keep-alive`` comment goes out after every ``keepalive_s`` seconds without an event.
- A client that disconnects cancels its stream (CoreLoop.cancel: the record keeps the
  partial turn and a result for every call), also while the producer waits for room.
- No error names a server path: every error response, ``stream.error`` and ``stream.done``
  reason goes through server_paths.PathScrubber (the store becomes "the store"; the full
  message is logged on the server).
- No client chooses where the server connects or which of its environment variables it reads:
  ``trace.export`` and a stream's ``provider`` reach only what ``create_app`` allows
  (sidecar/export_policy.py, sidecar/provider_policy.py), else -32007 before anything happens.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from ..storage import StorageAdapter
from .base import SSEEvent
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_ALLOWED,
    NOT_FOUND,
    RpcError,
    parse_body,
)
from .server_paths import PathScrubber, store_hosts, store_locations

KEEPALIVE = b": keep-alive\n\n"
_CLOSE = object()
_HTTP_STATUS = {-32700: 400, -32600: 400, METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400, INTERNAL_ERROR: 500,
                NOT_FOUND: 404, -32002: 409, -32003: 409, -32004: 403, -32005: 502, NOT_ALLOWED: 403}


class Replies:
    """The reverse requests waiting for a ``POST /rpc.reply``, by id (one per app)."""

    def __init__(self) -> None:
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)

    def new(self) -> tuple[str, asyncio.Future[Any]]:
        rid = f"rv-{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        return rid, future

    def fail_pending(self) -> None:
        """Fail every reverse request still waiting (ConnectionError): nobody will answer it."""
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the server is shutting down"))

    def deliver(self, body: Any) -> bool:
        """Resolve the request ``body['id']`` answers; False when none is waiting."""
        if not isinstance(body, dict):
            return False
        future = self.pending.pop(str(body.get("id")), None)
        if future is None or future.done():
            return False
        error = body.get("error")
        if error is not None:
            err = error if isinstance(error, dict) else {"message": str(error)}
            future.set_exception(RpcError(int(err.get("code", -32000)) if isinstance(err.get("code"), int) else -32000,
                                          str(err.get("message", "error")), hint=(err.get("data") or {}).get("hint")
                                          if isinstance(err.get("data"), dict) else None))
        else:
            future.set_result(body.get("result"))
        return True


class FastAPISseTransport:
    """One SSE response: a bounded queue between the producer (``emit``) and the HTTP body."""

    def __init__(self, replies: Replies | None = None, *, queue_size: int = 64, keepalive_s: float = 15.0) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=queue_size)
        self._replies = replies or Replies()
        self.keepalive_s = keepalive_s
        self.closed = False
        self._incoming: asyncio.Queue[SSEEvent] = asyncio.Queue()
        self._room = asyncio.Event()
        """Set when the body took an event or the transport closed: a waiting ``emit`` looks again."""

    async def emit(self, event: SSEEvent) -> None:
        """Queue ``event``, waiting for room; a no-op once the client is gone (also for an
        emit already waiting: ``aclose`` releases it, nothing reads the queue any more)."""
        while not self.closed:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                self._room.clear()
                await self._room.wait()

    async def request(self, method: str, params: Any, *, timeout: float) -> Any:
        """A reverse request as an SSE event with ``id``; answered by ``POST /rpc.reply``."""
        rid, future = self._replies.new()
        try:
            await self.emit(SSEEvent(method, params, rid))
            return await asyncio.wait_for(future, timeout)
        finally:
            self._replies.pending.pop(rid, None)

    async def receive(self) -> AsyncIterator[SSEEvent]:
        """Events the host sent to this stream (its replies), until ``aclose``."""
        while not self.closed:
            yield await self._incoming.get()

    async def aclose(self) -> None:
        """End the body after what is queued; drop anything emitted later. Idempotent."""
        if not self.closed:
            self.closed = True
            self._room.set()
            while True:
                try:
                    self._queue.put_nowait(_CLOSE)
                    return
                except asyncio.QueueFull:
                    self._queue.get_nowait()  # the body is gone or will end: make room for the close

    async def finish(self) -> None:
        """End the body after everything queued so far (waiting for room, like ``emit``)."""
        if not self.closed:
            self.closed = True
            await self._queue.put(_CLOSE)

    async def body(self) -> AsyncIterator[bytes]:
        """The SSE bytes: each event as a frame, a keep-alive comment on every quiet interval."""
        while True:
            try:
                # Not asyncio.wait_for: on 3.11 it returns the item when the get completes as the
                # task is cancelled, swallowing the cancel of a client that disconnected while
                # the producer kept the queue full (the answer then drained into the void).
                async with asyncio.timeout(self.keepalive_s):
                    item = await self._queue.get()
            except TimeoutError:
                yield KEEPALIVE
                continue
            self._room.set()
            if item is _CLOSE:
                return
            yield item.encode_sse()


def _status(err: RpcError) -> int:
    return _HTTP_STATUS.get(err.code, 500)


def create_app(storage: StorageAdapter, *, keepalive_s: float = 15.0, queue_size: int = 64,
               grace_s: float = 10.0, export_endpoints: Iterable[str] | None = (),
               provider_base_urls: Iterable[str] | None = (), provider_key_envs: Iterable[str] | None = ()) -> FastAPI:
    """A FastAPI app serving the sidecar's methods over ``storage`` (see the module docstring).

    ``trace.export`` POSTs only to ``export_endpoints`` (collector URLs, e.g.
    ``["http://collector:4318"]``): any other endpoint, and every endpoint when none is given,
    is refused -32007 (HTTP 403) before a connection is made, since any HTTP client could
    otherwise make the server POST wherever it can reach (sidecar/export_policy.py). Raises
    ConfigValueError (``export_endpoints``) for a URL the exporter could not use.

    A stream's ``provider`` may name, besides each kind's official URL and its own key variable
    (``OPENAI_API_KEY``...), only the model server URLs in ``provider_base_urls`` and the
    environment variables in ``provider_key_envs``: anything else is refused -32007 (HTTP 403)
    before a variable is read or a connection made, since any HTTP client could otherwise make
    the server send any of its variables to a host of its choosing (sidecar/provider_policy.py).
    Raises ConfigValueError (``provider_base_urls`` / ``provider_key_envs``) for a URL no provider
    could use or a name that is no variable's.

    system.shutdown is not offered over HTTP (the server's process manager stops it). At its
    shutdown the app cancels the streams still running (the server cut their responses, e.g.
    uvicorn's graceful-shutdown timeout) and waits up to ``grace_s`` for each to write its
    partial turn, as the stdio sidecar does, then closes ``storage``.
    """
    from ..sidecar.app import MethodTable, SystemMethods
    from ..sidecar.export_policy import ExportEndpoints
    from ..sidecar.provider_policy import ProviderPolicy
    from ..sidecar.streams import StreamManager

    exports = ExportEndpoints.only(export_endpoints)
    providers = ProviderPolicy.only(provider_base_urls, provider_key_envs)
    scrubber = PathScrubber(store_locations(storage), store_hosts(storage))
    replies = Replies()
    streams = StreamManager(storage, notify=_no_sink, reverse=_no_reverse)
    table = MethodTable(storage, SystemMethods({"transport": "http-sse"}, asyncio.Event()), lambda: streams,
                        exports=exports, providers=providers)
    table.entries.pop("system.shutdown")

    async def shutdown() -> None:
        # The stream tasks outlive their responses: closing the store under them lost the turn.
        await streams.stop_all(grace_s, after_cancel=replies.fail_pending)
        await streams.aclose()
        await storage.close()

    app = FastAPI(title="steerable-agent-runtime", on_shutdown=[shutdown])
    app.state.streams = streams

    def one_event(event: SSEEvent, status: int = 200) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            yield event.encode_sse()
        return StreamingResponse(gen(), status_code=status, media_type="text/event-stream")

    def error_event(err: RpcError, method: str) -> StreamingResponse:
        return one_event(SSEEvent("error", scrubber.error(err.to_wire(), method)), _status(err))

    def scrubbed(emit: Any, method: str) -> Any:
        async def notify(event: SSEEvent) -> None:
            await emit(scrubber.event(event, method))
        return notify

    @app.post("/rpc.reply")
    async def reply(request: Request) -> StreamingResponse:
        body = await _json(request)
        if isinstance(body, RpcError):
            return error_event(body, "rpc.reply")
        return one_event(SSEEvent("result", {"delivered": replies.deliver(body)}))

    @app.post("/{method}")
    async def call(method: str, request: Request) -> StreamingResponse:
        params = await _json(request)
        try:
            if isinstance(params, RpcError):
                raise params
            handler, args = table.validate(method, params)
            if method != "agent.chat.stream":
                return one_event(SSEEvent("result", await table.run(method, handler, args)))
            transport = FastAPISseTransport(replies, queue_size=queue_size, keepalive_s=keepalive_s)
            started = await table.run(method, handler, args, notify=scrubbed(transport.emit, method),
                                      reverse=transport.request)
        except RpcError as err:
            return error_event(err, method)
        # No await since start() registered the stream: it is still running here.
        stream = streams.running[started["streamId"]]
        return StreamingResponse(_stream_body(stream, transport),
                                 media_type="text/event-stream", headers={"cache-control": "no-cache"})

    return app


async def _stream_body(stream: Any, transport: FastAPISseTransport) -> AsyncIterator[bytes]:
    yield SSEEvent("result", {"streamId": stream.stream_id}).encode_sse()
    closer = asyncio.create_task(_close_when_done(stream, transport))
    try:
        async for chunk in transport.body():
            yield chunk
    finally:
        closer.cancel()
        if not stream.done.is_set():
            stream.loop.cancel()  # the client went away: its stream winds down
            await transport.aclose()


async def _close_when_done(stream: Any, transport: FastAPISseTransport) -> None:
    await stream.done.wait()
    await transport.finish()  # queued after stream.done (FIFO): the body ends right after it


async def _json(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return {}
    return parse_body(raw)


async def _no_sink(event: SSEEvent) -> None:
    raise RuntimeError("a stream over HTTP has its own sink")


async def _no_reverse(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a stream over HTTP has its own reverse channel")
