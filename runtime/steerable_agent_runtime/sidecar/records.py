"""The store-backed methods: agent.session.*, agent.history.get, trace.fetch, trace.export.

Each handler takes its validated params and returns a JSON-ready result. Every write goes
through the StorageAdapter, so ``steerable-maint`` sees it while the sidecar runs. A missing
session or trace is -32001; creating a session over an existing one is -32602 (a retried create
of the same chat and user returns it unchanged); a record from a newer build is -32003 (RecordFormatError: the
record is not modified). trace.export posts only where ``exports`` allows (export_policy.py: anywhere
on stdio, the configured endpoints over HTTP); a refused endpoint is -32007 before the trace is read.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..models import AgentSession, utc_now
from ..storage import StorageAdapter
from ..transport.jsonrpc import INVALID_PARAMS, NOT_FOUND, RpcError
from . import params as p

if TYPE_CHECKING:
    from .export_policy import ExportEndpoints


EXPORTS_AT_ONCE = 4  # trace.export calls running together (each on a thread); more wait their turn


def not_found(what: str, key: str, value: str, hint: str) -> RpcError:
    return RpcError(NOT_FOUND, f"{what} {value!r} not found", hint=hint, data={key: value})


class RecordMethods:
    """Handlers for the methods that only read or write the store."""

    def __init__(self, storage: StorageAdapter, exports: ExportEndpoints | None = None) -> None:
        self.storage = storage
        self._exports = exports  # an ExportEndpoints; None: any endpoint (the stdio sidecar)
        self._export_slots = asyncio.Semaphore(EXPORTS_AT_ONCE)  # a burst waits here, not on a thread each

    async def session_create(self, args: p.SessionCreate) -> dict[str, Any]:
        """A new session. An existing ``sessionId`` is never overwritten: the same chat and user
        (a retried create) get the stored session back unchanged; anything else is -32602."""
        if args.session_id is not None:
            existing = await self.storage.get_session(args.session_id)
            if existing is not None:
                if (existing.chat_id, existing.user_id) == (args.chat_id, args.user_id):
                    return existing.to_wire()
                raise RpcError(INVALID_PARAMS, f"session {args.session_id!r} already exists (chat {existing.chat_id!r}, "
                               f"user {existing.user_id!r}); it was not changed",
                               hint="omit sessionId for a fresh one, or change it with agent.session.update",
                               data={"field": "sessionId", "sessionId": args.session_id})
        now = utc_now()
        session = AgentSession(
            session_id=args.session_id or uuid.uuid4().hex, user_id=args.user_id, chat_id=args.chat_id,
            current_stage=args.current_stage, next_stage=args.next_stage, scenario=args.scenario,
            stage_data=args.stage_data, project_id=args.project_id, is_active=True, created_at=now, updated_at=now)
        return (await self.storage.upsert_session(session)).to_wire()

    async def _session(self, session_id: str) -> AgentSession:
        session = await self.storage.get_session(session_id)
        if session is None:
            raise not_found("session", "sessionId", session_id, "create it with agent.session.create, or list them with agent.session.list")
        return session

    async def session_get(self, args: p.SessionRef) -> dict[str, Any]:
        return (await self._session(args.session_id)).to_wire()

    async def session_list(self, args: p.SessionList) -> dict[str, Any]:
        sessions = await self.storage.list_sessions(user_id=args.user_id, chat_id=args.chat_id, active_only=args.active_only)
        return {"sessions": [s.to_wire() for s in sessions]}

    async def session_update(self, args: p.SessionUpdate) -> dict[str, Any]:
        session = await self._session(args.session_id)
        changes = args.model_dump(exclude_unset=True, exclude={"session_id"})
        updated = session.model_copy(update={**changes, "updated_at": utc_now()})
        # validated by the wire names, so a refusal (currentStage null) names the host's field
        return (await self.storage.upsert_session(AgentSession.model_validate(updated.model_dump(by_alias=True)))).to_wire()

    async def session_end(self, args: p.SessionRef) -> dict[str, Any]:
        session = await self._session(args.session_id)
        ended = session.model_copy(update={"is_active": False, "updated_at": utc_now()})
        return (await self.storage.upsert_session(AgentSession.model_validate(ended.model_dump()))).to_wire()

    async def history_get(self, args: p.HistoryGet) -> dict[str, Any]:
        entries = await self.storage.list_history(args.record_id, after_seq=args.after_seq, limit=args.limit)
        last = entries[-1]["seq"] if entries else args.after_seq
        return {"recordId": args.record_id, "entries": entries, "lastSeq": last,
                "more": len(entries) == args.limit}

    async def _bundle(self, trace_id: str) -> Any:
        from ..tracing.otlp import TraceBundle

        trace = await self.storage.get_trace(trace_id)
        if trace is None:
            raise not_found("trace", "traceId", trace_id, "take the traceId from stream.done, or list traces with steerable-maint traces")
        return TraceBundle(trace=trace, spans=await self.storage.list_spans(trace_id),
                           events=await self.storage.list_events(trace_id))

    async def trace_fetch(self, args: p.TraceRef) -> dict[str, Any]:
        bundle = await self._bundle(args.trace_id)
        return {"trace": bundle.trace.to_wire(), "spans": [s.to_wire() for s in bundle.spans],
                "events": [e.to_wire() for e in bundle.events]}

    async def trace_export(self, args: p.TraceExport) -> dict[str, Any]:
        from ..tracing.exporter import OtlpHttpExporter
        from ..tracing.otlp import export_request

        # refused (-32007) before the trace is read and before any connection
        endpoint = args.endpoint if self._exports is None else self._exports.resolve(args.endpoint)
        bundle = await self._bundle(args.trace_id)
        exporter = OtlpHttpExporter(endpoint)  # a bad endpoint is a UsageError (-32602)
        async with self._export_slots:
            result = await _in_daemon_thread(exporter.export, export_request([bundle]))
        return result.model_dump(mode="json", by_alias=True)


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a daemon thread of its own. Not asyncio.to_thread: the interpreter
    joins the default executor's threads at exit, so a collector that never answers held a
    shutdown up for the exporter's whole deadline (30 s) after the request itself was given up."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the awaiting request was cancelled (a shutdown)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(*args), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the event loop is closed: nobody waits for the outcome
            pass

    threading.Thread(target=work, name="trace-export", daemon=True).start()
    return await future
