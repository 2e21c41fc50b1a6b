"""Which chats match a search query: the one ordering both the runtime and steerable-maint use.

With the store's FTS5 index (``messages_fts``, kept in sync by triggers) the query is FTS5
syntax. Two orders:

- ``recent`` (the default): chats in order of their newest matching message. Exact, and the
  cost is the FTS5 match alone: matching messages are read newest first, lazily, and their
  chats looked up a few rowids at a time only until ``limit`` chats are found.
- ``relevance``: the newest ``candidates`` matching messages are ranked by bm25 and chats
  come in order of their best message (exact whenever at most ``candidates`` match; beyond
  that, recent conversations win).

Why recent is the default (bench/run.py, search figure, 996,000 messages): FTS5's bm25 must
know, for each query term, how many messages hold it, and it counts that by walking the
term's whole doclist; with the per-candidate document-length lookups that was ~2.2 ms CPU at
the median and ~4.7 ms at p95 on top of the match itself (~0.3 ms / ~1.6 ms), before
anything else, so p95 <= 5 ms is out of reach with bm25 in the loop. A chat app's search box
usually wants the latest conversation that mentions the words anyway; ``relevance`` is there
for a caller that wants bm25.

Without FTS5 it is a substring match (``%`` and ``_`` literal): ``recent`` orders chats by
their newest matching message, ``relevance`` by how many of their messages match.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..errors import UsageError
from .dberrors import kind

SEARCH_CANDIDATES = 500
"""How many of the newest matching messages ``relevance`` ranks by bm25."""
ORDERS = ("recent", "relevance")
"""The search orders (see the module docstring); ``recent`` is the default."""
# Words of SQLite's damage/I-O/lock messages, for a caller that only has a driver's text
# (SqlAlchemyStorage through its driver); sqlite3 callers decide by result code (dberrors).
_DAMAGE_WORDS = ("malformed", "disk I/O", "locked", "corrupt", "no such module")

_FTS_SQL = {
    "relevance": ("SELECT m.chat_id FROM (SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ?"
                  " ORDER BY rowid DESC LIMIT ?) f JOIN messages m ON m.rowid = f.rowid ORDER BY f.rank, f.rowid DESC"),
    "recent": ("SELECT m.chat_id FROM messages_fts f JOIN messages m ON m.rowid = f.rowid WHERE messages_fts MATCH ?"
               " GROUP BY m.chat_id ORDER BY max(f.rowid) DESC"),
}
"""Each order as one SQL statement (chat ids, best first; ``relevance`` takes the query and
``candidates``, ``recent`` the query): what a driver without the sqlite3 module runs, and
the reference matching_chats is tested against."""
_CANDIDATES_SQL = ("SELECT rank, rowid FROM messages_fts WHERE messages_fts MATCH ?"
                   " ORDER BY rowid DESC LIMIT ?")
_RECENT_SQL = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC"
_CHATS_OF = "SELECT rowid, chat_id FROM messages WHERE rowid IN ({})"
_LOOKUP_BATCH = 24
"""Candidates whose chat is looked up per statement (a chat usually has several)."""
_LIKE_WHERE = "FROM messages WHERE json_extract(data, '$.content') LIKE ? ESCAPE '\\' GROUP BY chat_id"
_LIKE_SQL = {"relevance": f"SELECT chat_id {_LIKE_WHERE} ORDER BY count(*) DESC, chat_id",
             "recent": f"SELECT chat_id {_LIKE_WHERE} ORDER BY max(rowid) DESC"}
QUOTE_HINT = 'put the words in double quotes to search for them literally, e.g. \'"foo-bar"\''


def matching_chats(conn: sqlite3.Connection, query: str, limit: int, *, fts: bool, order: str = "recent",
                   candidates: int = SEARCH_CANDIDATES) -> tuple[str, list[str]]:
    """Return (engine, chat ids best first, at most ``limit``); engine is ``fts5`` or ``like``.

    ``order`` is one of ORDERS. Raises UsageError for an empty query, an unknown order or a
    query FTS5 rejects; SQLite errors that mean damage (malformed, I/O) propagate unchanged
    for the caller to map.
    """
    check_query(query, order)
    if fts:
        try:
            if order == "recent":
                cursor = conn.execute(_RECENT_SQL, (query,))
                try:  # closed at once: an unfinished statement would hold its read snapshot
                    return "fts5", _chats_in_order(conn, _fetched_batches(cursor), limit)
                finally:
                    cursor.close()
            ranked = conn.execute(_CANDIDATES_SQL, (query, candidates)).fetchall()
            ranked.sort(key=_rank_then_newest)
            return "fts5", _chats_in_order(conn, _batches([rowid for _rank, rowid in ranked]), limit)
        except sqlite3.OperationalError as exc:
            if kind(exc) != "statement":  # damage, I/O, a lock: the caller maps it
                raise
            raise UsageError(f"search query rejected: {exc}", hint=QUOTE_HINT) from exc
    return "like", _first_chats(conn.execute(_LIKE_SQL[order], (like_pattern(query),)), limit)


def check_query(query: str, order: str) -> None:
    """Raise UsageError (with a hint) for an empty query or an order not in ORDERS."""
    if not query.strip():
        raise UsageError("empty search query", hint="pass one or more words to search for")
    if order not in ORDERS:
        raise UsageError(f"unknown search order {order!r}", hint=f"use one of: {', '.join(ORDERS)}")


def _fetched_batches(cursor: sqlite3.Cursor) -> Iterator[list[int]]:
    while batch := cursor.fetchmany(_LOOKUP_BATCH):
        yield [rowid for (rowid,) in batch]


def _batches(rowids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(rowids), _LOOKUP_BATCH):
        yield rowids[start:start + _LOOKUP_BATCH]


def _chats_in_order(conn: sqlite3.Connection, batches: Iterable[list[int]], limit: int) -> list[str]:
    """The distinct chats of the message rowids in ``batches``, in that order (a rowid whose
    message row is missing is skipped, as by a join), at most ``limit``; stops reading
    ``batches`` once ``limit`` chats are found."""
    chats: list[str] = []
    if limit < 1:
        return chats
    seen: set[str] = set()
    for batch in batches:
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
    """The distinct chat ids of ``rows`` in order, at most ``limit`` (none for ``limit`` < 1)."""
    chats: list[str] = []
    if limit < 1:
        return chats
    for (chat_id,) in rows:
        if chat_id not in chats:
            chats.append(chat_id)
            if len(chats) >= limit:
                break
    return chats
