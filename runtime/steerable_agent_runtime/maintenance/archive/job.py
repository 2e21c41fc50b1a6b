"""archive and restore: move whole chats between a store and an archive store.

The unit is a whole chat (see chatmove). The archive is itself a valid store (created 0600
with the store schema, WAL, FULL sync) that SqliteStorage and check open; runs append to it.

archive guarantees:
- A chat moves only if none of its sessions is active (unless ``include_active``) and
  nothing of it is at or after the cutoff: session ``updated_at``, message ``created_at``,
  history ``at``, trace ``started_at`` are all strictly older.
- Chats are visited in chat-id order in pages of ``batch_size`` (memory bounded by the page,
  never by the store); the eligible chats of a page move as one batch, copy -> verify ->
  commit the archive -> delete from the store (chatmove.move_batch). A kill at any point
  loses nothing; a re-run converges.
- A chat that stays (active or recent) but of which the archive holds rows byte-identical
  to the store's (a run killed between commit and delete, then the app touched the chat)
  has those archive copies removed (``leftover_copies_removed``); differing rows are kept
  (if the app changed such a row, e.g. a session's ``updated_at``, the archive keeps the
  old version and the chat reports ``archive-conflict`` once it is idle again).
- A chat with a row in both files that differs is a conflict: it stays whole in the store,
  nothing of it is added to the archive, an ``archive-conflict`` error finding names the
  table and key (exit 1), and the other chats still move.
- Both leases are taken (store first, then archive) before SQLite opens either file.
  A target that exists and is not a store -> NotAStoreError; a newer schema ->
  SchemaTooNewError; a held lease -> StoreAlreadyOwnedError naming the pid. All exit 3,
  nothing changed.
- ``dry_run`` returns the same report with what would move; it creates no archive and
  changes no byte of either file.

restore moves one chat back the same way (archive -> store) with the same guarantees.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from ...errors import DatabaseDamagedError, UsageError
from .chatmove import (BatchResult, RowCounts, chats_in_destination, count_rows, drop_leftover_copies, load_batch,
                        move_batch, prepare)
from ..duration import cutoff_timestamp
from ..codes import finding
from ..report import Finding, JobReport, Progress, no_progress
from ...storage.schema import TABLES
from ...storage.access import (FileProbe, attach, connection, create_store, held, probe, refuse_damaged,
                               refuse_same_store)

_CHAT_KEYS = tuple((name, spec.chat_column) for name, spec in TABLES.items() if spec.chat_column)
"""The tables that name a chat, with the column that does (the others belong to it through a trace)."""

_NEWEST = (
    "WITH page(chat_id) AS (SELECT value FROM json_each(?))\nSELECT chat_id,\n"
    "  EXISTS (SELECT 1 FROM main.sessions s WHERE s.chat_id = page.chat_id AND s.is_active = 1),\n  max("
    + ",\n      ".join(f"coalesce((SELECT max({TABLES[t].newest}) FROM main.{t} WHERE {c} = page.chat_id), '')"
                       for t, c in _CHAT_KEYS)
    + ")\nFROM page ORDER BY chat_id\n")
"""Per chat of a page: whether a session is active, and its newest write in any table."""


class ArchiveReport(JobReport):
    """What archive moved (or, for a dry run, would move) and what it left, with reasons."""

    job: str = "archive"
    archive: str
    cutoff: str
    include_active: bool = False
    archive_created: bool = False
    batches: int = 0
    chats_moved: int = 0
    chats_skipped: dict[str, int] = {"active": 0, "recent": 0, "conflict": 0}
    rows_moved: RowCounts = RowCounts()
    rows_already_in_archive: RowCounts = RowCounts()
    staying_chats_in_archive: int = 0
    leftover_copies_removed: RowCounts = RowCounts()
    """Rows of chats that stay in the store which an interrupted earlier run had already
    copied (byte-identical to the store's row): removed from the archive, so each row is in
    one file. Archive rows that differ from the store's are never removed."""


class RestoreReport(JobReport):
    """What restore moved back from the archive (``path``) into ``target``."""

    job: str = "restore"
    target: str
    chat_id: str
    restored: bool = False
    rows_moved: RowCounts = RowCounts()
    rows_already_in_target: RowCounts = RowCounts()


@contextmanager
def _claimed(path: str | os.PathLike[str], *, create: bool, readonly: bool) -> Iterator[FileProbe | None]:
    """Claim the destination ``path`` (probe, refuse, lease) before SQLite opens the source, so
    a refused destination leaves the source unopened (a writable open and close of the source
    would checkpoint its -wal). Yields None in a dry run whose archive does not exist yet:
    it is neither created, nor locked, nor attached."""
    if readonly and not Path(path).exists():
        probe(path, allow_missing=True)  # still refuse a path whose directory is missing
        yield None
        return
    # claim refuses a newer schema still in its -wal (for a writer) before the source opens
    with held(path, write=not readonly, allow_missing=create) as found:
        yield found


@contextmanager
def _destination(conn: sqlite3.Connection, path: str | os.PathLike[str], found: FileProbe | None, *,
                 readonly: bool) -> Iterator[bool]:
    """Create the claimed destination if missing, ATTACH it as ``dst``; yields whether it was
    created (False, and no ``dst``, for an unclaimed dry-run archive)."""
    if found is None:
        yield False
        return
    if not found.exists:
        create_store(path)
    attach(conn, path, "dst", readonly=readonly)
    try:
        yield not found.exists
    finally:
        conn.execute("DETACH DATABASE dst")


def _probe_both(path: str | os.PathLike[str], to: str | os.PathLike[str], *, create: bool) -> None:
    """Probe both stores before either lease is taken: a refused second file must not leave
    the first one's lock file behind (a refused job leaves the folder as it was)."""
    probe(path)
    probe(to, allow_missing=create)


def archive(path: str | os.PathLike[str], *, to: str | os.PathLike[str], older_than: timedelta,
            include_active: bool = False, now: datetime | None = None, dry_run: bool = False,
            batch_size: int = 200, progress: Progress | None = None) -> ArchiveReport:
    """Move chats idle past ``now - older_than`` from ``path`` into the archive ``to``; see module doc."""
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, not {batch_size}", hint="pass a positive batch size")
    report = ArchiveReport(path=str(path), archive=str(to), dry_run=dry_run, include_active=include_active,
                           cutoff=cutoff_timestamp(older_than, now))
    refuse_same_store(path, to)
    _probe_both(path, to, create=True)
    progress = progress or no_progress
    # Both files are claimed (probed, refused, leased) before SQLite opens either.
    with held(path, write=not dry_run), _claimed(to, create=True, readonly=dry_run) as found, \
            connection(path, readonly=dry_run) as conn:
        refuse_damaged(conn, path, "archive")  # before the archive file is made or any row copied
        with _destination(conn, to, found, readonly=dry_run) as created:
            _archive_chats(conn, report, batch_size, created, dry_run, progress)
    return report


def _archive_chats(conn: sqlite3.Connection, report: ArchiveReport, batch_size: int, created: bool,
                   dry_run: bool, progress: Progress) -> None:
    """Every page of chats: the eligible ones moved, leftovers of earlier runs dropped."""
    report.archive_created = created
    prepare(conn)
    for page in _chat_pages(conn, batch_size):
        eligible = _eligible(conn, page, report)
        if eligible:
            _archive_batch(conn, eligible, report)
        if not dry_run and not created:
            _drop_leftovers(conn, sorted(set(page) - set(eligible)), report)
        progress("archive chats", report.chats_moved, None)


def _chat_pages(conn: sqlite3.Connection, size: int) -> Iterator[list[str]]:
    """Every chat id of the source, ascending, ``size`` at a time (keyset paging, via the indexes)."""
    after: str | None = None
    while True:
        found: set[str] = set()
        for table, col in _CHAT_KEYS:
            where, args = (f"WHERE {col} > ?", (after, size)) if after is not None else ("", (size,))
            sql = f"SELECT DISTINCT {col} FROM main.{table} {where} ORDER BY {col} LIMIT ?"
            found.update(row[0] for row in conn.execute(sql, args))
        page = sorted(found)[:size]
        if not page:
            return
        yield page
        after = page[-1]


def _eligible(conn: sqlite3.Connection, page: list[str], report: ArchiveReport) -> list[str]:
    """The chats of ``page`` that may move; counts the others in ``report.chats_skipped``."""
    eligible = []
    for chat_id, active, newest in conn.execute(_NEWEST, (json.dumps(page),)):
        if active and not report.include_active:
            report.chats_skipped["active"] += 1
        elif not isinstance(newest, str):
            raise DatabaseDamagedError(
                f"chat {chat_id!r}: a timestamp column holds a {type(newest).__name__} value, not text:"
                " archive cannot tell whether the chat is idle; nothing of it was moved",
                hint="run `steerable-maint check DB` to find the rows, then `steerable-maint repair DB`")
        elif newest >= report.cutoff:
            report.chats_skipped["recent"] += 1
        else:
            eligible.append(chat_id)
    return eligible


def _archive_batch(conn: sqlite3.Connection, chats: list[str], report: ArchiveReport) -> None:
    """Move (or count, in a dry run) one batch; on a conflict retry chat by chat to isolate it."""
    report.batches += 1
    if report.dry_run:
        load_batch(conn, chats)
        report.rows_moved.add(count_rows(conn))
        report.chats_moved += len(chats)
        return
    result = move_batch(conn, chats)
    if result.conflict is None:
        _record(report, result, len(chats))
        return
    for chat_id in chats:
        single = move_batch(conn, [chat_id]) if len(chats) > 1 else result
        if single.conflict is None:
            _record(report, single, 1)
        else:
            report.chats_skipped["conflict"] += 1
            report.findings.append(_conflict_finding(single, chat_id, str(report.archive)))


def _drop_leftovers(conn: sqlite3.Connection, staying: list[str], report: ArchiveReport) -> None:
    """Remove from the archive identical copies of chats that stay (an interrupted earlier run)."""
    leftovers = chats_in_destination(conn, staying) if staying else []
    if leftovers:
        report.staying_chats_in_archive += len(leftovers)
        report.leftover_copies_removed.add(drop_leftover_copies(conn, leftovers))


def _record(report: ArchiveReport, result: BatchResult, chats: int) -> None:
    report.chats_moved += chats
    report.rows_moved.add(result.moved)
    report.rows_already_in_archive.add(result.already)


def _conflict_finding(result: BatchResult, chat_id: str, other: str) -> Finding:
    conflict = result.conflict
    assert conflict is not None
    return finding(
        "archive-conflict", table=conflict.table, record_id=chat_id, key=conflict.key,
        message=f"chat {chat_id!r}: {conflict.table} row {conflict.key!r} is in both files with different bytes;"
                " the chat was not moved and nothing was overwritten",
        hint=f"compare the chat in both files (`steerable-maint history` on each, {other}); "
             "move or delete one copy by hand, then re-run")


def restore(archive_path: str | os.PathLike[str], *, to: str | os.PathLike[str], chat_id: str,
            progress: Progress | None = None) -> RestoreReport:
    """Move one chat from the archive back into the store ``to``; see module doc.

    Raises UsageError when neither file holds the chat; if only ``to`` holds it (a re-run
    after a finished restore) the report says so and nothing changes.
    """
    refuse_same_store(archive_path, to)
    _probe_both(archive_path, to, create=False)
    report = RestoreReport(path=str(archive_path), target=str(to), chat_id=chat_id)
    progress = progress or no_progress
    with held(archive_path, write=True), _claimed(to, create=False, readonly=False) as found, \
            connection(archive_path, readonly=False) as conn, _destination(conn, to, found, readonly=False):
        prepare(conn)
        if _holds_chat(conn, "main", chat_id):
            _restore_chat(conn, report)
        elif _holds_chat(conn, "dst", chat_id):
            report.findings.append(_already_restored(report))
        else:
            raise UsageError(f"chat {chat_id!r} is in neither {archive_path} nor {to}", path=str(archive_path),
                             hint="check the chat id; `steerable-maint search ARCHIVE.db WORDS` finds archived chats")
        progress("restore chat", 1, 1)
    return report


def _restore_chat(conn: sqlite3.Connection, report: RestoreReport) -> None:
    result = move_batch(conn, [report.chat_id])
    if result.conflict is not None:
        report.findings.append(_conflict_finding(result, report.chat_id, report.target))
        return
    report.restored = True
    report.rows_moved = result.moved
    report.rows_already_in_target = result.already


def _holds_chat(conn: sqlite3.Connection, schema: str, chat_id: str) -> bool:
    return any(conn.execute(f"SELECT 1 FROM {schema}.{table} WHERE {col} = ? LIMIT 1", (chat_id,)).fetchone()
               for table, col in _CHAT_KEYS)


def _already_restored(report: RestoreReport) -> Finding:
    return finding("restore-already-restored", record_id=report.chat_id,
                   message=f"chat {report.chat_id!r} is not in the archive and is already in {Path(report.target).name}")
