"""The sidecar's method table and its serve/shutdown life cycle over a JSON-RPC transport.

Guarantees:
- Every request gets exactly one response; notifications get none (an unknown one is logged).
- Requests run concurrently (each in its own task), so a stream, a steer and a reverse
  request's answer are all served while a stream runs.
- Shutdown (system.shutdown, SIGTERM, input EOF, a host that closed its end of stdout): running streams are cancelled and given
  ``grace_s`` to write their partial turn to the record, in-flight requests are given
  ``grace_s`` to finish (one still running then is cancelled and answered -32002), then the
  store is closed (the lease released). ``serve`` then returns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .. import __version__
from ..storage import StorageAdapter
from ..transport.base import SSEEvent
from ..transport.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, UNAVAILABLE, RpcError
from ..transport.stdio import StdioJsonRpcTransport

if TYPE_CHECKING:
    from .export_policy import ExportEndpoints
    from .provider_policy import ProviderPolicy

log = logging.getLogger("steerable.sidecar")

Handler = Callable[[Any], Awaitable[Any]]


# method -> (params model in .params, owner, handler attribute). Models, handlers and the
# stream machinery are imported on first use: a cold start builds none of them.
METHODS: dict[str, tuple[str, str, str]] = {
    "system.ping": ("NoParams", "system", "ping"),
    "system.shutdown": ("NoParams", "system", "shutdown"),
    "agent.session.create": ("SessionCreate", "records", "session_create"),
    "agent.session.get": ("SessionRef", "records", "session_get"),
    "agent.session.list": ("SessionList", "records", "session_list"),
    "agent.session.update": ("SessionUpdate", "records", "session_update"),
    "agent.session.end": ("SessionRef", "records", "session_end"),
    "agent.chat.stream": ("ChatStream", "streams", "start"),
    "agent.chat.cancel": ("StreamRef", "streams", "cancel"),
    "agent.chat.steer": ("ChatSteer", "streams", "steer"),
    "agent.chat.compact": ("StreamRef", "streams", "compact"),
    "agent.history.get": ("HistoryGet", "records", "history_get"),
    "trace.fetch": ("TraceRef", "records", "trace_fetch"),
    "trace.export": ("TraceExport", "records", "trace_export"),
}


class MethodTable:
    """Method name -> (params model, handler): validation and error mapping in one place."""

    def __init__(self, storage: StorageAdapter, system: SystemMethods, streams: Callable[[], Any], *,
                 exports: ExportEndpoints | None = None, providers: ProviderPolicy | None = None) -> None:
        """``exports``: the ExportEndpoints trace.export may POST to (sidecar/export_policy.py);
        ``providers``: the ProviderPolicy every ``provider`` param is checked against, before its
        method runs (sidecar/provider_policy.py). None: anything (the stdio sidecar: only its host
        app calls it)."""
        self.entries = dict(METHODS)
        self._storage = storage
        self._exports = exports
        self._providers = providers
        self._owners: dict[str, Any] = {"system": system}
        self._stream_factory = streams

    def _owner(self, name: str) -> Any:
        owner = self._owners.get(name)
        if owner is None:
            if name == "records":
                from .records import RecordMethods

                owner = RecordMethods(self._storage, self._exports)
            else:
                owner = self._stream_factory()
            self._owners[name] = owner
        return owner

    async def call(self, method: str, params: Any) -> Any:
        """Validate ``params`` and run ``method``; raises RpcError for every failure."""
        handler, args = self.validate(method, params)
        return await self.run(method, handler, args)

    def validate(self, method: str, params: Any) -> tuple[Handler, Any]:
        """The handler of ``method`` and its validated params (a ``provider`` param as the
        ProviderPolicy allows it); RpcError -32601 / -32602, -32007 for a provider not allowed."""
        entry = self.entries.get(method)
        if entry is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}",
                           hint="known methods: " + ", ".join(sorted(self.entries)), data={"method": method})
        from . import params as p
        from .rpc_errors import invalid_params

        model_name, owner, attr = entry
        model, handler = getattr(p, model_name), getattr(self._owner(owner), attr)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, f"invalid params for {method}: params must be an object",
                           hint="pass params by name, as a JSON object", data={"field": "params"})
        try:
            args = model.model_validate(params)
        except ValidationError as exc:
            raise invalid_params(exc, method) from None
        provider = getattr(args, "provider", None)
        if self._providers is not None and provider is not None:  # before any variable is read or connection made
            args = args.model_copy(update={"provider": self._providers.check(provider)})
        return handler, args

    @staticmethod
    async def run(method: str, handler: Handler, args: Any, **context: Any) -> Any:
        """Run ``handler(args, **context)``; every failure becomes an RpcError."""
        try:
            return await handler(args, **context)
        except Exception as exc:
            from .rpc_errors import to_rpc_error

            raise to_rpc_error(exc, method) from exc


class SystemMethods:
    """system.ping and system.shutdown."""

    def __init__(self, info: dict[str, Any], stop: asyncio.Event) -> None:
        self.info = info
        self.started = time.monotonic()
        self._stop = stop

    async def ping(self, _: Any) -> dict[str, Any]:
        return {"pong": True, **self.info, "uptimeMs": int((time.monotonic() - self.started) * 1000)}

    async def shutdown(self, _: Any) -> dict[str, Any]:
        asyncio.get_running_loop().call_soon(self._stop.set)
        return {"shuttingDown": True}


class Sidecar:
    """Serves the method table on a StdioJsonRpcTransport until shutdown."""

    def __init__(self, storage: StorageAdapter, transport: StdioJsonRpcTransport, *,
                 info: dict[str, Any] | None = None, grace_s: float = 10.0) -> None:
        self.storage = storage
        self.transport = transport
        self.grace_s = grace_s
        self.stop = asyncio.Event()
        self.info = {"version": __version__, "pid": os.getpid(), **(info or {})}
        self.streams: Any = None
        self.methods = MethodTable(storage, SystemMethods(self.info, self.stop), self._make_streams)
        self._tasks: set[asyncio.Task[None]] = set()
        transport.on_host_gone = self.stop.set  # nobody can read an answer any more: shut down

    def _make_streams(self) -> Any:
        from .streams import StreamManager

        self.streams = StreamManager(self.storage, notify=self.transport.emit, reverse=self.transport.request,
                                     text_writer=self.transport.text_chunk_writer)
        return self.streams

    async def serve(self) -> None:
        """Announce readiness, serve until a shutdown is asked for, then shut down."""
        await self.transport.emit(SSEEvent("lifecycle.ready", self.info))
        reader = asyncio.create_task(self._read())
        await self.stop.wait()
        await self._shutdown(reader)

    async def _read(self) -> None:
        try:
            async for event in self.transport.receive():
                if self.stop.is_set():
                    self._refuse(event)
                    continue
                task = asyncio.create_task(self._dispatch(event))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            log.info("protocol input ended: shutting down")
            self.stop.set()

    def _refuse(self, event: SSEEvent) -> None:
        if event.id is not None:
            self.transport.respond_error(event.id, RpcError(UNAVAILABLE, "the sidecar is shutting down",
                                                            hint="start a new sidecar"))

    async def _dispatch(self, event: SSEEvent) -> None:
        if event.id is None:
            await self._notification(event)
            return
        try:
            result = await self.methods.call(event.event, event.data)
        except RpcError as err:
            self.transport.respond_error(event.id, err)
            return
        except asyncio.CancelledError:  # the shutdown's grace ran out: still one answer
            self.transport.respond_error(event.id, RpcError(UNAVAILABLE, "the sidecar shut down before the request finished",
                                                            hint="start a new sidecar and send it again"))
            raise
        # No await between the handler's return and this write: a stream's first
        # notification can only follow its {streamId} response.
        self.transport.respond(event.id, result)

    async def _notification(self, event: SSEEvent) -> None:
        if event.event not in self.methods.entries:
            log.warning("ignored notification %r: no such method", event.event)
            return
        try:
            await self.methods.call(event.event, event.data)
        except RpcError as err:
            log.warning("notification %s failed: %s", event.event, err.message)

    async def _shutdown(self, reader: asyncio.Task[None]) -> None:
        if self.streams is not None:
            await self.streams.stop_all(self.grace_s, after_cancel=self.transport.fail_pending)
            await self.streams.aclose()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, late = await asyncio.wait(pending, timeout=self.grace_s)
            for task in late:
                task.cancel()
            if late:  # let each write its answer before the transport closes
                await asyncio.wait(late, timeout=1.0)
        await self.transport.aclose()
        reader.cancel()
        await self.storage.close()
        log.info("store closed; the sidecar exits")
