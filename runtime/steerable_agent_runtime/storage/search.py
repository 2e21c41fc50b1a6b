"""Which chats match a search query: the one ranking both the runtime and steerable-maint use.

With the store's FTS5 index (``messages_fts``, kept in sync by triggers) the query is FTS5
syntax. The newest ``candidates`` matching messages are ranked by bm25 and chats come in
order of their best message. The ranking is exact whenever at most ``candidates`` messages
match; beyond that, recent conversations win. That bounds the cost: bm25 costs ~9 us per
matching message, so ranking every match of a common word in a million messages took
~25 ms at the median and ~370 ms at p95, against ~5 ms / ~10 ms for the newest 500
(bench/run.py, search figure).

Where the time goes (bench/run.py, search figure): bm25 costs a few microseconds per
candidate and is paid for every one of them; the rest is done in Python so that nothing else
grows with the candidates: they are sorted by (bm25, newest first) in Python, and their
chats are looked up in that order, a few rowids at a time, only until ``limit`` chats are
found (the SQL join looked up all ``candidates`` messages). Same chats, same order.

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
_CANDIDATES_SQL = ("SELECT rank, rowid FROM messages_fts WHERE messages_fts MATCH ?"
                   " ORDER BY rowid DESC LIMIT ?")
_CHATS_OF = "SELECT rowid, chat_id FROM messages WHERE rowid IN ({})"
_LOOKUP_BATCH = 24
"""Candidates whose chat is looked up per statement (a chat usually has several)."""
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
            return "fts5", _ranked_chats(conn, conn.execute(_CANDIDATES_SQL, (query, candidates)).fetchall(), limit)
        except sqlite3.OperationalError as exc:
            if kind(exc) != "statement":  # damage, I/O, a lock: the caller maps it
                raise
            raise UsageError(f"search query rejected: {exc}", hint=QUOTE_HINT) from exc
    return "like", _first_chats(conn.execute(_LIKE_SQL, (like_pattern(query),)), limit)


def _ranked_chats(conn: sqlite3.Connection, ranked: list[tuple[Any, int]], limit: int) -> list[str]:
    """The chats of the ``(rank, rowid)`` candidates in ``_FTS_SQL`` order (rank, then newest
    first; a candidate whose message row is missing is skipped, as by the join), at most ``limit``."""
    ranked.sort(key=_rank_then_newest)
    chats: list[str] = []
    seen: set[str] = set()
    for start in range(0, len(ranked), _LOOKUP_BATCH):
        batch = [rowid for _rank, rowid in ranked[start:start + _LOOKUP_BATCH]]
        found = dict(conn.execute(_CHATS_OF.format(",".join("?" * len(batch))), batch).fetchall())
        for rowid in batch:
            if rowid in found:
                chat_id = found[rowid]
                if chat_id not in seen:
                    seen.add(chat_id)
                    chats.append(chat_id)
                    if len(chats) >= limit:
                        return chats
    return chats


def _rank_then_newest(candidate: tuple[Any, int]) -> tuple[Any, int]:
    return candidate[0], -candidate[1]


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
