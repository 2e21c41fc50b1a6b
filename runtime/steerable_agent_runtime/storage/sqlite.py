"""SqliteStorage: the durable StorageAdapter on stdlib sqlite3.

Layout (storage/schema.py): each row keeps the entity's canonical JSON in ``data``, a
CRC-32 of those bytes in ``crc``, and its filter/order fields in indexed columns. WAL mode.

Guarantees:
- ``SqliteStorage(path)`` takes the write lease (``<stem>.lock``) in its constructor and
  holds it until ``await close()``; a second opener, in this process or another, gets
  StoreAlreadyOwnedError naming the holder.
- A path that is a directory, unreadable, empty or not SQLite raises NotAStoreError; a
  schema newer than this build raises SchemaTooNewError. Both before anything is written:
  the file is untouched (for a newer header the lease file is not even created; for a newer
  schema still in the -wal the markers are read read-only, so nothing is checkpointed). A
  store whose repair was interrupted mid-swap raises RepairInterruptedError, untouched.
- The file is opened the one way every writer opens it (storage/access.py: probe, refuse,
  lease, markers, connect, pragmas).
- A new database is created atomically (access.create_store: built beside, fsynced, linked
  into place) with mode 0600 (SQLite gives its -wal and -shm the same mode): a kill during
  the first open leaves no file or a complete store.
- Every write is one transaction; an acknowledged write (the awaited call returned) is
  committed with ``synchronous=FULL`` by default, so it survives kill -9 and power loss.
- Every read verifies each row's checksum (``data`` bound to the row's key columns,
  storage/checksum.py) and raises DataIntegrityError on a mismatch: no read path returns
  silently corrupted data or skips a row.
- A store of an older schema version is upgraded on open, in one transaction, before the
  constructor returns (storage/upgrade.py; ``on_upgrade(done, total)`` reports progress);
  ``upgraded_from`` says from which version.

All methods are ``async`` (uniform with the protocol); the SQLite calls are short local
I/O made inline, serialised by a lock so the object may be shared across threads.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..errors import DataIntegrityError, DatabaseDamagedError, StoreClosedError, UsageError
from ..history import read_entry_text
from ..history_append import prepare_append
from ..models import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan, WireModel, has_lone_surrogate
from .access import claim, connect, create_store, transaction
from .checksum import IDENTITY, current_checker, history_rows, identity_sql, row_crc
from .dberrors import as_store_error
from .schema import CHECKPOINT_WHERE, SCHEMA_VERSION, has_fts
from .search import SEARCH_CANDIDATES, matching_chats
from .sqlite_append import insert_plain, plain_rows
from .timebounds import time_bound
from .upgrade import UpgradeProgress, upgrade_store

M = TypeVar("M", bound=WireModel)
_MAX_SEQ = 2**62


class SqliteStorage:
    """The durable store of one database file, owned exclusively while open."""

    def __init__(self, path: str | os.PathLike[str], *,
                 synchronous: Literal["FULL", "NORMAL"] = "FULL",
                 on_upgrade: UpgradeProgress | None = None) -> None:
        self.path = Path(path)
        self.upgraded_from: int | None = None
        """The schema version this open upgraded the store from (None: it was current)."""
        self._on_upgrade = on_upgrade
        found, self.lease = claim(self.path, allow_missing=True, write=True)
        self._lock = threading.RLock()
        try:
            if not found.exists:
                create_store(self.path)
            self._conn: sqlite3.Connection | None = connect(
                self.path, readonly=False, synchronous=synchronous, check_same_thread=False, adopt_empty=True)
            self._upgrade(self._conn)
        except BaseException:
            if getattr(self, "_conn", None) is not None:
                self._conn.close()
            self.lease.release(discard=True)  # refused: leave no lock file this open created
            raise
        self.fts = has_fts(self._conn)

    # opening --------------------------------------------------------------------------
    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Upgrade a store of an older schema version in one transaction (storage/upgrade.py)."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            with self._damage_as_error():
                upgrade_store(conn, version, self.path, self._on_upgrade)
            self.upgraded_from = version

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection; raises StoreClosedError after close()."""
        if self._conn is None:
            raise StoreClosedError(f"{self.path}: storage is closed", path=str(self.path))
        return self._conn

    async def close(self) -> None:
        """Close the connection and release the lease. Idempotent."""
        self.close_sync()

    def close_sync(self) -> None:
        """Synchronous close, for code outside an event loop (and finalisers)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self.lease.release()

    async def __aenter__(self) -> "SqliteStorage":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _damage_as_error(self) -> _DamageAsError:
        """Turn SQLite's damage and access errors into DatabaseDamagedError (with the salvage
        hint) and StoreAccessError (storage/dberrors.py decides, by result code)."""
        return _DamageAsError(self.path)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._damage_as_error(), transaction(self.conn) as conn:
            yield conn

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._damage_as_error():
            try:
                return self.conn.execute(sql, tuple(params)).fetchall()
            except UnicodeEncodeError:  # a parameter holding a lone surrogate: no row holds one
                return []

    # entity helpers -------------------------------------------------------------------
    def _put(self, table: str, cols: dict[str, Any], data: str) -> None:
        names = [*cols, "data", "crc"]
        key = next(iter(cols))
        updates = ", ".join(f"{n} = excluded.{n}" for n in names[1:])
        sql = (f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
               f" ON CONFLICT({key}) DO UPDATE SET {updates}")
        crc = row_crc(table, [cols[c] for c in IDENTITY[table]], data)
        with self._write() as conn:
            conn.execute(sql, (*cols.values(), data, crc))

    def _get(self, model: type[M], table: str, where: str, params: Iterable[Any], order: str = "",
             limit: int | None = None) -> list[M]:
        sql = f"SELECT CAST(data AS BLOB), crc, rowid, {_IDENTITY_SQL[table]} FROM {table} WHERE {where} {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [model.model_validate_json(_verified(table, row)) for row in self._read(sql, params)]

    # sessions -------------------------------------------------------------------------
    async def upsert_session(self, session: AgentSession) -> AgentSession:
        data = session.to_json()
        self._put("sessions", {"session_id": session.session_id, "user_id": session.user_id,
                               "chat_id": session.chat_id, "is_active": int(session.is_active),
                               "created_at": session.created_at, "updated_at": session.updated_at}, data)
        return AgentSession.model_validate_json(data)

    async def get_session(self, session_id: str) -> AgentSession | None:
        found = self._get(AgentSession, "sessions", "session_id = ?", (session_id,))
        return found[0] if found else None

    async def list_sessions(
        self, *, user_id: str | None = None, chat_id: str | None = None, active_only: bool = False
    ) -> list[AgentSession]:
        terms, params = ["1"], []
        if user_id is not None:
            terms.append("user_id = ?")
            params.append(user_id)
        if chat_id is not None:
            terms.append("chat_id = ?")
            params.append(chat_id)
        if active_only:
            terms.append("is_active = 1")
        return self._get(AgentSession, "sessions", " AND ".join(terms), params, "ORDER BY created_at, session_id")

    # messages -------------------------------------------------------------------------
    async def append_message(self, message: ChatMessage) -> ChatMessage:
        data = message.to_json()
        self._put("messages", {"id": message.id, "chat_id": message.chat_id, "created_at": message.created_at}, data)
        return ChatMessage.model_validate_json(data)

    async def list_messages(self, chat_id: str, *, limit: int | None = None) -> list[ChatMessage]:
        if limit is None:
            return self._get(ChatMessage, "messages", "chat_id = ?", (chat_id,), "ORDER BY created_at, rowid")
        tail = self._get(ChatMessage, "messages", "chat_id = ?", (chat_id,),
                         "ORDER BY created_at DESC, rowid DESC", max(limit, 0))
        return tail[::-1]

    # traces ---------------------------------------------------------------------------
    async def upsert_trace(self, trace: HarnessTrace) -> HarnessTrace:
        data = trace.to_json()
        self._put("traces", {"trace_id": trace.trace_id, "session_id": trace.session_id, "chat_id": trace.chat_id,
                             "user_id": trace.user_id, "started_at": trace.started_at}, data)
        return HarnessTrace.model_validate_json(data)

    async def get_trace(self, trace_id: str) -> HarnessTrace | None:
        found = self._get(HarnessTrace, "traces", "trace_id = ?", (trace_id,))
        return found[0] if found else None

    async def list_traces(
        self, *, session_id: str | None = None, chat_id: str | None = None,
        since: str | None = None, until: str | None = None,
    ) -> list[HarnessTrace]:
        terms, params = ["1"], []
        since, until = time_bound("since", since), time_bound("until", until)
        for clause, value in (("session_id = ?", session_id), ("chat_id = ?", chat_id),
                              ("started_at >= ?", since), ("started_at < ?", until)):
            if value is not None:
                terms.append(clause)
                params.append(value)
        return self._get(HarnessTrace, "traces", " AND ".join(terms), params, "ORDER BY started_at, trace_id")

    async def add_span(self, trace_id: str, span: TraceSpan) -> TraceSpan:
        data = span.to_json()
        self._put("spans", {"span_id": span.span_id, "trace_id": trace_id, "parent_id": span.parent_id,
                            "start_at": span.start_at}, data)
        return TraceSpan.model_validate_json(data)

    async def add_event(self, trace_id: str, event: TraceEvent) -> TraceEvent:
        data = event.to_json()
        self._put("events", {"event_id": event.event_id, "trace_id": trace_id, "span_id": event.span_id,
                             "at": event.at}, data)
        return TraceEvent.model_validate_json(data)

    async def list_spans(self, trace_id: str) -> list[TraceSpan]:
        return self._get(TraceSpan, "spans", "trace_id = ?", (trace_id,), "ORDER BY start_at, span_id")

    async def list_events(self, trace_id: str, *, span_id: str | None = None) -> list[TraceEvent]:
        if span_id is None:
            return self._get(TraceEvent, "events", "trace_id = ?", (trace_id,), "ORDER BY at, event_id")
        return self._get(TraceEvent, "events", "trace_id = ? AND span_id = ?", (trace_id, span_id),
                         "ORDER BY at, event_id")

    # history --------------------------------------------------------------------------
    async def append_history(self, record_id: str, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        entries = list(entries)
        # _write, inlined: one generator context fewer per append (~10 k instructions)
        with self._lock, self._damage_as_error(), transaction(self.conn) as conn:
            head = conn.execute("SELECT max(seq) FROM history WHERE record_id = ?", (record_id,)).fetchone()[0]
            plain = plain_rows(record_id, entries, (head or 0) + 1)
            if plain is not None:  # all plain items: v and type are the statement's constants
                insert_plain(conn, plain[0])
                return plain[1]
            # not all plain items: the careful path (it raises the errors)
            prepared = prepare_append(record_id, entries, (head or 0) + 1)
            conn.executemany(_INSERT_HISTORY, history_rows(record_id, prepared))
        return [p.wire for p in prepared]

    async def list_history(
        self, record_id: str, *, after_seq: int | None = None, until_seq: int | None = None,
        limit: int | None = None, reverse: bool = False,
    ) -> list[dict[str, Any]]:
        sql = ("SELECT CAST(data AS BLOB), crc, seq, CAST(record_id AS BLOB), seq FROM history"
               " WHERE record_id = ? AND seq > ? AND seq <= ?"
               f" ORDER BY seq {'DESC' if reverse else 'ASC'} LIMIT ?")
        rows = self._read(sql, (record_id, after_seq or 0, _MAX_SEQ if until_seq is None else until_seq,
                                -1 if limit is None else max(limit, 0)))
        return [read_entry_text(_verified("history", row, record_id), record_id=record_id, seq=row[2])
                for row in rows]

    async def history_checkpoint(self, record_id: str) -> int | None:
        rows = self._read(f"SELECT max(seq) FROM history WHERE record_id = ? AND {CHECKPOINT_WHERE}", (record_id,))
        return rows[0][0] if rows else None  # (none: a record id no row can hold)

    # search ---------------------------------------------------------------------------
    async def search_sessions(self, query: str, *, limit: int = 20, order: str = "recent",
                              candidates: int = SEARCH_CANDIDATES) -> list[AgentSession]:
        """Sessions whose chat messages match ``query``, best-matching chat first.

        With FTS5 the query is FTS5 syntax. ``order="recent"`` (the default): chats in order
        of their newest matching message. ``order="relevance"``: the newest ``candidates``
        matching messages are ranked by bm25 (exact whenever no more than that match).
        storage/search.py says why recent is the default. Without FTS5 it is a substring
        match (relevance: ranked by the number of matching messages). At most ``limit``
        chats; each chat's sessions in (created_at, session_id) order. Raises UsageError for
        an empty query, an unknown order or a query FTS5 rejects.
        """
        if has_lone_surrogate(query):  # no stored text holds one (SQLite would refuse the parameter)
            return []
        with self._lock, self._damage_as_error():
            _, chats = matching_chats(self.conn, query, limit, fts=self.fts, order=order, candidates=candidates)
            if not chats:
                return []
            # One statement for every chat's sessions (list_sessions per chat was one each).
            rows = self.conn.execute(
                f"SELECT CAST(data AS BLOB), crc, rowid, {_IDENTITY_SQL['sessions']}, chat_id FROM sessions"
                f" WHERE chat_id IN ({','.join('?' * len(chats))}) ORDER BY created_at, session_id", chats).fetchall()
        per_chat: dict[Any, list[tuple[Any, ...]]] = {chat_id: [] for chat_id in chats}
        for row in rows:
            per_chat[row[-1]].append(row[:-1])
        validate = AgentSession.model_validate_json
        return [validate(_verified("sessions", row)) for chat_id in chats for row in per_chat[chat_id]]


class _DamageAsError:
    """SqliteStorage._damage_as_error's context (a class: cheaper to enter than a generator's)."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if kind is None:
            return False
        if issubclass(kind, UnicodeEncodeError):  # SQLite refused a parameter: the transaction rolled back
            raise UsageError(f"{self.path}: a value to store holds a lone UTF-16 surrogate (not a character):"
                             " no row can hold it; nothing was written", path=str(self.path),
                             hint="pass ids and text as valid Unicode") from exc
        if not issubclass(kind, sqlite3.Error):
            return False
        error = as_store_error(exc, self.path)
        if error is None and issubclass(kind, sqlite3.DatabaseError) and not issubclass(kind, sqlite3.OperationalError):
            # a constraint or datatype error on our own statements: the file is not what we wrote
            error = DatabaseDamagedError(f"{self.path}: SQLite reports damage: {exc}", path=str(self.path))
        if error is None:
            return False  # the exception propagates as it is
        raise error from exc


_INSERT_HISTORY = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)"
_IDENTITY_SQL = {table: identity_sql(table) for table in IDENTITY}


def _verified(table: str, row: tuple[Any, ...], record_id: str | None = None) -> bytes:
    """The row's data bytes, after checking them and the row's identity columns (row[3:])
    against the stored CRC-32 (storage/checksum.py)."""
    data, crc, key = row[0], row[1], row[2]
    if not current_checker(table, row[3:], data, crc):
        where = f"record {record_id!r} seq {key}" if record_id is not None else f"rowid {key}"
        raise DataIntegrityError(f"{table} {where}: stored bytes do not match their checksum (silent corruption)",
                                 table=table, record_id=record_id, seq=key if record_id is not None else None)
    return data
