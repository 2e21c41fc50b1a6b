"""Which chats match a search query: the one ranking both the runtime and steerable-maint use.

With the store's FTS5 index (``messages_fts``, kept in sync by triggers) the query is FTS5
syntax. The newest ``candidates`` matching messages are ranked by bm25 and chats come in
order of their best message. The ranking is exact whenever at most ``candidates`` messages
match; beyond that, recent conversations win. That bounds the cost: bm25 costs ~9 us per
matching message, so ranking every match of a common word in a million messages took
~25 ms at the median and ~370 ms at p95, against ~5 ms / ~10 ms for the newest 500
(bench/run.py, search figure).

Without FTS5 it is a substring match (``%`` and ``_`` literal), chats ranked by how many of
their messages match.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import UsageError
from .dberrors import kind

SEARCH_CANDIDATES = 500
# Words of SQLite's damage/I-O/lock messages, for a caller that only has a driver's text
# (SqlAlchemyStorage through its driver); sqlite3 callers decide by result code (dberrors).
_DAMAGE_WORDS = ("malformed", "disk I/O", "locked", "corrupt", "no such module")

_FTS_SQL = ("SELECT m.chat_id FROM (SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT ?) f JOIN messages m ON m.rowid = f.rowid ORDER BY f.rank, f.rowid DESC")
_LIKE_SQL = ("SELECT chat_id FROM messages WHERE json_extract(data, '$.content') LIKE ? ESCAPE '\\'"
             " GROUP BY chat_id ORDER BY count(*) DESC, chat_id")
QUOTE_HINT = 'put the words in double quotes to search for them literally, e.g. \'"foo-bar"\''


def matching_chats(conn: sqlite3.Connection, query: str, limit: int, *, fts: bool,
                   candidates: int = SEARCH_CANDIDATES) -> tuple[str, list[str]]:
    """Return (engine, chat ids best first, at most ``limit``); engine is ``fts5`` or ``like``.

    Raises UsageError for an empty query or one FTS5 rejects; SQLite errors that mean damage
    (malformed, I/O) propagate unchanged for the caller to map.
    """
    if not query.strip():
        raise UsageError("empty search query", hint="pass one or more words to search for")
    if fts:
        try:
            return "fts5", _first_chats(conn.execute(_FTS_SQL, (query, candidates)), limit)
        except sqlite3.OperationalError as exc:
            if kind(exc) != "statement":  # damage, I/O, a lock: the caller maps it
                raise
            raise UsageError(f"search query rejected: {exc}", hint=QUOTE_HINT) from exc
    return "like", _first_chats(conn.execute(_LIKE_SQL, (like_pattern(query),)), limit)


def like_pattern(query: str) -> str:
    """The LIKE pattern matching ``query`` as a substring (``%``, ``_`` and ``\\`` literal)."""
    return "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _first_chats(rows: Iterable[Sequence[Any]], limit: int) -> list[str]:
    chats: list[str] = []
    for (chat_id,) in rows:
        if chat_id not in chats:
            chats.append(chat_id)
            if len(chats) >= limit:
                break
    return chats
