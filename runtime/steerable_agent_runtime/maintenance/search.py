"""search: which sessions' chats mention a query, read-only, ordered like the runtime orders them.

The same code as ``SqliteStorage.search_sessions`` (storage/search.py): with the store's FTS5
index the query is FTS5 syntax; ``order="recent"`` (the default) puts chats in order of their
newest matching message, ``order="relevance"`` puts the best bm25 match first among the
newest 500 matching messages. Without the index (or without FTS5 in this SQLite) it is a
substring match (relevance: chats ranked by matching messages). ``limit`` caps the chats;
each chat's sessions come in (created_at, session_id) order.

Guarantees: reads through :func:`read_store` (no lease, no byte changed, no file created;
committed ``-wal`` rows are searched). Every session row is checked against its CRC-32 and
decoded; a row that fails is not shown and is reported as a ``row-checksum-mismatch`` or
``row-json-invalid`` finding (exit 1), never dropped silently. Raises UsageError for an
empty query, an unknown order or one the FTS5 syntax rejects (with a hint), SchemaTooNewError for a newer
schema, and what ``open_readonly`` raises for a file that is not a readable store.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import UsageError
from ..storage.checksum import identity_sql, store_checker
from ..storage.schema import has_fts
from ..storage.search import ORDERS, check_query, matching_chats
from .codes import FindingLog
from .readonly import ReadOnlyConnection, read_store
from .report import JobReport, Progress, no_progress
from .check.shapes import session_shape


SEARCH_ORDERS = ORDERS
"""The search orders: ``recent`` (the default) and ``relevance``."""


class SearchReport(JobReport):
    """The matching chats (best first) and their sessions as wire dicts, in that order."""

    job: str = "search"
    query: str
    engine: str = ""
    limit: int = 20
    order: str = "recent"
    chats: list[str] = []
    sessions: list[dict[str, Any]] = []


def search(path: str | os.PathLike[str], query: str, *, limit: int = 20, order: str = "recent",
           progress: Progress | None = None) -> SearchReport:
    """Search the chat messages of the store at ``path`` (see the module docstring)."""
    check_query(query, order)
    if limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}", hint="pass --limit 1 or more")
    tick = progress or no_progress

    def read(conn: ReadOnlyConnection) -> SearchReport:
        log, report = FindingLog(max_per_code=20), SearchReport(path=str(path), query=query, limit=limit,
                                                               order=order)
        report.engine, report.chats = matching_chats(conn, query, limit, fts=has_fts(conn), order=order)
        for done, chat_id in enumerate(report.chats):
            tick("sessions", done, len(report.chats))
            report.sessions.extend(_sessions(conn, chat_id, log))
        report.findings = log.findings
        return report

    return read_store(path, read)


def _sessions(conn: ReadOnlyConnection, chat_id: str, log: FindingLog) -> list[dict[str, Any]]:
    found = []
    sql = (f"SELECT session_id, CAST(data AS BLOB), crc, {identity_sql('sessions')} FROM sessions WHERE chat_id = ?"
           " ORDER BY created_at, session_id")
    ok = store_checker(conn)
    for session_id, data, crc, *identity in conn.execute(sql, (chat_id,)):
        if not ok("sessions", identity, data, crc):
            log.add("row-checksum-mismatch", f"sessions {session_id!r}: data bytes do not match their CRC-32;"
                    " not shown", table="sessions", key=session_id)
            continue
        try:
            obj = json.loads(data)
        except ValueError as exc:
            log.add("row-json-invalid", f"sessions {session_id!r}: data is not JSON ({exc}); not shown",
                    table="sessions", key=session_id)
            continue
        problem = session_shape(obj) if type(obj) is dict else "data is not a JSON object"
        if problem is not None:
            log.add("row-invalid", f"sessions {session_id!r}: {problem}; not shown", table="sessions", key=session_id)
        elif obj["chatId"] != chat_id:
            log.add("row-column-mismatch", f"sessions {session_id!r}: its data names chat {obj['chatId']!r}, its"
                    f" chat_id column {chat_id!r}; not shown", table="sessions", key=session_id)
        else:
            found.append(obj)
    return found
