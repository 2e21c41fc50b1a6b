"""The SQLite schema of a steerable store: tables, indexes, version markers, checksums.

Every entity table keeps the entity's full canonical JSON in ``data`` and a CRC-32 binding
``data`` to the row's key columns in ``crc`` (storage/checksum.py; schema version 1 covered
``data`` alone, see storage/upgrade.py); the filter/order fields are duplicated into indexed
columns. ``TABLES`` is the only description of the tables: every job derives its column
lists, keys, parents, chat columns, newest-write columns, models and salvage markers from it
(tests/storage/test_schema_spec.py proves each derived list covers every table), so adding a
table means editing this module (TABLES and the DDL) only.

``PRAGMA application_id`` = APPLICATION_ID marks the file as a steerable store;
``PRAGMA user_version`` = SCHEMA_VERSION is the schema version. A file whose user_version
is above SCHEMA_VERSION was written by a newer build and is refused whole; one below it
is read with its own checksum rule and upgraded by the app on open (storage/upgrade.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from pydantic import BaseModel

from ..models import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan
from .txn import transaction

APPLICATION_ID = 0x53544552  # "STER"
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class TableSpec:
    """How one entity table is laid out.

    ``key`` names the columns that identify a row; ``columns`` maps each indexed column to
    the camelCase JSON field of ``data`` it duplicates (check compares them); ``parent``
    names (column, parent table, parent column) for the orphan check; ``chat_column`` the
    column naming the row's chat (None: the row belongs to its chat through its trace);
    ``newest`` the timestamp column of the row's latest write (inspect, archive's idle test);
    ``model`` the wire model of ``data`` (None for history: an entry union); ``marker`` a JSON
    key only this table's rows have among tables of the same column count (salvage matches
    rows without a schema by it); ``integers`` and ``nullable`` the column types besides TEXT.
    """

    name: str
    key: tuple[str, ...]
    columns: dict[str, str]
    parent: tuple[str, str, str] | None
    chat_column: str | None
    newest: str
    model: type[BaseModel] | None
    marker: bytes
    integers: frozenset[str] = field(default_factory=frozenset)
    nullable: frozenset[str] = field(default_factory=frozenset)

    @property
    def singular(self) -> str:
        """``messages`` -> ``message``: how a finding names one row."""
        return self.name.removesuffix("s")

    @property
    def all_columns(self) -> tuple[str, ...]:
        """Every stored column in DDL order, ``data`` and ``crc`` last."""
        return (*self.columns, "data", "crc")


TABLES: dict[str, TableSpec] = {
    "sessions": TableSpec(
        "sessions", ("session_id",),
        {"session_id": "sessionId", "user_id": "userId", "chat_id": "chatId", "is_active": "isActive",
         "created_at": "createdAt", "updated_at": "updatedAt"},
        None, "chat_id", "updated_at", AgentSession, b'"currentStage"', frozenset({"is_active"})),
    "messages": TableSpec(
        "messages", ("id",),
        {"id": "id", "chat_id": "chatId", "created_at": "createdAt"},
        ("chat_id", "sessions", "chat_id"), "chat_id", "created_at", ChatMessage, b'"role"'),
    "traces": TableSpec(
        "traces", ("trace_id",),
        {"trace_id": "traceId", "session_id": "sessionId", "chat_id": "chatId", "user_id": "userId",
         "started_at": "startedAt"},
        ("session_id", "sessions", "session_id"), "chat_id", "started_at", HarnessTrace, b'"traceId"'),
    "spans": TableSpec(
        "spans", ("span_id",),
        {"span_id": "spanId", "trace_id": "", "parent_id": "parentId", "start_at": "startAt"},
        ("trace_id", "traces", "trace_id"), None, "start_at", TraceSpan, b'"startAt"',
        nullable=frozenset({"parent_id"})),
    "events": TableSpec(
        "events", ("event_id",),
        {"event_id": "eventId", "trace_id": "", "span_id": "spanId", "at": "at"},
        ("span_id", "spans", "span_id"), None, "at", TraceEvent, b'"eventId"'),
    "history": TableSpec(
        "history", ("record_id", "seq"),
        {"record_id": "", "seq": "seq", "v": "v", "type": "type", "at": "at"},
        None, "record_id", "at", None, b'"type"', frozenset({"seq", "v"})),
}
"""Entity tables by name. A column mapped to "" is not part of ``data`` (it is the row's
place: the trace a span belongs to, the record an entry belongs to)."""

DDL = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    user_id    TEXT NOT NULL,
    chat_id    TEXT NOT NULL,
    is_active  INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_chat ON sessions(chat_id);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions(user_id, created_at);

CREATE TABLE IF NOT EXISTS messages (
    id         TEXT PRIMARY KEY NOT NULL,
    chat_id    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_chat ON messages(chat_id, created_at);

CREATE TABLE IF NOT EXISTS traces (
    trace_id   TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    chat_id    TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    started_at TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_session ON traces(session_id);
CREATE INDEX IF NOT EXISTS traces_chat ON traces(chat_id);
CREATE INDEX IF NOT EXISTS traces_started ON traces(started_at);

CREATE TABLE IF NOT EXISTS spans (
    span_id    TEXT PRIMARY KEY NOT NULL,
    trace_id   TEXT NOT NULL,
    parent_id  TEXT,
    start_at   TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_trace ON spans(trace_id, start_at);

CREATE TABLE IF NOT EXISTS events (
    event_id   TEXT PRIMARY KEY NOT NULL,
    trace_id   TEXT NOT NULL,
    span_id    TEXT NOT NULL,
    at         TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS events_trace ON events(trace_id, at);
CREATE INDEX IF NOT EXISTS events_span ON events(span_id);

CREATE TABLE IF NOT EXISTS history (
    record_id  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    v          INTEGER NOT NULL,
    type       TEXT NOT NULL,
    at         TEXT NOT NULL,
    data       TEXT NOT NULL,
    crc        INTEGER NOT NULL,
    PRIMARY KEY (record_id, seq)
);
-- Partial index: only checkpoints (boundaries, seeds) pay for it on append, and resume
-- finds the newest one in O(log n) without reading the prefix.
CREATE INDEX IF NOT EXISTS history_checkpoints ON history(record_id, seq)
    WHERE type IN ('compaction_boundary', 'seed');
"""

CHECKPOINT_WHERE = "type IN ('compaction_boundary', 'seed')"
"""Must match the partial index's WHERE clause word for word so SQLite uses the index."""

FTS_DDL = """
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, tokenize = 'unicode61');
CREATE TRIGGER IF NOT EXISTS messages_fts_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.rowid, json_extract(new.data, '$.content'));
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_ad AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.rowid;
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_au AFTER UPDATE OF data ON messages BEGIN
    UPDATE messages_fts SET content = json_extract(new.data, '$.content') WHERE rowid = new.rowid;
END;
"""


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite library was built with FTS5."""
    row = conn.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()
    return bool(row and row[0])


def has_fts(conn: sqlite3.Connection) -> bool:
    """Whether the store has its full-text index (absent when created without FTS5) and this
    SQLite can read it (a build without the fts5 module cannot: search then falls back)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts'").fetchone()
    if row is None:
        return False
    try:
        conn.execute("SELECT 1 FROM messages_fts LIMIT 0")
    except sqlite3.OperationalError:
        return False  # "no such module: fts5"
    return True


def create_schema(conn: sqlite3.Connection) -> None:
    """Create every table and index of SCHEMA_VERSION and stamp the version markers.

    Idempotent. Runs inside one transaction on ``conn`` (autocommit connection expected).
    """
    with transaction(conn):
        for statement in _statements(DDL):
            conn.execute(statement)
        if fts5_available(conn):
            for statement in _statements(FTS_DDL):
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _statements(script: str) -> list[str]:
    """Split a DDL script into complete statements (triggers contain semicolons)."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    out: list[str] = []
    buf = ""
    for line in lines:
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    return out
