"""history: a chat's record as stored (every entry with its version) or the transcript resume gives.

The runtime's read path fails closed on an entry it cannot read and stays that way; this
view does its own tolerant read over the rows instead. Every entry is verified (CRC-32,
JSON) and then read with the runtime's own ``parse_entry``; an entry that does not pass is
shown with what can be told about it (seq, stored v and type, the reason) and named in
``unreadable``, and the other entries are still shown.

Resume (``resume=True``) follows ``resume_transcript``: from the newest checkpoint
(``compaction_boundary`` or ``seed``, found through the same partial index) to the tail.
Entries before the checkpoint are not read. At the first unreadable entry of that tail the
transcript stops: ``resume_blocked_at`` names it, because the app's resume fails there.

Guarantees: reads through :func:`read_store` (no lease, no byte changed, no file
created). Raises UsageError when the chat has no record and no session, SchemaTooNewError
for a newer schema, and what ``open_readonly`` raises for a file that is not a store.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import BaseModel

from ..errors import RecordFormatError, UsageError
from ..history import parse_entry, transcript_from
from ..storage.checksum import store_checker
from ..storage.schema import CHECKPOINT_WHERE
from .codes import FindingLog
from .readonly import ReadOnlyConnection, read_store
from .report import JobReport, Progress, no_progress

_UNREADABLE_HINT = ("the app cannot read this entry and fails closed on it; run `steerable-maint check DB` for the"
                    " triage (a newer version means: upgrade the app; the record was not modified)")


class EntryView(BaseModel):
    """One stored entry: where it is, its version and type, and whether this build reads it.

    ``entry`` is the stored JSON object when it decodes (also for an unreadable entry: what
    can be shown of it, not validated); None when its bytes fail the checksum or are not JSON.
    """

    seq: int
    v: Any
    type: Any
    at: Any
    readable: bool
    problem: str | None = None
    entry: dict[str, Any] | None = None


class HistoryReport(JobReport):
    """The record of ``record_id``: entries (or the resume transcript) and what could not be read."""

    job: str = "history"
    record_id: str
    resume: bool = False
    entries: list[EntryView] = []
    unreadable: list[int] = []
    checkpoint_seq: int | None = None
    transcript: list[dict[str, Any]] | None = None
    resume_blocked_at: int | None = None


def history(path: str | os.PathLike[str], record_id: str, *, resume: bool = False,
            progress: Progress | None = None) -> HistoryReport:
    """Show the record of chat ``record_id`` (see the module docstring)."""
    tick, log = progress or no_progress, FindingLog(max_per_code=1000)

    def read(conn: ReadOnlyConnection) -> HistoryReport:
        report = HistoryReport(path=str(path), record_id=record_id, resume=resume)
        _refuse_unknown_chat(conn, record_id)
        if resume:
            report.checkpoint_seq = conn.execute(
                f"SELECT max(seq) FROM history WHERE record_id = ? AND {CHECKPOINT_WHERE}", (record_id,)).fetchone()[0]
        report.entries = _read(conn, record_id, report.checkpoint_seq or 0, tick)
        return report

    report = read_store(path, read)
    report.unreadable = [e.seq for e in report.entries if not e.readable]
    for entry in report.entries:
        if not entry.readable:
            log.add("record-unreadable-entry", str(entry.problem),
                    hint=_UNREADABLE_HINT, table="history", record_id=record_id, seq=entry.seq)
    if resume:
        _resume(report)
    report.findings = log.findings
    return report


def _refuse_unknown_chat(conn: ReadOnlyConnection, record_id: str) -> None:
    known = conn.execute("SELECT EXISTS (SELECT 1 FROM history WHERE record_id = ?)"
                         " OR EXISTS (SELECT 1 FROM sessions WHERE chat_id = ?)", (record_id, record_id)).fetchone()[0]
    if not known:
        raise UsageError(f"no history record and no session for chat {record_id!r}",
                         hint="check the chat id; `steerable-maint search DB WORDS` finds chats by what was said")


def _read(conn: ReadOnlyConnection, record_id: str, from_seq: int, tick: Progress) -> list[EntryView]:
    sql = ("SELECT seq, v, type, at, CAST(data AS BLOB), crc, CAST(record_id AS BLOB) FROM history"
           " WHERE record_id = ? AND seq >= ? ORDER BY seq")
    views = []
    ok = store_checker(conn)
    for done, (seq, v, kind, at, data, crc, rid) in enumerate(conn.execute(sql, (record_id, from_seq))):
        if not done % 1024:
            tick("entries", done, None)
        views.append(_view(record_id, seq, v, kind, at, data, crc if ok("history", (rid, seq), data, crc) else None))
    return views


def _view(record_id: str, seq: int, v: Any, kind: Any, at: Any, data: bytes | None, crc: int | None) -> EntryView:
    """``crc`` is None when the row failed its checksum."""
    base = {"seq": seq, "v": v, "type": kind, "at": at}
    if data is None or crc is None:
        return EntryView(**base, readable=False, problem=f"record {record_id!r} seq {seq}: stored bytes do not match"
                         " their CRC-32 (silent corruption)")
    try:
        raw = json.loads(data)
    except ValueError:
        return EntryView(**base, readable=False,
                         problem=f"record {record_id!r} seq {seq}: stored entry is not valid JSON")
    if isinstance(raw, dict):
        base.update(v=raw.get("v", 1), type=raw.get("type", kind))
    shown = raw if isinstance(raw, dict) else None
    try:
        parse_entry(raw, record_id=record_id)
    except RecordFormatError as exc:
        return EntryView(**base, readable=False, problem=exc.message, entry=shown)
    return EntryView(**base, readable=True, entry=shown)


def _resume(report: HistoryReport) -> None:
    """The transcript resume gives, up to the first entry it cannot read."""
    readable: list[dict[str, Any]] = []
    for view in report.entries:
        if not view.readable:
            report.resume_blocked_at = view.seq
            break
        readable.append(view.entry)
    report.transcript = [m.to_wire() for m in transcript_from(readable, record_id=report.record_id)]
