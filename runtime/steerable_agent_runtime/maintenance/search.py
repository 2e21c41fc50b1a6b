"""search: which sessions' chats mention a query, read-only, ranked like the runtime ranks them.

Same semantics as ``SqliteStorage.search_sessions``: with the store's FTS5 index the query
is FTS5 syntax and chats come best bm25 match first; without it (or without FTS5 in this
SQLite) it is a substring match, chats ranked by matching messages. ``limit`` caps the
chats; each chat's sessions come in (created_at, session_id) order.

Guarantees: reads through :func:`read_store` (no lease, no byte changed, no file
created; committed ``-wal`` rows are searched). Every session row is checked against its
CRC-32; a mismatched row is not shown and is reported as a ``row-checksum-mismatch``
finding (exit 1), never dropped silently. Raises UsageError for an empty query or one the
FTS5 syntax rejects (with a hint), SchemaTooNewError for a newer schema, and what
``open_readonly`` raises for a file that is not a readable store.
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from typing import Any

from ..errors import UsageError
from ..storage.schema import has_fts
from .check_codes import FindingLog
from .readonly import ReadOnlyConnection, read_store
from .report import JobReport, Progress, no_progress

_FTS_SQL = ("SELECT m.chat_id FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
            " WHERE messages_fts MATCH ? ORDER BY messages_fts.rank")
_LIKE_SQL = ("SELECT chat_id FROM messages WHERE json_extract(data, '$.content') LIKE ? ESCAPE '\\'"
             " GROUP BY chat_id ORDER BY count(*) DESC, chat_id")
_QUOTE_HINT = 'put the words in double quotes to search for them literally, e.g. \'"foo-bar"\''


class SearchReport(JobReport):
    """The matching chats (best first) and their sessions as wire dicts, in that order."""

    job: str = "search"
    query: str
    engine: str = ""
    limit: int = 20
    chats: list[str] = []
    sessions: list[dict[str, Any]] = []


def search(path: str | os.PathLike[str], query: str, *, limit: int = 20,
           progress: Progress | None = None) -> SearchReport:
    """Search the chat messages of the store at ``path`` (see the module docstring)."""
    if not query.strip():
        raise UsageError("empty search query", hint="pass one or more words to search for")
    if limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}", hint="pass --limit 1 or more")
    tick = progress or no_progress

    def read(conn: ReadOnlyConnection) -> SearchReport:
        log, report = FindingLog(max_per_code=20), SearchReport(path=str(path), query=query, limit=limit)
        report.engine, report.chats = _matching_chats(conn, query, limit)
        for done, chat_id in enumerate(report.chats):
            tick("sessions", done, len(report.chats))
            report.sessions.extend(_sessions(conn, chat_id, log))
        report.findings = log.findings
        return report

    return read_store(path, read)


def _matching_chats(conn: ReadOnlyConnection, query: str, limit: int) -> tuple[str, list[str]]:
    if has_fts(conn):
        try:
            return "fts5", _first_chats(conn, _FTS_SQL, query, limit)
        except sqlite3.OperationalError as exc:
            if "no such module" not in str(exc):
                if any(word in str(exc) for word in ("malformed", "disk I/O", "corrupt")):
                    raise
                raise UsageError(f"search query rejected: {exc}", hint=_QUOTE_HINT) from None
    pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return "like", _first_chats(conn, _LIKE_SQL, pattern, limit)


def _first_chats(conn: ReadOnlyConnection, sql: str, query: str, limit: int) -> list[str]:
    chats: list[str] = []
    for (chat_id,) in conn.execute(sql, (query,)):
        if chat_id not in chats:
            chats.append(chat_id)
            if len(chats) >= limit:
                break
    return chats


def _sessions(conn: ReadOnlyConnection, chat_id: str, log: FindingLog) -> list[dict[str, Any]]:
    found = []
    sql = ("SELECT session_id, CAST(data AS BLOB), crc FROM sessions WHERE chat_id = ?"
           " ORDER BY created_at, session_id")
    for session_id, data, crc in conn.execute(sql, (chat_id,)):
        if data is None or zlib.crc32(data) != crc:
            log.add("row-checksum-mismatch", f"sessions {session_id!r}: data bytes do not match their CRC-32;"
                    " not shown", table="sessions", key=session_id)
            continue
        found.append(json.loads(data))
    return found
