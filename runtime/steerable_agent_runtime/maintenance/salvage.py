"""Salvage: every decodable row of a store to JSONL, also when SQLite refuses the file.

``salvage(path, out)`` copies the database and its ``-wal`` into a private temp directory
(the source is only ever read, so it stays byte-identical, and no file appears beside it),
then:

- fast path: when the page reader finds no damage, SQLite opens the copy read-only and
  ``quick_check`` passes, every entity table is read by SQLite itself and streamed to the
  output (in worker processes for a big store, :mod:`.salvage_parallel`); the page reader
  only adds freelist pages and the WAL frames that are not current;
- otherwise the page reader (:mod:`.sqlite_format`, :mod:`.btree_reader`) walks the schema,
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
- ``verified``: the stored CRC-32 matches ``data`` (storage.schema.row_checksum; key
  columns are not covered by it); ``valid``: ``data`` validates against the current
  models / record version and the indexed columns agree with it;
- ``superseded``: another copy of the key won (the newest committed copy wins: live tree,
  then unallocated pages, then newer WAL frames, then a verified copy).

``rebuild`` writes a fresh store from the newest verified copy of each key found on a live
or orphaned page (see :mod:`.salvage_output`); the rest is listed in the report. The
report's exit code is 0 only when nothing was damaged and every winning copy verified.

Raises NotAStoreError (missing, a directory, nothing SQLite-like in it, another
application's database), OutputExistsError (an output exists and ``force`` is False, or it
is the source), StoreAlreadyOwnedError (the rebuild target's lease is held). Never prints.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import NotAStoreError
from ..storage.schema import APPLICATION_ID
from .report import Finding, JobReport, Progress, no_progress
from .salvage_harvest import Tally, harvest_all, harvest_free
from .salvage_output import atomic_output, check_target, merge_tally, write_jsonl, write_store
from .salvage_parallel import export_live
from .salvage_spool import Spool
from .sqlite_format import SqliteFile

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
    """Per damage code, the first page numbers it was found on (see sqlite_format.NOTED_PAGES)."""
    unmatched_records: int = 0
    wal_frames: dict[str, int] = {}
    rebuilt: dict[str, int] = {}
    unplaced: list[UnplacedRow] = []
    unplaced_total: int = 0

    @property
    def complete(self) -> bool:
        """True when nothing was damaged and every recovered key has a verified winner."""
        return not self.has_errors


def salvage(path: str | os.PathLike[str], out: str | os.PathLike[str], *, rebuild: str | os.PathLike[str] | None = None,
            force: bool = False, progress: Progress | None = None) -> SalvageReport:
    """Salvage the store at ``path`` into the JSONL file ``out`` (and a fresh store ``rebuild``)."""
    source = _check_source(Path(path))
    sources = [source, Path(f"{source}-wal")]
    out_path = check_target(out, force=force, sources=sources)
    rebuild_path = check_target(rebuild, force=force, sources=sources) if rebuild is not None else None
    step = progress or no_progress
    with tempfile.TemporaryDirectory(prefix="steerable-salvage-") as tmp:
        db, wal = _private_copy(source, Path(tmp))
        job = _Job(source, db, wal, Path(tmp), out_path, rebuild_path, force, step)
        try:
            report = job.run(fast=True)
        except _FastPathFailed:
            # quick_check passed but a full read did not: nothing was published; start
            # over with the page reader, and count it as damage.
            report = job.run(fast=False)
            report.damage["sqlite_read_failed"] = 1
    report.findings = _findings(report)
    return report


class _FastPathFailed(Exception):
    """SQLite failed while reading a copy its quick_check had passed."""


class _Job:
    """One salvage attempt over the private copy: collect, export, rebuild."""

    def __init__(self, source: Path, db: Path, wal: Path | None, tmp: Path, out: Path, rebuild: Path | None,
                 force: bool, step: Progress) -> None:
        self.source, self.db, self.wal, self.tmp = source, db, wal, tmp
        self.out, self.rebuild, self.force, self.step = out, rebuild, force, step

    def run(self, *, fast: bool) -> SalvageReport:
        """Run once (``fast``: SQLite may read a sound copy); raises _FastPathFailed."""
        report = SalvageReport(path=str(self.source), out=str(self.out), rebuild=str(self.rebuild) if self.rebuild else None)
        spool = Spool(self.tmp / f"spool-{int(fast)}.db")
        try:
            _collect(self.db, self.wal, spool, report, self.step, fast=fast)
            _export(spool, self.db, self.out, report, self.force, self.step)
            if self.rebuild is not None:
                self.step("rebuild", 0, None)
                report.rebuilt = write_store(spool, self.rebuild, force=self.force, on_unplaced=_unplaced_sink(report))
        finally:
            spool.close()
        return report


def _check_source(path: Path) -> Path:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotAStoreError(f"{path}: no such file", path=str(path), hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"{path}: not a regular file", path=str(path), hint="pass the database file itself")
    if st.st_size == 0 and not os.path.exists(f"{path}-wal"):
        raise NotAStoreError(f"{path}: empty file and no -wal beside it; nothing to salvage", path=str(path),
                             hint="pass the app's database file")
    return path


def _private_copy(source: Path, tmp: Path) -> tuple[Path, Path | None]:
    """Copy db and -wal into ``tmp`` (read-only opens of the originals; nothing else touched)."""
    db = tmp / "store.db"
    with open(source, "rb") as src, open(db, "xb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    wal_source = Path(f"{source}-wal")
    if not wal_source.is_file():
        return db, None
    wal = tmp / "store.db-wal"
    with open(wal_source, "rb") as src, open(wal, "xb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return db, wal


def _collect(db: Path, wal: Path | None, spool: Spool, report: SalvageReport, step: Progress, *, fast: bool) -> None:
    """Fill the spool: SQLite for a sound copy, the page reader for everything else."""
    step("read", 0, None)
    with SqliteFile(db, wal) as pages:
        _refuse_foreign(pages, report)
        report.page_size, report.page_size_source = pages.page_size, pages.page_size_source
        tally = Tally()
        # mode=ro never changes the copy's bytes, except that a 0-byte db makes SQLite drop
        # the -wal (DESIGN.md): hence the size check, so the page reader still sees it.
        if fast and _sqlite_sees_what_we_see(pages) and spool.attach_readonly(db):
            report.method = "sqlite"
            with _fast_path():
                spool.live_tables = spool.source_tables()
                harvest_free(pages, spool, tally, scan_loose=False)
                spool.mark_live()
        else:
            harvest_all(pages, spool, tally, lambda done, total: step("scan pages", done, total))
        report.damage = dict(pages.damage)
        report.damaged_pages = {code: sorted(p) for code, p in pages.damaged_pages.items() if p}
        if tally.missing_roots:
            report.damage["schema_table_missing"] = tally.missing_roots
        report.unmatched_records = tally.unmatched_records
        if pages.wal is not None:
            report.wal_frames = {s: sum(f.state == s for f in pages.wal.frames) for s in ("committed", "uncommitted", "invalid")}
    spool.finish()


@contextmanager
def _fast_path() -> Iterator[None]:
    """Turn a failure of SQLite reading the copy into _FastPathFailed (the error message
    may quote damaged bytes, hence UnicodeDecodeError)."""
    try:
        yield
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise _FastPathFailed(str(exc)) from exc


def _sqlite_sees_what_we_see(pages: SqliteFile) -> bool:
    """Whether SQLite would read the same pages: an intact header, a non-empty file, and no
    damage the page reader noticed (SQLite ignores a -wal whose header fails its checksum,
    where the page reader still trusts frames whose own checksums chain correctly)."""
    return pages.header.magic_ok and pages.file_size > 0 and not set(pages.damage) - _BENIGN_DAMAGE


def _refuse_foreign(pages: SqliteFile, report: SalvageReport) -> None:
    hdr = pages.header
    if hdr.magic_ok and hdr.application_id not in (0, APPLICATION_ID):
        raise NotAStoreError(f"{report.path}: a SQLite database of another application "
                             f"(application_id {hdr.application_id:#x}), not a steerable store", path=report.path,
                             hint="pass the steerable store (the app's sessions database)")
    if not hdr.magic_ok and pages.page_size_source == "default":
        raise NotAStoreError(f"{report.path}: no SQLite header and no SQLite page found in it", path=report.path,
                             hint="pass the app's database file (or its copy)")


def _export(spool: Spool, db: Path, out: Path, report: SalvageReport, force: bool, step: Progress) -> None:
    step("export", 0, None)
    with atomic_output(out, force=force) as (_tmp, fh):
        with _fast_path():
            tally = export_live(spool, db, fh, db.parent, lambda done: step("export", done, None))
        merge_tally(tally, write_jsonl(spool, fh, lambda done: step("export", done, None), live=False))
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


_BENIGN_DAMAGE = {"wal_frame_stale_salt", "wal_torn_tail"}
"""Not damage: what a WAL reused after a checkpoint holds past its new frames, and the
uncommitted frames a writer that died mid-transaction left (nothing committed is lost)."""


def _on_pages(pages: list[int]) -> str:
    if not pages:
        return ""
    shown = ", ".join(str(p) for p in pages[:10])
    return f" (page {shown}{', ...' if len(pages) > 10 else ''})"


def _findings(report: SalvageReport) -> list[Finding]:
    found = [Finding(code=f"salvage.{code}", severity="info" if code in _BENIGN_DAMAGE else "error",
                     message=f"{count} x {code.replace('_', ' ')}{_on_pages(report.damaged_pages.get(code, []))}",
                     hint="the rows it held were salvaged where readable")
             for code, count in sorted(report.damage.items())]
    if report.unmatched_records:
        found.append(Finding(code="salvage.unmatched_records", severity="error",
                             message=f"{report.unmatched_records} records matched no table",
                             hint="their pages are damaged; the JSONL holds every row that could be decoded"))
    for table, tally in sorted(report.tables.items()):
        if tally.unverified:
            found.append(Finding(code="salvage.unverified_rows", severity="error", table=table,
                                 message=f"{tally.unverified} of {tally.keys} {table} rows fail their checksum",
                                 hint="they are exported with verified=false; do not trust their content"))
    if report.unplaced_total:
        found.append(Finding(code="salvage.unplaced_rows", severity="warning",
                             message=f"{report.unplaced_total} rows were not placed in the rebuilt store",
                             hint="they are listed in the report and exported in the JSONL"))
    return found
