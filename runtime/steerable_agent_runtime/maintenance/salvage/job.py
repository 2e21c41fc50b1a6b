"""Salvage: every decodable row of a store to JSONL, also when SQLite refuses the file.

``salvage(path, out)`` only ever reads the source, so it stays byte-identical, and no file
appears beside it. A db file with no ``-wal`` content is read in place (SQLite with
``immutable=1``: no lock, nothing created; a big store needs no room for a copy); its
identity, size and times are compared again before the output is published, and when a
writer moved them the result is thrown away and salvage runs again from a copy. A store
with a ``-wal`` (and any ``--rebuild``) is copied, db and ``-wal``, into a private temp
directory first (re-copied when the source changed during the copy). Then:

- fast path: when the page reader finds no damage, SQLite opens the store read-only and
  ``quick_check`` passes, every entity table is read by SQLite itself and streamed to the
  output (in worker processes for a big store, :mod:`.parallel`); the page reader
  only adds freelist pages and the WAL frames that are not current. For a parallel export
  ``quick_check`` runs beside the workers instead of before them (:mod:`.verdict`); nothing
  is published unless it passed, and when it fails the attempt is made again with the check
  first, so the result is the one the check first gives;
- otherwise the page reader (:mod:`...sqlitefile.pages`, :mod:`...sqlitefile.btree`) walks the schema,
  every tree, the freelist, every page no tree reaches, and every WAL frame.

Every copy of every row goes to ``out`` as one JSON object:

- ``table``, ``key`` (the key column values), ``columns`` (every column but data),
  ``data`` (the stored JSON text; damaged UTF-8 replaced by U+FFFD);
- ``source``: ``btree`` (a live tree, or a file image a committed WAL frame replaced),
  ``unallocated`` (a page no tree reaches: its parent or the schema was lost),
  ``freelist`` (a freed page), ``wal`` (a WAL frame that is not its page's current image);
  ``page`` (null on the fast path) and ``frame`` (WAL frame index);
- ``committed``: false for WAL frames outside the committed WAL (uncommitted, torn, or left
  from an earlier WAL generation): such copies are reported, never mixed in;
- ``verified``: the stored CRC-32 matches the row's key columns and ``data``
  (storage.checksum.row_crc: one flipped byte in a key column fails it too). A store of
  schema version 1 has checksums over ``data`` alone: its rows are verified with that rule,
  the report's ``keys_covered`` is false and a warning finding says so; ``valid``: ``data`` validates against the current
  models / record version and the indexed columns agree with it;
- ``superseded``: another copy of the key won (the newest committed copy wins: live tree,
  then unallocated pages, then newer WAL frames, then a verified copy). Two verified
  newest copies with different data are a key collision: listed in ``collisions`` (an
  error finding) and never placed by rebuild.

``rebuild`` writes a fresh store from the newest verified copy of each key found on a live
or orphaned page (see :mod:`.output`); the rest is listed in the report. The
report's exit code is 0 only when nothing was damaged and every winning copy verified.

Raises NotAStoreError (missing, a directory, nothing SQLite-like in it, another
application's database), OutputExistsError (an output exists and ``force`` is False, or it
is the source), StoreAlreadyOwnedError (the rebuild target's lease is held: nothing is written),
DatabaseDamagedError (the store kept changing under three attempts). Never prints.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ...errors import DatabaseDamagedError, NotAStoreError, SteerableError
from ...privatefile import WRITE_ERRNOS
from ...sqlitefile.pinned import open_pinned
from ...storage.access import has_wal_content, wal_path
from ...storage.lease import WriteLease
from ...storage.specialfiles import refuse_special_files
from ...storage.schema import APPLICATION_ID
from ...storage.snapshot import Snapshot, SourceMoved, private_temp_base
from ...sqlitefile.damage import BENIGN
from ..codes import finding, salvage_code
from ..report import Finding, JobReport, Progress, no_progress
from .harvest import Tally, harvest_all, harvest_free
from .output import atomic_output, check_target, merge_tally, write_jsonl, write_store
from . import parallel
from .parallel import Unsound, export_live
from .verdict import BesideCheck
from .spool import Spool
from ...sqlitefile.pages import SqliteFile

UNPLACED_LISTED = 1000
"""At most this many unplaced rows are listed by key; ``unplaced_total`` counts them all."""


class TableTally(BaseModel):
    """Per table: copies found by source, keys recovered, and how their winning copies fared."""

    copies_by_source: dict[str, int] = {}
    keys: int = 0
    verified: int = 0
    unverified: int = 0
    invalid: int = 0
    superseded: int = 0
    uncommitted: int = 0


class UnplacedRow(BaseModel):
    """A key the rebuild could not place, and why."""

    table: str
    key: list[Any]
    reason: str


class SalvageReport(JobReport):
    """What salvage found, wrote and could not recover."""

    job: str = "salvage"
    out: str
    rebuild: str | None = None
    method: str = "page-reader"
    page_size: int = 0
    page_size_source: str = ""
    rows_written: int = 0
    tables: dict[str, TableTally] = {}
    damage: dict[str, int] = {}
    damaged_pages: dict[str, list[int]] = {}
    """Per damage code, the first page numbers it was found on (see sqlitefile.pages.NOTED_PAGES)."""
    unmatched_records: int = 0
    wal_frames: dict[str, int] = {}
    rebuilt: dict[str, int] = {}
    unplaced: list[UnplacedRow] = []
    unplaced_total: int = 0
    schema_version: int | None = None
    """The store's schema version (its header's; None when the header is lost)."""
    keys_covered: bool = True
    """Whether the store's checksums cover the key columns (schema version 2 and later)."""
    collisions: list[UnplacedRow] = []
    """Keys whose newest committed copies include two verified ones that disagree (at most
    UNPLACED_LISTED; ``collisions_total`` counts them all)."""
    collisions_total: int = 0
    sqlite_check: list[str] = []
    """What SQLite said of the file when it refused it or its ``quick_check`` failed (one line
    each, at most spool.CHECK_LINES); empty when SQLite found it sound or was not asked."""
    pages_read: int = 0
    """Page images the page reader read (database file and -wal): at most a few per page of
    the files whatever they hold (each page is read at most once per walk)."""
    history_gaps: dict[str, int] = {}
    """Page-reader path: per history record whose recovered entries are not contiguous from
    seq 1, how many are missing between them (at most UNPLACED_LISTED records)."""

    @property
    def complete(self) -> bool:
        """True when nothing was damaged and every recovered key has a verified winner."""
        return not self.has_errors


def salvage(path: str | os.PathLike[str], out: str | os.PathLike[str], *, rebuild: str | os.PathLike[str] | None = None,
            force: bool = False, progress: Progress | None = None) -> SalvageReport:
    """Salvage the store at ``path`` into the JSONL file ``out`` (and a fresh store ``rebuild``)."""
    source = _check_source(Path(path))
    out_path = check_target(out, force=force, source=source)
    rebuild_path = check_target(rebuild, force=force, source=source) if rebuild is not None else None
    step = progress or no_progress
    try:
        # The rebuild target's lease is taken first: when another process holds it, nothing
        # is written, not even the JSONL export.
        with WriteLease(rebuild_path) if rebuild_path is not None else nullcontext():
            return _attempts(source, out_path, rebuild_path, force, step)
    except (sqlite3.OperationalError, OSError) as exc:  # writing salvage's own files: the source is only read
        if not _disk_trouble(exc):
            raise
        raise SteerableError(f"salvage cannot write its work files: {getattr(exc, 'strerror', None) or exc};"
                             " nothing was published", path=str(source),
                             hint="free space in the temp directory (or point TMPDIR elsewhere) and where the"
                                  " output goes") from exc


def _disk_trouble(exc: BaseException) -> bool:
    """A full, failing or read-only disk (OSError WRITE_ERRNOS, SQLite FULL/IOERR), not a bug."""
    if isinstance(exc, sqlite3.Error):
        return exc.sqlite_errorname == "SQLITE_FULL" or exc.sqlite_errorname.startswith("SQLITE_IOERR")
    return isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS


def _attempts(source: Path, out_path: Path, rebuild_path: Path | None, force: bool, step: Progress) -> SalvageReport:
    for attempt in range(_ATTEMPTS):
        # In place (no copy: a big store needs no twice its size in free space) only the
        # first time, and only for a lone db file (the -wal needs SQLite's WAL reader, which
        # needs a copy to stay read-only) and a JSONL export (one output to hold back).
        in_place = attempt == 0 and rebuild_path is None and not has_wal_content(source)
        with tempfile.TemporaryDirectory(prefix="steerable-salvage-", dir=private_temp_base(source)) as tmp:
            try:
                snapshot = Snapshot.in_place(source) if in_place else Snapshot.private_copy(source, Path(tmp), name="store.db")
                report = _run(_Job(source, snapshot, Path(tmp), out_path, rebuild_path, force, step))
            except SourceMoved:
                continue  # a writer changed the store meanwhile: nothing was published; again, from a copy
        report.findings = _findings(report)
        return report
    raise DatabaseDamagedError(f"{source}: the store kept changing while it was being salvaged", path=str(source),
                               hint="stop the app for a moment and re-run salvage")


_ATTEMPTS = 3


def _run(job: _Job) -> SalvageReport:
    try:
        return job.run(fast=True, beside=True)
    except (_NotBeside, _FastPathFailed):
        pass  # nothing was published: the attempt again, SQLite's check first (as if it had not been tried)
    try:
        return job.run(fast=True)
    except _FastPathFailed:
        # quick_check passed but a full read did not: nothing was published; start over
        # with the page reader, and count it as damage.
        report = job.run(fast=False)
        report.damage["sqlite_read_failed"] = 1
        return report


class _FastPathFailed(Exception):
    """SQLite failed while reading a copy its quick_check had passed."""


class _NotBeside(Exception):
    """The attempt with SQLite's check beside the export is not taken (not a parallel export,
    or the page reader saw damage), or the check failed: the export is thrown away."""


class _Job:
    """One salvage attempt over a snapshot: collect, export, rebuild."""

    def __init__(self, source: Path, snapshot: Snapshot, tmp: Path, out: Path, rebuild: Path | None,
                 force: bool, step: Progress) -> None:
        self.source, self.snapshot, self.tmp = source, snapshot, tmp
        self.out, self.rebuild, self.force, self.step = out, rebuild, force, step

    def run(self, *, fast: bool, beside: bool = False) -> SalvageReport:
        """Run once (``fast``: SQLite may read a sound store); raises _FastPathFailed, SourceMoved.

        ``beside``: the fast path with SQLite's quick_check run beside a parallel export
        instead of before it (see :mod:`.verdict`); raises _NotBeside when that is not taken
        or the check fails, and _FastPathFailed only after the check passed: in either case
        nothing was published, and the caller runs the attempt again without ``beside``."""
        report = SalvageReport(path=str(self.source), out=str(self.out), rebuild=str(self.rebuild) if self.rebuild else None)
        spool = Spool(self.tmp / f"spool-{int(fast)}{'-beside' if beside else ''}.db")
        try:
            try:
                check = _collect(self.snapshot, spool, report, self.step, fast=fast, beside=beside)
            except (SourceMoved, _NotBeside):
                raise
            except Exception as exc:  # SQLite read a file it has not checked yet: no verdict on it
                if not beside:
                    raise
                raise _NotBeside() from exc
            _export(spool, self.snapshot, self.out, report, self.force, self.step, check)
            if self.rebuild is not None:
                self.step("rebuild", 0, None)
                report.rebuilt = write_store(spool, self.rebuild, force=self.force, on_unplaced=_unplaced_sink(report))
        finally:
            spool.close()
        return report


def _check_source(path: Path) -> Path:
    refuse_special_files(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotAStoreError(f"{path}: no such file", path=str(path), hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"{path}: not a regular file", path=str(path), hint="pass the database file itself")
    if st.st_size == 0 and not wal_path(path).exists():
        raise NotAStoreError(f"{path}: empty file and no -wal beside it; nothing to salvage", path=str(path),
                             hint="pass the app's database file")
    for name in (path, wal_path(path)):
        try:
            with open_pinned(name):  # readable? (a plain close would drop this process's SQLite locks)
                pass
        except FileNotFoundError:
            pass  # no -wal
        except OSError as exc:
            raise NotAStoreError(f"{name}: cannot read: {exc.strerror}", path=str(path),
                                 hint="run as the user that owns the file, or copy it somewhere readable") from exc
    return path


def _collect(snapshot: Snapshot, spool: Spool, report: SalvageReport, step: Progress, *, fast: bool,
             beside: bool = False) -> BesideCheck | None:
    """Fill the spool: SQLite for a sound store, the page reader for everything else.
    ``beside``: SQLite's quick_check is not run here but returned, for the export to run
    beside its workers (raises _NotBeside when the fast path would not be taken without it,
    or the export would not be parallel)."""
    step("read", 0, None)
    check = None
    with SqliteFile(snapshot.db, snapshot.wal) as pages:
        _refuse_foreign(pages, report)
        report.page_size, report.page_size_source = pages.page_size, pages.page_size_source
        if pages.header.magic_ok:
            report.schema_version = spool.version = pages.header.user_version
        report.keys_covered = spool.keyed
        tally = Tally()
        problems = _sqlite_open(pages, spool, snapshot) if beside else _sqlite_check(pages, spool, snapshot)
        if beside and (problems != [] or set(pages.damage) - BENIGN):
            raise _NotBeside()
        if fast and problems == [] and not set(pages.damage) - BENIGN:
            report.method = "sqlite"
            with _fast_path():
                spool.live_tables = spool.source_tables()
                if beside:
                    # (the spans by seeks: their scan, a test of the file, runs in the check)
                    if parallel.worker_count(parallel.live_rows(spool, seeks=True)) == 1:
                        raise _NotBeside()
                    check = BesideCheck(spool.src_uri, {t: spool.rowid_span(t) for t in spool.live_tables})
                harvest_free(pages, spool, tally, scan_loose=False)
                spool.mark_live()
        else:
            if problems == []:
                spool.detach()  # sound to SQLite, but the page reader saw damage: it reads everything
            harvest_all(pages, spool, tally, lambda done, total: step("scan pages", done, total))
        report.damage = dict(pages.damage)
        report.damaged_pages = {code: sorted(p) for code, p in pages.damaged_pages.items() if p}
        if tally.missing_roots:
            report.damage["schema_table_missing"] = tally.missing_roots
        for code, line in problems or ():
            report.damage[code] = report.damage.get(code, 0) + 1
            report.sqlite_check.append(line)
        report.unmatched_records = tally.unmatched_records
        report.pages_read = pages.pages_read
        if pages.wal is not None:
            report.wal_frames = {s: sum(f.state == s for f in pages.wal.frames) for s in ("committed", "uncommitted", "invalid")}
    spool.finish()
    if not spool.live_tables:  # the page reader's harvest: entries lost between the ones found?
        gaps = spool.history_gaps()
        if gaps:
            report.damage["history_seq_gap"] = len(gaps)
            report.history_gaps = dict(gaps[:UNPLACED_LISTED])
    clashes = sorted(spool.collisions())
    report.collisions_total = len(clashes)
    report.collisions = [UnplacedRow(table=t, key=json.loads(k), reason="verified copies with different data")
                         for t, k in clashes[:UNPLACED_LISTED]]
    return check


@contextmanager
def _fast_path() -> Iterator[None]:
    """Turn a failure of SQLite reading the copy into _FastPathFailed (the error message
    may quote damaged bytes, hence UnicodeDecodeError)."""
    try:
        yield
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL":
            raise  # the spool's disk is full: not damage in the source (salvage() reports it)
        raise _FastPathFailed(str(exc)) from exc


def _sqlite_check(pages: SqliteFile, spool: Spool, snapshot: Snapshot) -> list[tuple[str, str]] | None:
    """SQLite's own verdict on the snapshot (Spool.attach_readonly: [] sound and attached as
    ``src``, else the problems); None when SQLite is not asked: the header is lost, or the
    db file is empty (mode=ro never changes the copy's bytes, except that a 0-byte db makes
    SQLite drop the -wal, DESIGN.md; the page reader reads it instead)."""
    if not pages.header.magic_ok or pages.file_size == 0:
        return None
    return spool.attach_readonly(snapshot.uri)


def _sqlite_open(pages: SqliteFile, spool: Spool, snapshot: Snapshot) -> list[tuple[str, str]] | None:
    """_sqlite_check without the quick_check (the caller takes it beside the export)."""
    if not pages.header.magic_ok or pages.file_size == 0:
        return None
    return spool.attach_readonly(snapshot.uri, check=False)


def _refuse_foreign(pages: SqliteFile, report: SalvageReport) -> None:
    hdr = pages.header
    if hdr.magic_ok and hdr.application_id not in (0, APPLICATION_ID):
        raise NotAStoreError(f"{report.path}: a SQLite database of another application "
                             f"(application_id {hdr.application_id:#x}), not a steerable store", path=report.path,
                             hint="pass the steerable store (the app's sessions database)")
    if not hdr.magic_ok and pages.page_size_source == "default":
        raise NotAStoreError(f"{report.path}: no SQLite header and no SQLite page found in it", path=report.path,
                             hint="pass the app's database file (or its copy)")


def _export(spool: Spool, snapshot: Snapshot, out: Path, report: SalvageReport, force: bool, step: Progress,
            check: BesideCheck | None = None) -> None:
    step("export", 0, None)
    with atomic_output(out, force=force) as (_tmp, fh):
        with _fast_path():
            try:
                tally = export_live(spool, spool.src_uri, fh, lambda done: step("export", done, None), check=check)
            except Unsound:
                raise _NotBeside() from None
        merge_tally(tally, write_jsonl(spool, fh, lambda done: step("export", done, None), live=False))
        snapshot.unchanged()  # before publishing: an overtaken in-place read is thrown away
    for (table, source), (copies, superseded, uncommitted, keys, verified, invalid) in sorted(tally.items()):
        t = report.tables.setdefault(table, TableTally())
        t.copies_by_source[source] = copies
        t.superseded += superseded
        t.uncommitted += uncommitted
        t.keys += keys
        t.verified += verified
        t.unverified += keys - verified
        t.invalid += invalid
        report.rows_written += copies


def _unplaced_sink(report: SalvageReport):  # noqa: ANN202 - a small closure
    def sink(table: str, key: list[Any], reason: str) -> None:
        report.unplaced_total += 1
        if len(report.unplaced) < UNPLACED_LISTED:
            report.unplaced.append(UnplacedRow(table=table, key=key, reason=reason))
    return sink




def _on_pages(pages: list[int]) -> str:
    if not pages:
        return ""
    shown = ", ".join(str(p) for p in pages[:10])
    return f" (page {shown}{', ...' if len(pages) > 10 else ''})"


def _damage_finding(report: SalvageReport, code: str, count: int) -> Finding:
    where = _on_pages(report.damaged_pages.get(code, []))
    message = f"{count} x {code.replace('_', ' ')}{where}"
    if code == "sqlite_check_failed":
        message = f"SQLite: {report.sqlite_check[0]}" + (f" (and {count - 1} more)" if count > 1 else "")
    elif code == "history_seq_gap":
        shown = ", ".join(f"{record} ({missing} missing)" for record, missing in list(report.history_gaps.items())[:5])
        message = f"{count} history records have entries missing between the recovered ones: {shown}"
    return finding(salvage_code(code), message)


def _findings(report: SalvageReport) -> list[Finding]:
    found = [_damage_finding(report, code, count) for code, count in sorted(report.damage.items())]
    if report.unmatched_records:
        found.append(finding("salvage-unmatched-records", f"{report.unmatched_records} records matched no table"))
    for table, tally in sorted(report.tables.items()):
        if tally.unverified:
            found.append(finding("salvage-unverified-rows", table=table,
                                 message=f"{tally.unverified} of {tally.keys} {table} rows fail their checksum"))
    if not report.keys_covered:
        found.append(finding("salvage-keys-not-covered",
                             f"schema version {report.schema_version}: checksums cover data only, so a"
                             " damaged key column (the chat of an entry, the trace of a span) cannot be detected"))
    if report.collisions_total:
        shown = ", ".join(f"{c.table} {c.key}" for c in report.collisions[:5])
        found.append(finding("salvage-key-collision",
                             f"{report.collisions_total} keys have verified copies that disagree ({shown})"))
    if report.unplaced_total:
        found.append(finding("salvage-unplaced-rows",
                             f"{report.unplaced_total} rows were not placed in the rebuilt store"))
    return found
