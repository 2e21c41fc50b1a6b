"""SqlAlchemyStorage: the StorageAdapter on async SQLAlchemy 2.x, for servers (extra ``[sqlalchemy]``).

``SqlAlchemyStorage(url)`` takes ``postgresql+asyncpg://`` (``postgresql://`` means asyncpg),
``postgresql+psycopg://`` (psycopg 3 installed separately) or ``sqlite+aiosqlite:///PATH``
(``sqlite:///PATH`` means aiosqlite). Rows are SqliteStorage's: the entity's canonical JSON
in ``data``, its CRC-32 in ``crc``, the filter fields in indexed columns (storage/schema.py;
the PostgreSQL types in storage/pgschema.py), so rows move between stores byte for byte.
On SQLite the file is exactly a SqliteStorage store (same DDL, FTS5 index and header
markers), but no write lease is taken: SQLite's own locks serialise writers. The file is
checked as SqliteStorage checks it at open, and every pool connection is made under
``pinned.opening()`` to that same regular file or refused (storage/sqla_sqlite.py).

Guarantees:
- Opening: the constructor connects to nothing. The first call (or ``await open()``, or
  ``async with``) connects, checks the markers and, on an empty database, creates the schema
  in one transaction (``create=False`` refuses instead; ``await create_schema()`` creates
  explicitly, idempotently). A database whose tables belong to something else
  (NotAStoreError), a newer schema (SchemaTooNewError), an unreachable server or missing
  database (StoreConnectionError), wrong credentials (StoreAuthError): one error each,
  raised before anything is created or changed. The URL's password never appears in an
  error message (and SQLAlchemy is told to hide statement parameters).
- Every write is one transaction. Several processes may write one database: appends to a
  record take a per-record advisory lock (PostgreSQL) or the write lock (SQLite), so seq is
  contiguous from 1 and unique (the (record_id, seq) key is the safety net: a conflict is
  retried within the call and raised as HistorySeqConflictError only when the caller gave
  a seq that is no longer next). Upserts are single ``INSERT .. ON CONFLICT`` statements.
- Every read verifies each row's checksum (DataIntegrityError) and parses it (history:
  RecordFormatError, entities: RecordFormatError); nothing is skipped.
- Text no row can hold (a lone UTF-16 surrogate; on PostgreSQL also U+0000, which its text
  cannot hold) as a key, a filter or a record id: a read finds nothing, as for any missing key;
  a write is a UsageError and writes nothing. A search query is read as the index reads
  content: without U+0000.
- No raw driver error escapes a method: each becomes a SteerableError (storage/dberrors.py).
- asyncpg: a pooled connection the server closed while idle (a restart) is replaced at
  checkout, not handed to the next call.

The engine belongs to the event loop that made it: called from another loop (``asyncio.run``
per call), the store makes a new engine there and drops the old pool unclosed (its
connections belong to the dead loop).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

from ..errors import (
    DataIntegrityError,
    ExtraNotInstalledError,
    HistorySeqConflictError,
    NotAStoreError,
    RecordFormatError,
    SchemaTooNewError,
    StoreClosedError,
    StoreServerError,
    UsageError,
)

try:
    from sqlalchemy import bindparam, event, text
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError, DisconnectionError
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ExtraNotInstalledError(f"SqlAlchemyStorage needs SQLAlchemy: {exc}") from None

from ..history import read_entry_text
from ..history_append import prepare_append
from ..models import (
    AgentSession,
    ChatMessage,
    HarnessTrace,
    TraceEvent,
    TraceSpan,
    WireModel,
    has_lone_surrogate,
)
from . import pgschema
from .dberrors import translated
from .sqla_sqlite import SqliteFile
from .timebounds import time_bound
from .access import refuse_newer_schema
from .schema import (
    APPLICATION_ID,
    CHECKPOINT_WHERE,
    SCHEMA_VERSION,
    TABLES,
)
from .checksum import IDENTITY, current_checker, row_crc
from .upgrade import UpgradeProgress
from .search import (
    _DAMAGE_WORDS,
    _FTS_SQL,
    _LIKE_SQL,
    QUOTE_HINT,
    SEARCH_CANDIDATES,
    _first_chats,
    check_query,
    like_pattern,
)

M = TypeVar("M", bound=WireModel)
_log = logging.getLogger(__name__)
APPEND_ATTEMPTS = 20
HEAD_CACHE = 4096
_DRIVERS = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}
_ASYNC = {"postgresql+asyncpg", "postgresql+psycopg", "sqlite+aiosqlite"}


def parse_url(url: str | URL) -> URL:
    """The async URL for ``url`` (a plain ``postgresql://`` or ``sqlite://`` gets its async driver).

    Raises UsageError for a URL that does not parse or names another database or driver.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError("not a database URL (the password, if any, is not shown)",
                         hint="pass e.g. postgresql://user:password@host/db or sqlite:///path/to/sessions.db") from None
    drivername = _DRIVERS.get(parsed.drivername, parsed.drivername)
    if drivername not in _ASYNC:
        raise UsageError(f"{parsed.render_as_string(hide_password=True)}: SqlAlchemyStorage supports"
                         f" {', '.join(sorted(_ASYNC))}", hint="use one of those drivers in the URL")
    parsed = parsed.set(drivername=drivername)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise UsageError("sqlite URL without a file: SqlAlchemyStorage on SQLite needs a path",
                         hint="pass sqlite:///path/to/sessions.db (InMemoryStorage is the in-memory store)")
    return parsed


class SqlAlchemyStorage:
    """A StorageAdapter on a database server (PostgreSQL) or a SQLite file, through SQLAlchemy."""

    def __init__(self, url: str | URL, *, create: bool = True, pool_size: int = 5,
                 upgrade: bool = True, on_upgrade: UpgradeProgress | None = None) -> None:
        self.url = parse_url(url)
        self.upgrade = upgrade
        """Whether open() upgrades an older schema (False for read-only jobs: check)."""
        self.on_upgrade = on_upgrade
        """``on_upgrade(done, total)``: progress of an upgrade from an older schema on open."""
        self.upgraded_rows: int | None = None
        """Rows rewritten by the upgrade this open ran (None: the store was current)."""
        self.where = self.url.render_as_string(hide_password=True)
        self.backend = self.url.get_backend_name()
        self.create = create
        self.fts = self.backend == "postgresql"
        self._password = self.url.password if isinstance(self.url.password, str) else None
        self._pool_size = pool_size
        self._engine: AsyncEngine | None = None
        self._engine_loop: asyncio.AbstractEventLoop | None = None
        self._opened = False
        self._closed = False
        self._heads: OrderedDict[str, int] = OrderedDict()
        self._pos = "pos" if self.backend == "postgresql" else "rowid"
        self._data = "data" if self.backend == "postgresql" else "CAST(data AS BLOB)"
        self._blob = "convert_to(data, 'UTF8')" if self.backend == "postgresql" else "CAST(data AS BLOB)"
        self._file = SqliteFile(self.url.database or "") if self.backend == "sqlite" else None

    def __repr__(self) -> str:
        return f"SqlAlchemyStorage({self.where!r})"

    # engine ---------------------------------------------------------------------------
    def _make_engine(self) -> AsyncEngine:
        if self._file is not None:  # every connection to the file checked at open (storage/sqla_sqlite.py)
            engine = create_async_engine(self.url, pool_size=self._pool_size, max_overflow=self._pool_size,
                                         hide_parameters=True, async_creator=self._file.aiosqlite_connection)
            _sqlite_transactions(engine)
            return engine
        connect_args: dict[str, Any] = {}
        if self.url.drivername == "postgresql+asyncpg":
            connect_args = {"timeout": 10, "server_settings": {"application_name": "steerable"}}
        engine = create_async_engine(self.url, pool_size=self._pool_size, max_overflow=self._pool_size,
                                     hide_parameters=True, connect_args=connect_args)
        if self.url.drivername == "postgresql+asyncpg":
            _replace_closed_on_checkout(engine)
        return engine

    async def _engine_now(self) -> AsyncEngine:
        if self._closed:
            raise StoreClosedError(f"{self.where}: storage is closed", path=self.where,
                                   hint="open a new SqlAlchemyStorage")
        loop = asyncio.get_running_loop()
        if self._engine is None or self._engine_loop is not loop:
            if self._engine is not None:
                await self._drop_engine(self._engine)
            self._engine, self._engine_loop = self._make_engine(), loop
        return self._engine

    async def _drop_engine(self, engine: AsyncEngine) -> None:
        """Drop an engine made in another event loop. aiosqlite connections (a thread each)
        close from any loop; asyncpg's belong to their loop and are dropped unclosed."""
        if self.backend == "sqlite":
            try:
                await engine.dispose()
                return
            except Exception as exc:  # noqa: BLE001 - a connection that cannot close is dropped below
                _log.debug("dropping the pool of %s unclosed: %s", self.where, type(exc).__name__)
        engine.sync_engine.dispose(close=False)

    @asynccontextmanager
    async def _connect(self, *, write: bool = False, check: bool = True,
                       single: bool = False) -> AsyncIterator[AsyncConnection]:
        """One transaction (BEGIN IMMEDIATE on SQLite when ``write``), committed on success.

        ``single``: the block runs exactly one statement; on PostgreSQL it runs in autocommit
        (one statement is atomic by itself, and this saves the BEGIN and COMMIT round trips).
        """
        if check and not self._opened:
            await self.open()
        with translated(self.where, self._password):
            async with (await self._engine_now()).connect() as conn:
                if single and self.backend == "postgresql":
                    await conn.execution_options(isolation_level="AUTOCOMMIT")
                elif write:
                    await conn.execution_options(steerable_write=True)
                async with conn.begin():
                    yield conn

    # opening --------------------------------------------------------------------------
    async def open(self) -> Self:
        """Connect, check the markers and create the schema on an empty database; upgrade a
        store of an older schema in one transaction (unless ``upgrade=False``).

        Raises StoreConnectionError / StoreAuthError, NotAStoreError (tables of something
        else; no schema with ``create=False``), SchemaTooNewError; nothing is created then, and
        no connection is left open (the pool is closed; a later call opens a new one).
        """
        try:
            if self.backend == "sqlite":
                self._precheck_sqlite_file()
            state = await self._inspect()
            if state == "empty":
                if not self.create:
                    raise NotAStoreError(f"{self.where}: has no steerable schema", path=self.where,
                                         hint="call `await store.create_schema()` (or open with create=True)")
                await self.create_schema()
            elif self.upgrade:
                await self._upgrade()
            if self.backend == "sqlite":
                self.fts = await self._sqlite_has_fts()
        except BaseException:
            await self._close_pool()
            raise
        self._opened = True
        return self

    async def _close_pool(self) -> None:
        """Close the pooled connections after a failed open (a refused store keeps none: an
        aiosqlite connection is a thread, which outlived its event loop when left to the
        collector). Made in this event loop (``_engine_now``), so they close here."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        try:
            await asyncio.shield(engine.dispose())
        except BaseException as exc:  # noqa: BLE001 - the open's own error is what the caller gets
            _log.debug("closing the pool of %s after a failed open: %s", self.where, type(exc).__name__)

    async def _upgrade(self) -> None:
        """Upgrade an older schema in one transaction (storage/sqla_upgrade.py); sets
        ``upgraded_rows`` (None when the store was current)."""
        from .sqla_upgrade import upgrade_rows

        async with self._connect(write=True, check=False) as conn:
            self.upgraded_rows = await upgrade_rows(conn, backend=self.backend, blob=self._blob, where=self.where,
                                                    progress=self.on_upgrade)
            if self.backend == "postgresql":
                await _current_search_function(conn, self.where)

    def _precheck_sqlite_file(self) -> None:
        assert self._file is not None
        self._file.check(create=self.create)

    async def _inspect(self) -> str:
        """``ours`` or ``empty``; raises for a foreign or newer database."""
        async with self._connect(check=False) as conn:
            if self.backend == "sqlite":
                return await _inspect_sqlite(conn, self.where)
            return await _inspect_postgres(conn, self.where)

    async def create_schema(self) -> None:
        """Create every table and index of SCHEMA_VERSION and stamp the markers. Idempotent;
        one transaction. Raises like ``open`` for a foreign or newer database."""
        if self.backend == "sqlite":
            self._precheck_sqlite_file()  # a missing file is created whole by access.create_store
            return
        async with self._connect(write=True, check=False) as conn:
            await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": pgschema.CREATE_LOCK})
            if await _inspect_postgres(conn, self.where) == "ours":
                return
            for statement in pgschema.create_statements():
                await conn.exec_driver_sql(statement)
            for key, value in pgschema.MARKERS.items():
                await conn.execute(text(pgschema.STAMP_MARKERS), {"key": key, "value": value})

    async def _sqlite_has_fts(self) -> bool:
        async with self._connect(check=False) as conn:
            found = (await conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts'")).first()
            if found is None:
                return False
        try:
            async with self._connect(check=False) as conn:
                await conn.exec_driver_sql("SELECT 1 FROM messages_fts LIMIT 0")
        except StoreServerError:  # "no such module: fts5": this SQLite cannot read the index
            return False
        return True

    async def close(self) -> None:
        """Close the pool (connections made in another event loop are dropped). Idempotent."""
        engine, self._engine, self._closed = self._engine, None, True
        if engine is None:
            return
        try:
            same_loop = asyncio.get_running_loop() is self._engine_loop
        except RuntimeError:
            same_loop = False
        if same_loop:
            with translated(self.where, self._password):
                await engine.dispose()
        else:
            await self._drop_engine(engine)

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # entity helpers -------------------------------------------------------------------
    def _unholdable(self, values: Iterable[Any]) -> str | None:
        """What no stored row can hold in one of ``values`` (None: each one can). The driver
        refuses such a parameter (the sqlite3 module with a raw UnicodeEncodeError), but no row
        can match it either: a read has nothing to find."""
        for value in values:
            if type(value) is str:
                if self.backend == "postgresql" and "\x00" in value:
                    return "U+0000 (PostgreSQL text cannot hold it)"
                if has_lone_surrogate(value):
                    return "a lone UTF-16 surrogate (not a character)"
        return None

    def _refuse_unholdable(self, what: str, values: dict[str, Any]) -> None:
        for name, value in values.items():
            why = self._unholdable((value,))
            if why is not None:
                raise UsageError(f"{what}: {name} {value!r} holds {why}: no row can hold it; nothing was written",
                                 hint="pass ids as valid Unicode text"
                                 + (" without U+0000" if self.backend == "postgresql" else ""))

    async def _put(self, table: str, cols: dict[str, Any], data: str) -> None:
        self._refuse_unholdable(table, cols)
        async with self._connect(write=True, single=True) as conn:
            crc = row_crc(table, [cols[c] for c in IDENTITY[table]], data)
            await conn.execute(_upsert_sql(table, tuple(cols)), {**cols, "data": data, "crc": crc})

    async def _get(self, model: type[M], table: str, where: str, params: dict[str, Any], order: str = "",
                   limit: int | None = None) -> list[M]:
        key = self._pos if table == "messages" else TABLES[table].key[0]
        sql = f"SELECT {self._data}, crc, {key}, {', '.join(IDENTITY[table])} FROM {table} WHERE {where} {order}"
        if limit is not None:
            sql += f" LIMIT {_bounded(int(limit))}"
        if self._unholdable(params.values()):
            return []
        async with self._connect() as conn:
            rows = (await conn.execute(text(sql), params)).all()
        return [_parse(model, table, row) for row in rows]

    # sessions -------------------------------------------------------------------------
    async def upsert_session(self, session: AgentSession) -> AgentSession:
        data = session.to_json()
        await self._put("sessions", {"session_id": session.session_id, "user_id": session.user_id,
                                     "chat_id": session.chat_id, "is_active": int(session.is_active),
                                     "created_at": session.created_at, "updated_at": session.updated_at}, data)
        return AgentSession.model_validate_json(data)

    async def get_session(self, session_id: str) -> AgentSession | None:
        found = await self._get(AgentSession, "sessions", "session_id = :sid", {"sid": session_id})
        return found[0] if found else None

    async def list_sessions(
        self, *, user_id: str | None = None, chat_id: str | None = None, active_only: bool = False
    ) -> list[AgentSession]:
        terms, params = ["1 = 1"], {}
        for column, value in (("user_id", user_id), ("chat_id", chat_id)):
            if value is not None:
                terms.append(f"{column} = :{column}")
                params[column] = value
        if active_only:
            terms.append("is_active = 1")
        return await self._get(AgentSession, "sessions", " AND ".join(terms), params,
                               "ORDER BY created_at, session_id")

    # messages -------------------------------------------------------------------------
    async def append_message(self, message: ChatMessage) -> ChatMessage:
        data = message.to_json()
        await self._put("messages", {"id": message.id, "chat_id": message.chat_id,
                                     "created_at": message.created_at}, data)
        return ChatMessage.model_validate_json(data)

    async def list_messages(self, chat_id: str, *, limit: int | None = None) -> list[ChatMessage]:
        params = {"chat_id": chat_id}
        if limit is None:
            return await self._get(ChatMessage, "messages", "chat_id = :chat_id", params,
                                   f"ORDER BY created_at, {self._pos}")
        tail = await self._get(ChatMessage, "messages", "chat_id = :chat_id", params,
                               f"ORDER BY created_at DESC, {self._pos} DESC", max(limit, 0))
        return tail[::-1]

    # traces ---------------------------------------------------------------------------
    async def upsert_trace(self, trace: HarnessTrace) -> HarnessTrace:
        data = trace.to_json()
        await self._put("traces", {"trace_id": trace.trace_id, "session_id": trace.session_id,
                                   "chat_id": trace.chat_id, "user_id": trace.user_id,
                                   "started_at": trace.started_at}, data)
        return HarnessTrace.model_validate_json(data)

    async def get_trace(self, trace_id: str) -> HarnessTrace | None:
        found = await self._get(HarnessTrace, "traces", "trace_id = :tid", {"tid": trace_id})
        return found[0] if found else None

    async def list_traces(
        self, *, session_id: str | None = None, chat_id: str | None = None,
        since: str | None = None, until: str | None = None,
    ) -> list[HarnessTrace]:
        terms, params = ["1 = 1"], {}
        since, until = time_bound("since", since), time_bound("until", until)
        for clause, name, value in (("session_id = :sid", "sid", session_id), ("chat_id = :cid", "cid", chat_id),
                                    ("started_at >= :since", "since", since), ("started_at < :until", "until", until)):
            if value is not None:
                terms.append(clause)
                params[name] = value
        return await self._get(HarnessTrace, "traces", " AND ".join(terms), params, "ORDER BY started_at, trace_id")

    async def add_span(self, trace_id: str, span: TraceSpan) -> TraceSpan:
        data = span.to_json()
        await self._put("spans", {"span_id": span.span_id, "trace_id": trace_id, "parent_id": span.parent_id,
                                  "start_at": span.start_at}, data)
        return TraceSpan.model_validate_json(data)

    async def add_event(self, trace_id: str, event: TraceEvent) -> TraceEvent:
        data = event.to_json()
        await self._put("events", {"event_id": event.event_id, "trace_id": trace_id, "span_id": event.span_id,
                                   "at": event.at}, data)
        return TraceEvent.model_validate_json(data)

    async def list_spans(self, trace_id: str) -> list[TraceSpan]:
        return await self._get(TraceSpan, "spans", "trace_id = :tid", {"tid": trace_id}, "ORDER BY start_at, span_id")

    async def list_events(self, trace_id: str, *, span_id: str | None = None) -> list[TraceEvent]:
        where, params = "trace_id = :tid", {"tid": trace_id}
        if span_id is not None:
            where, params = where + " AND span_id = :sid", {**params, "sid": span_id}
        return await self._get(TraceEvent, "events", where, params, "ORDER BY at, event_id")

    # history --------------------------------------------------------------------------
    async def append_history(self, record_id: str, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        entries = list(entries)
        self._refuse_unholdable("history", {"record_id": record_id})
        if self.backend == "postgresql" and record_id in self._heads and not any("seq" in e for e in entries):
            done = await self._append_at_known_head(record_id, entries, self._heads[record_id])
            if done is not None:
                return done
        for attempt in range(APPEND_ATTEMPTS):
            try:
                return await self._append_locked(record_id, entries)
            except Exception as exc:
                if getattr(exc, "extra", {}).get("sqlstate") not in ("23505", "40001", "40P01"):
                    raise
                _log.debug("append to record %r met another writer (attempt %d); retrying", record_id, attempt + 1)
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise HistorySeqConflictError(f"record {record_id!r}: {APPEND_ATTEMPTS} attempts met another writer's"
                                      " entries; nothing of this call was written", record_id=record_id)

    def _note_head(self, record_id: str, head: int | None) -> None:
        """Remember the record's newest seq (a bounded LRU); None forgets it."""
        self._heads.pop(record_id, None)
        if head is not None:
            self._heads[record_id] = head
            if len(self._heads) > HEAD_CACHE:
                self._heads.popitem(last=False)

    async def _append_at_known_head(self, record_id: str, entries: list[dict[str, Any]],
                                    head: int) -> list[dict[str, Any]] | None:
        """The fast path (PostgreSQL): one guarded INSERT at the head this process last wrote,
        no lock and no head read. Returns None, having written nothing, when another writer
        moved the head (the guard matched no row, or the key was taken): take the locked path."""
        prepared = prepare_append(record_id, entries, head + 1)
        if not prepared:
            return []
        try:
            async with self._connect(write=True, single=True) as conn:
                result = await conn.execute(_INSERT_AT_HEAD, {**_arrays(record_id, prepared), "head": head})
                if result.rowcount != len(prepared):
                    raise _StaleHead
        except _StaleHead:
            self._note_head(record_id, None)
            return None
        except StoreServerError as exc:
            self._note_head(record_id, None)
            if exc.extra.get("sqlstate") in ("23505", "40001", "40P01"):
                return None
            raise
        self._note_head(record_id, prepared[-1].seq)
        return [p.wire for p in prepared]

    async def _append_locked(self, record_id: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Take the record's lock (PostgreSQL; SQLite: the write lock), read its head, insert."""
        self._note_head(record_id, None)
        async with self._connect(write=True) as conn:
            if self.backend == "postgresql":
                await conn.execute(_LOCK_RECORD, {"r": record_id})
            head = (await conn.execute(_HEAD, {"r": record_id})).scalar()
            prepared = prepare_append(record_id, entries, (head or 0) + 1)
            if prepared and self.backend == "postgresql":  # one statement for the whole batch
                await conn.execute(_INSERT_HISTORY_ARRAYS, _arrays(record_id, prepared))
            elif prepared:
                await conn.execute(_INSERT_HISTORY, [
                    {"r": record_id, "seq": p.seq, "v": p.v, "type": p.type, "at": p.at, "data": p.data,
                     "crc": row_crc("history", (record_id, p.seq), p.data)} for p in prepared])
        if self.backend == "postgresql":
            self._note_head(record_id, prepared[-1].seq if prepared else (head or 0))
        return [p.wire for p in prepared]

    async def list_history(
        self, record_id: str, *, after_seq: int | None = None, until_seq: int | None = None,
        limit: int | None = None, reverse: bool = False,
    ) -> list[dict[str, Any]]:
        sql = (f"SELECT {self._data}, crc, seq, record_id, seq FROM history WHERE record_id = :r AND seq > :a"
               " AND seq <= :u"
               f" ORDER BY seq {'DESC' if reverse else 'ASC'}")
        if limit is not None:
            sql += f" LIMIT {_bounded(max(int(limit), 0))}"
        params = {"r": record_id, "a": _bounded(after_seq or 0), "u": 2**62 if until_seq is None else _bounded(until_seq)}
        if self._unholdable((record_id,)):
            return []
        async with self._connect() as conn:
            rows = (await conn.execute(text(sql), params)).all()
        return [read_entry_text(_verified("history", row, record_id), record_id=record_id, seq=row[2])
                for row in rows]

    async def history_checkpoint(self, record_id: str) -> int | None:
        if self._unholdable((record_id,)):
            return None
        async with self._connect() as conn:
            return (await conn.execute(_CHECKPOINT, {"r": record_id})).scalar()

    # search ---------------------------------------------------------------------------
    async def search_sessions(self, query: str, *, limit: int = 20, order: str = "recent",
                              candidates: int = SEARCH_CANDIDATES) -> list[AgentSession]:
        """Sessions whose chat messages match ``query``, best-matching chat first.

        PostgreSQL: ``websearch_to_tsquery('simple', query)`` (words, "quoted phrases", -not,
        or) against the GIN index; ``order="recent"`` (the default) puts chats in order of
        their newest matching message, ``order="relevance"`` ranks the newest ``candidates``
        matching messages by ts_rank, chats in order of their best message. SQLite: exactly
        SqliteStorage's search (FTS5, or the escaped LIKE). At most ``limit`` chats; each
        chat's sessions in (created_at, session_id) order. Raises UsageError for an empty
        query, an unknown order, a query FTS5 rejects or one too large for PostgreSQL's
        websearch_to_tsquery (tens of thousands of words).
        """
        if self.backend == "postgresql":  # as steerable_message_text indexes content: without U+0000
            query = query.replace("\x00", "")
        check_query(query, order)
        if has_lone_surrogate(query):
            return []  # no stored message holds one
        if not self._opened:
            await self.open()
        chats = _first_chats(await self._matching_rows(query, order, candidates), limit)
        found: list[AgentSession] = []
        for chat_id in chats:
            found.extend(await self.list_sessions(chat_id=chat_id))
        return found

    async def _matching_rows(self, query: str, order: str, candidates: int) -> Sequence[Any]:
        if self.backend == "postgresql":
            try:
                async with self._connect() as conn:
                    return (await conn.execute(_SEARCH_PG[order], {"q": query, "n": candidates})).all()
            except StoreServerError as exc:
                if not str(exc.extra.get("sqlstate", "")).startswith("54"):  # program limit: stack depth, tsquery size
                    raise
                reason = exc.message.rsplit("refused a statement: ", 1)[-1]
                raise UsageError(f"search query too large for PostgreSQL's full-text search ({reason})",
                                 hint="search for fewer words") from None
        try:
            async with self._connect() as conn:
                if self.fts:
                    params = (query, candidates) if order == "relevance" else (query,)
                    return (await conn.exec_driver_sql(_FTS_SQL[order], params)).all()
                return (await conn.exec_driver_sql(_LIKE_SQL[order], (like_pattern(query),))).all()
        except StoreServerError as exc:  # damage and lost connections have their own classes
            reason = exc.message.rsplit("refused a statement: ", 1)[-1]
            if self.fts and not any(word in reason for word in _DAMAGE_WORDS):
                raise UsageError(f"search query rejected: {reason}", hint=QUOTE_HINT) from None
            raise


    # rows as stored, for maintenance (copy, check) ------------------------------------
    async def schema_version(self) -> int:
        """The schema version the store's markers declare."""
        async with self._connect() as conn:
            if self.backend == "sqlite":
                return int((await conn.exec_driver_sql("PRAGMA user_version")).scalar() or 0)
            markers = dict((await conn.execute(text(pgschema.READ_MARKERS))).all())
        return int(markers.get("schema_version", "0"))

    def _order(self, table: str) -> tuple[str, ...]:
        """The columns a table's rows are paged by: insertion order for messages, else the key."""
        return (self._pos,) if table == "messages" else TABLES[table].key

    async def read_rows(self, table: str, *, after: tuple[Any, ...] | None = None,
                        limit: int = 1000) -> tuple[list[tuple[Any, ...]], tuple[Any, ...] | None]:
        """Up to ``limit`` rows of ``table`` after the page mark ``after``, exactly as stored.

        Each row is in ``TABLES[table].all_columns`` order with ``data`` as its UTF-8 bytes;
        nothing is verified (the caller checks). Returns (rows, the next page mark or None
        at the end). Messages come in insertion order, other tables in key order.
        """
        order = self._order(table)
        cols = [*TABLES[table].all_columns[:-2], self._blob, "crc", *order]
        where = f"WHERE ({', '.join(order)}) > ({', '.join(f':a{i}' for i in range(len(order)))})" if after else ""
        sql = f"SELECT {', '.join(cols)} FROM {table} {where} ORDER BY {', '.join(order)} LIMIT {int(limit)}"
        params = {f"a{i}": value for i, value in enumerate(after or ())}
        async with self._connect() as conn:
            found = (await conn.execute(text(sql), params)).all()
        width = len(TABLES[table].all_columns)
        rows = [tuple(row[:width]) for row in found]
        return rows, (tuple(found[-1][width:]) if len(found) == limit else None)

    async def stored_rows(self, table: str, keys: Sequence[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[bytes, int]]:
        """(data bytes, crc) of the rows of ``table`` whose key (TABLES[table].key) is in ``keys``."""
        spec = TABLES[table]
        found: dict[tuple[Any, ...], tuple[bytes, int]] = {}
        groups: dict[tuple[Any, ...], list[Any]] = {}
        for key in keys:
            groups.setdefault(tuple(key[:-1]), []).append(key[-1])
        head, last = spec.key[:-1], spec.key[-1]
        where = " AND ".join([*(f"{c} = :h{i}" for i, c in enumerate(head)), f"{last} IN :keys"])
        sql = text(f"SELECT {', '.join(spec.key)}, {self._blob}, crc FROM {table} WHERE {where}").bindparams(
            bindparam("keys", expanding=True))
        async with self._connect() as conn:
            for prefix, lasts in groups.items():
                params = {**{f"h{i}": v for i, v in enumerate(prefix)}, "keys": lasts}
                for row in await conn.execute(sql, params):
                    found[tuple(row[:len(spec.key)])] = (bytes(row[-2]), row[-1])
        return found

    async def insert_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows as given (``all_columns`` order, ``data`` as str) in one transaction; a
        row whose key is already there is left as it is (``ON CONFLICT DO NOTHING``)."""
        if not rows:
            return
        names = TABLES[table].all_columns
        sql = text(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})"
                   " ON CONFLICT DO NOTHING")
        async with self._connect(write=True) as conn:
            await conn.execute(sql, [dict(zip(names, row)) for row in rows])


# statements -------------------------------------------------------------------------
_LOCK_RECORD = text(pgschema.LOCK_RECORD)
_HEAD = text("SELECT max(seq) FROM history WHERE record_id = :r")
_CHECKPOINT = text(f"SELECT max(seq) FROM history WHERE record_id = :r AND {CHECKPOINT_WHERE}")
_INSERT_HISTORY = text("INSERT INTO history (record_id, seq, v, type, at, data, crc)"
                       " VALUES (:r, :seq, :v, :type, :at, :data, :crc)")
_INSERT_HISTORY_ARRAYS = text(pgschema.INSERT_HISTORY_ARRAYS)
_INSERT_AT_HEAD = text(pgschema.INSERT_HISTORY_ARRAYS + pgschema.AT_HEAD)
_SEARCH_PG = {order: text(sql) for order, sql in pgschema.SEARCH_SQL.items()}
_UPSERTS: dict[tuple[str, tuple[str, ...]], Any] = {}


def _bounded(number: int) -> int:
    """``number`` within +-2**62: a seq bound or limit past the database's 64-bit integers means
    "beyond every row", which 2**62 already does (no seq comes near it)."""
    return max(-(2**62), min(number, 2**62))


class _StaleHead(Exception):
    """The guarded insert found another head: roll back, take the locked path."""


def _arrays(record_id: str, prepared: Sequence[Any]) -> dict[str, Any]:
    """The parameters of INSERT_HISTORY_ARRAYS: one array per column."""
    return {"r": record_id, "seqs": [p.seq for p in prepared], "vs": [p.v for p in prepared],
            "types": [p.type for p in prepared], "ats": [p.at for p in prepared],
            "datas": [p.data for p in prepared], "crcs": [row_crc("history", (record_id, p.seq), p.data) for p in prepared]}


def _upsert_sql(table: str, cols: tuple[str, ...]) -> Any:
    """``INSERT .. ON CONFLICT (key) DO UPDATE``: one atomic statement on both backends."""
    sql = _UPSERTS.get((table, cols))
    if sql is None:
        names = [*cols, "data", "crc"]
        updates = ", ".join(f"{n} = excluded.{n}" for n in names[1:])
        sql = text(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(':' + n for n in names)})"
                   f" ON CONFLICT ({cols[0]}) DO UPDATE SET {updates}")
        _UPSERTS[(table, cols)] = sql
    return sql


def _replace_closed_on_checkout(engine: AsyncEngine) -> None:
    """Never hand out a pooled asyncpg connection the server has closed (a restart, an idle
    backend ended): asyncpg notices the server's close as it happens, so the check costs no
    round trip, and the pool connects anew instead of failing the next call with
    StoreConnectionError. (A connection lost without a close, e.g. a cut network, is still
    found by the call that uses it.)"""

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(_dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if record.driver_connection.is_closed():
            raise DisconnectionError("the server closed this pooled connection")


def _sqlite_transactions(engine: AsyncEngine) -> None:
    """Let SQLAlchemy, not the sqlite3 module, begin transactions: BEGIN IMMEDIATE for writes
    (the write lock before reading the record's head), BEGIN for reads (one snapshot)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA synchronous = FULL")  # an acknowledged write survives power loss
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("steerable_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


async def _inspect_sqlite(conn: AsyncConnection, where: str) -> str:
    version = (await conn.exec_driver_sql("PRAGMA user_version")).scalar() or 0
    refuse_newer_schema(version, where)
    app_id = (await conn.exec_driver_sql("PRAGMA application_id")).scalar()
    tables = (await conn.exec_driver_sql("SELECT count(*) FROM sqlite_master")).scalar()
    if tables and app_id != APPLICATION_ID:
        raise NotAStoreError(f"{where}: a SQLite database that is not a steerable store", path=where,
                             hint="pass the app's sessions database")
    return "ours" if tables else "empty"


async def _inspect_postgres(conn: AsyncConnection, where: str) -> str:
    names = [*TABLES, pgschema.META_TABLE]
    present = {row[0] for row in await conn.execute(text(pgschema.LIST_TABLES), {"names": names})}
    if pgschema.META_TABLE not in present:
        if present:
            raise NotAStoreError(
                f"{where}: tables {', '.join(sorted(present))} exist but belong to something else"
                " (no steerable markers); nothing was created", path=where,
                hint="use another database (or schema) for the steerable store")
        return "empty"
    markers = dict((await conn.execute(text(pgschema.READ_MARKERS))).all())
    if markers.get("application_id") != str(APPLICATION_ID):
        raise NotAStoreError(f"{where}: {pgschema.META_TABLE} belongs to another application", path=where,
                             hint="use another database (or schema) for the steerable store")
    try:
        version = int(markers.get("schema_version", "0"))
    except ValueError:
        raise NotAStoreError(f"{where}: {pgschema.META_TABLE}.schema_version is {markers['schema_version']!r}, not"
                             " a version number; nothing was changed", path=where,
                             hint=f"restore {pgschema.META_TABLE}.schema_version (this build writes {SCHEMA_VERSION})"
                             ) from None
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(f"{where}: schema version {version} was written by a newer build (this build"
                                f" reads up to {SCHEMA_VERSION}); the database was not modified",
                                path=where, version=version)
    return "ours"


async def _current_search_function(conn: AsyncConnection, where: str) -> None:
    """Replace an earlier build's ``steerable_message_text`` (under the lock upgrade_rows took).
    Both return the same text for every row an earlier build could store, so the search index
    stays valid; the current one also indexes a message too long for one tsvector instead of
    refusing its row. A role that does not own the function leaves it (a warning)."""
    found = (await conn.execute(text(pgschema.FUNCTION_SOURCE))).first()
    if found is None or found[0] == pgschema.MESSAGE_TEXT_BODY:
        return
    if not found[1]:
        _log.warning("%s: steerable_message_text is an earlier build's and this role does not own it: a message"
                     " too long for one tsvector is refused until its owner opens the store", where)
        return
    await conn.exec_driver_sql(pgschema.MESSAGE_TEXT_FUNCTION)


def _verified(table: str, row: Sequence[Any], record_id: str | None = None) -> str | bytes:
    """The row's data, after checking it and the row's identity columns (row[3:]) against the
    stored CRC-32 (storage/checksum.py)."""
    data, crc, key = row[0], row[1], row[2]
    if not current_checker(table, row[3:], data, crc):
        where = f"record {record_id!r} seq {key}" if record_id is not None else f"key {key}"
        raise DataIntegrityError(f"{table} {where}: stored bytes do not match their checksum (silent corruption)",
                                 table=table, record_id=record_id, seq=key if record_id is not None else None)
    return data


def _parse(model: type[M], table: str, row: Sequence[Any]) -> M:
    data = _verified(table, row)
    try:
        return model.model_validate_json(data)
    except ValueError:
        raise RecordFormatError(f"{table} key {row[2]}: stored data does not parse as {model.__name__};"
                                " nothing was modified", table=table,
                                hint="run `steerable-maint check URL` to list the damage") from None
