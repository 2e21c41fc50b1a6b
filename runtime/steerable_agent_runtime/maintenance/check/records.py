"""check's per-record pass: seq contiguity, record versions, the downgrade triage.

Contiguity is computed in SQL over the primary-key index: each record's entries counted over
its range, its first and last seq by a seek, the records visited by seeking from one record id
to the next; only when some record fails that are the flagged records found with the
per-entry aggregates and read seq by seq to name their gaps and duplicates. Versions come from
the row scan (full check) or from the ``v`` and ``type`` columns (quick).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...history import ENTRY_TYPES, RECORD_FORMAT_VERSION
from ..codes import FindingLog
from .rows import RecordStats

USER_MESSAGE = ("Your conversation was saved by a newer version of the app. It is safe and has not been"
                " changed. Please update the app to the latest version to open and continue it.")
"""What support tells the user whose chat holds entries from a newer build."""


class DowngradeRecord(BaseModel):
    """One chat whose history record holds entries this build cannot read (a downgrade)."""

    record_id: str
    versions: list[int]
    entries: int
    first_seq: int
    user_ids: list[str]
    intact: bool = True
    remedy: str
    tell_the_user: str = USER_MESSAGE


def check_contiguity(conn: Any, log: FindingLog) -> int | None:
    """Add record-seq-gap / record-seq-duplicate findings for every record that needs them.

    Returns ``count(*)`` of history (from its primary-key index), or None for a table that
    lost its key (a rebuild), which is checked with ``count(DISTINCT seq)`` and not counted here.

    A record is flagged, as before, when ``min(seq) != 1 OR max(seq) != count(*)`` (with the
    (record_id, seq) primary key a seq cannot repeat, so that is exact). That statement's
    three aggregates per entry now run only when some record is a suspect (see _walk): the
    records are visited by seeking from one record id to the next, each counted over its
    range of the index, its first and last seq read by a seek.
    """
    if not conn.execute("SELECT 1 FROM pragma_index_list('history') WHERE origin = 'pk'").fetchone():
        _flagged(conn, log, "SELECT record_id FROM history GROUP BY record_id"
                 " HAVING count(*) != count(DISTINCT seq) OR min(seq) != 1 OR max(seq) != count(*)")
        return None
    entries = conn.execute("SELECT count(*) FROM history").fetchone()[0]
    suspects = _walk(conn, entries)
    if suspects is None:
        suspects = conn.execute(_GROUPED_SUSPECTS_SQL).fetchone()[0]
    if suspects:
        _flagged(conn, log, "SELECT record_id FROM history GROUP BY record_id"
                 " HAVING min(seq) != 1 OR max(seq) != count(*)")
    return entries


_SUSPECT = "first IS NOT 1 OR n IS NOT last"
"""A record is a suspect unless its first entry's seq is 1 and its last seq equals its count.
Every record the three aggregates flag is one: max(seq) is the last seq either way, and where
min(seq) is not 1 the first entry's seq is that minimum or a NULL before it (damage in a NOT
NULL column, which ``min()`` skips)."""

_FIRST_LAST = ("(SELECT seq FROM history h WHERE h.record_id = {id} ORDER BY seq LIMIT 1) AS first,"
               " (SELECT max(seq) FROM history h WHERE h.record_id = {id}) AS last")

_WALK_SQL = (
    "WITH RECURSIVE r(id) AS (SELECT min(record_id) FROM history WHERE record_id >= ''"
    " UNION ALL SELECT (SELECT min(record_id) FROM history WHERE record_id > r.id) FROM r"
    " WHERE r.id IS NOT NULL LIMIT ?)"
    f" SELECT count(*) FILTER (WHERE id IS NULL), total(n), count(*) FILTER (WHERE id IS NOT NULL AND ({_SUSPECT}))"
    " FROM (SELECT id, (SELECT count(*) FROM history h WHERE h.record_id = r.id) AS n,"
    f" {_FIRST_LAST.format(id='r.id')} FROM r LIMIT -1)")
"""(walk ended, entries counted, suspects). ``LIMIT -1`` keeps the per-record row whole (not
flattened into the aggregate, which would count each record twice)."""

_GROUPED_SUSPECTS_SQL = (
    f"SELECT count(*) FILTER (WHERE {_SUSPECT}) FROM (SELECT record_id, count(*) AS n,"
    f" {_FIRST_LAST.format(id='g.record_id')} FROM history g GROUP BY record_id LIMIT -1)")
"""The suspects in one GROUP BY count over the key index (when the walk cannot answer)."""

RECORDS_PER_SEEK = 32
"""The walk visits at most ``max(64, entries // RECORDS_PER_SEEK)`` records: past that (many
short records) one pass over the index is cheaper than a few seeks per record."""


def _walk(conn: Any, entries: int) -> int | None:
    """The number of suspect records, or None when the walk cannot tell: more records than
    its cap, or entries it did not visit (a record id that is NULL or a number, which sort
    before text: damage in a TEXT NOT NULL column)."""
    cap = max(64, entries // RECORDS_PER_SEEK)
    ended, counted, suspects = conn.execute(_WALK_SQL, (cap + 1,)).fetchone()
    if not ended or counted != entries:
        return None
    return suspects


def _flagged(conn: Any, log: FindingLog, sql: str) -> None:
    for (record_id,) in conn.execute(sql).fetchall():
        seqs = [s for (s,) in conn.execute("SELECT seq FROM history WHERE record_id = ? ORDER BY seq", (record_id,))]
        _report_record(record_id, seqs, log)


def _report_record(record_id: str, seqs: list[int], log: FindingLog) -> None:
    expected, previous = 1, None
    for seq in (s for s in seqs if type(s) is int):  # a non-integer seq is a damaged row, reported by the scan
        if seq == previous:
            log.add("record-seq-duplicate", f"record {record_id!r}: two or more entries carry seq {seq}",
                    table="history", record_id=record_id, seq=seq)
        elif seq > expected:
            missing = f"seq {expected}" if seq == expected + 1 else f"seqs {expected}..{seq - 1}"
            log.add("record-seq-gap", f"record {record_id!r}: {missing} missing (next present: {seq})",
                    table="history", record_id=record_id, seq=expected)
        previous, expected = seq, max(expected, seq + 1)


def stats_from_columns(conn: Any, log: FindingLog, total: int | None = None) -> RecordStats:
    """Quick mode: record versions and unknown types from the ``v`` and ``type`` columns only.

    One pass counting the unusual rows (no sort, one aggregate step per unusual row only)
    answers the usual case, every entry current and of a known type: the count of rows then
    comes from the primary-key index, as the report's row count does (``total``: that count,
    when the caller has it already). Only otherwise is the table read again to build the
    histogram and place the legacy, newer and unknown entries.
    """
    stats = RecordStats()
    unusual = conn.execute(_UNUSUAL_SQL, (RECORD_FORMAT_VERSION, *ENTRY_TYPES)).fetchone()[0]
    if not unusual:
        if total is None:
            total = conn.execute("SELECT count(*) FROM history").fetchone()[0]
        if total:
            stats.versions[RECORD_FORMAT_VERSION] = total
        return stats
    for v, count in conn.execute("SELECT v, count(*) FROM history GROUP BY v"):
        stats.versions[v] += count
    # typeof: SQLite orders text and blobs above every number, and a damaged v column that
    # holds one is not a newer version (the full check reports the row against its data)
    sql = ("SELECT record_id, v, count(*), min(seq) FROM history"
           " WHERE (typeof(v) = 'integer' AND v > ?) OR v = 1 GROUP BY record_id, v")
    for record_id, v, count, first in conn.execute(sql, (RECORD_FORMAT_VERSION,)):
        slots = stats.legacy if v == 1 else stats.newer.setdefault(record_id, {})
        slots[record_id if v == 1 else v] = [count, first]
    _unknown_types(conn, log)
    _odd_versions(conn, log)
    return stats


def _odd_versions(conn: Any, log: FindingLog) -> None:
    """A v column that holds no integer: damage the quick check can see without the data."""
    sql = "SELECT record_id, seq, v FROM history WHERE typeof(v) != 'integer' ORDER BY record_id, seq"
    for record_id, seq, v in conn.execute(sql):
        log.add("row-column-mismatch", f"history record {record_id!r} seq {seq}: column v = {v!r} is not a"
                " version number", table="history", record_id=record_id, seq=seq)


_UNUSUAL_SQL = ("SELECT count(*) FROM history WHERE CASE WHEN v IS NOT ? THEN 1"
                + "".join(" WHEN type = ? THEN 0" for _ in ENTRY_TYPES) + " ELSE 1 END")
"""The rows that are not a current-version entry of a known type: ``(v = ? AND type IN (...))
IS NOT 1`` (a NULL counts as unusual), written as a CASE that stops at the first answer,
about half the instructions per row (quick mode's full read of history). ENTRY_TYPES
lists ``item``, the commonest, first."""


def _unknown_types(conn: Any, log: FindingLog) -> None:
    sql = ("SELECT record_id, seq, v, type FROM history WHERE v <= ? AND type NOT IN"
           f" ({', '.join('?' * len(ENTRY_TYPES))}) ORDER BY record_id, seq")
    for record_id, seq, v, kind in conn.execute(sql, (RECORD_FORMAT_VERSION, *ENTRY_TYPES)):
        log.add("record-unknown-type", f"history record {record_id!r} seq {seq}: unknown entry type {kind!r}"
                f" (v{v}); the entry is intact", table="history", record_id=record_id, seq=seq)


def version_findings(conn: Any, stats: RecordStats, log: FindingLog, *, users: bool = True) -> list[DowngradeRecord]:
    """Add the downgrade and legacy findings; return the downgrade triage, one per chat.

    ``users``: whether the sessions table can be read to name each chat's users.
    """
    downgrades = [_downgrade(conn if users else None, record_id, versions)
                  for record_id, versions in sorted(stats.newer.items(), key=lambda kv: str(kv[0]))]
    for d in downgrades:
        log.add("record-newer-version", _downgrade_message(d), hint=f"{d.remedy}. Tell the user: \"{d.tell_the_user}\"",
                table="history", record_id=d.record_id, seq=d.first_seq)
    for record_id, (count, first) in sorted(stats.legacy.items(), key=lambda kv: str(kv[0])):
        log.add("record-legacy-version", f"record {record_id!r}: {count} v1 entries (first at seq {first});"
                " read by upgrading in memory", table="history", record_id=record_id, seq=first)
    return downgrades


def _downgrade(conn: Any, record_id: str, versions: dict[int, list[int]]) -> DowngradeRecord:
    users = [] if conn is None else [u for (u,) in conn.execute(
        "SELECT DISTINCT user_id FROM sessions WHERE chat_id = ? ORDER BY user_id", (record_id,))]
    newest = max(versions)
    return DowngradeRecord(
        record_id=str(record_id), versions=sorted(versions), entries=sum(c for c, _ in versions.values()),
        first_seq=min(s for _, s in versions.values()), user_ids=users,
        remedy=f"upgrade the app to a build that reads record v{newest} (this build reads up to"
               f" v{RECORD_FORMAT_VERSION}); do not edit or delete the record",
    )


def _downgrade_message(d: DowngradeRecord) -> str:
    versions = ", ".join(f"v{v}" for v in d.versions)
    users = f" (user {', '.join(d.user_ids)})" if d.user_ids else ""
    entries = f"{d.entries} history {'entry' if d.entries == 1 else 'entries'}"
    return (f"chat {d.record_id!r}{users}: {entries} written by a newer build ({versions};"
            f" this build reads up to v{RECORD_FORMAT_VERSION}), first at seq {d.first_seq}. The record is intact"
            " and unmodified; it needs a newer build to be read")
