"""repair: the operator's one command for a corrupt store.

``repair(DB)``, holding the store's write lease throughout:

1. an interrupted earlier repair is rolled back first (its intent marker names the backup);
2. db, ``-wal`` and ``-shm`` are copied into a new private backup folder beside the store,
   ``<name>.repair-<UTC time>/`` (0700, files 0600, fsynced); the salvage JSONL of every
   copy of every row goes there too (``rows.jsonl``);
3. salvage rebuilds the newest verified copy of every key into a temp store beside the db;
4. check runs on the rebuilt store: a finding that means the rebuild is broken (BLOCKING)
   stops the repair (nothing swapped); the others (seq gaps where entries were lost,
   orphans) are reported as what was lost;
5. the swap (skipped by ``dry_run``): the intent marker (storage/repairmark.py) is written
   and fsynced, the ``-shm`` and ``-wal`` are removed, the rebuilt store is renamed over the
   db, the directory is fsynced, the marker removed.

Guarantees: every failure before the swap leaves the original files exactly as they were
(only the backup folder and, after a kill, a temp file beside the db remain; a later run
removes such temp files). A failure or a kill during the swap leaves the marker: every
opener refuses the store (RepairInterruptedError) until the next repair run restores the
original files, byte for byte, from the backup. The report says what was recovered (rows
per table), what was lost (keys no verified copy of which could be placed, rows failing
their checksum, damaged pages) and where the backup is; ``exit_code`` is 0 only when salvage
found no damage and placed every key. Raises NotAStoreError, StoreAlreadyOwnedError,
DatabaseDamagedError (the rebuilt store does not check clean), SteerableError (disk full).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import DatabaseDamagedError
from ..privatefile import fsync_dir
from ..sqlitefile.pinned import open_pinned
from ..storage.access import claim_damaged, sibling_path
from ..storage.lease import lock_path_for
from ..storage.repairmark import intent_path
from .check import check
from .codes import finding
from .report import Finding, JobReport, Progress, no_progress
from .salvage import salvage

SUFFIXES = ("", "-wal", "-shm")
"""The store's files, by suffix of the db path."""
BLOCKING = frozenset({"sqlite-integrity", "row-checksum-mismatch", "row-json-invalid"})
"""check findings on the rebuilt store that mean the rebuild itself is broken (and any
``schema-*``): the swap is refused. Others (a seq gap where entries were lost, an orphan
whose parent was lost, an entry the original already held invalid) are the damage's
consequences: they are reported as errors of the repair (exit 1), and the swap goes on."""


class RepairReport(JobReport):
    """What repair recovered, what it lost, where the backup is, and whether it swapped."""

    job: str = "repair"
    backup: str = ""
    swapped: bool = False
    rolled_back: bool = False
    """An interrupted earlier repair was rolled back first (the original restored)."""
    recovered: dict[str, int] = {}
    unverified: dict[str, int] = {}
    lost_keys: int = 0
    damage: dict[str, int] = {}
    result_findings: list[Finding] = []
    """check's findings on the rebuilt store (warnings only: an error stops the repair)."""


def repair(path: str | os.PathLike[str], *, dry_run: bool = False, progress: Progress | None = None,
           now: datetime | None = None) -> RepairReport:
    """Repair the store at ``path`` (see the module docstring)."""
    db = Path(path)
    step = progress or no_progress
    lease = claim_damaged(db)
    try:
        report = RepairReport(path=str(db), dry_run=dry_run)
        report.rolled_back = roll_back(db)
        _remove_leftovers(db)
        backup = _backup(db, now or datetime.now(timezone.utc), step)
        report.backup = str(backup)
        new = db.with_name(f".{db.name}.repair-new")
        salvaged = salvage(db, backup / "rows.jsonl", rebuild=new, progress=progress)
        try:
            _account(report, salvaged)
            result = check(new)
            report.result_findings = result.findings
            blocking = [f for f in result.findings if f.code in BLOCKING or f.code.startswith("schema-")]
            if blocking:
                raise DatabaseDamagedError(
                    f"{db}: the rebuilt store does not check clean ({blocking[0].message}); nothing was"
                    " swapped", path=str(db), hint=f"the original is untouched; salvage's rows are in {backup}")
            report.findings += [f for f in result.findings if f.severity == "error"]
            if not dry_run:
                step("swap", 0, None)
                swap(db, new, backup)
                report.swapped = True
        finally:
            _remove_temp(new)
        return report
    finally:
        lease.release(discard=True)


def _backup(db: Path, now: datetime, step: Progress) -> Path:
    """Copy the store's files into a new private folder beside it; return the folder."""
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    folder = db.with_name(f"{db.name}.repair-{stamp}")
    folder.mkdir(mode=0o700)
    for suffix in SUFFIXES:
        source = sibling_path(db, suffix)
        if source.exists():
            step("backup", 0, None)
            target = folder / (db.name + suffix)
            with open_pinned(source) as src, open(target, "xb") as dst:  # may be open in this process
                os.fchmod(dst.fileno(), 0o600)
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
    fsync_dir(folder)
    fsync_dir(db.parent)
    return folder


def _account(report: RepairReport, salvaged: Any) -> None:
    report.recovered = dict(salvaged.rebuilt)
    report.unverified = {t: tally.unverified for t, tally in salvaged.tables.items() if tally.unverified}
    report.lost_keys = salvaged.unplaced_total
    report.damage = dict(salvaged.damage)
    report.findings = list(salvaged.findings)
    if report.lost_keys:
        report.findings.append(finding(
            "repair-rows-lost", f"{report.lost_keys} keys could not be placed in the repaired store",
            hint=f"every copy salvage found is in {report.backup}/rows.jsonl; the original files are there too"))


def swap(db: Path, new: Path, backup: Path) -> None:
    """Replace the store's files with the rebuilt store ``new``, behind the intent marker."""
    marker = intent_path(db)
    present = [suffix for suffix in SUFFIXES if os.path.lexists(sibling_path(db, suffix))]
    tmp = marker.with_name(marker.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"backup": str(backup), "files": present}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, marker)
    fsync_dir(db.parent)
    for suffix in ("-shm", "-wal"):
        if os.path.lexists(sibling_path(db, suffix)):
            os.unlink(sibling_path(db, suffix))
    os.replace(new, db)
    fsync_dir(db.parent)
    os.unlink(marker)
    fsync_dir(db.parent)


def roll_back(db: Path) -> bool:
    """Restore the original files of an interrupted swap from its backup (the caller holds
    the lease); True if there was one to roll back."""
    marker = intent_path(db)
    if not os.path.lexists(marker):
        return False
    try:
        intent = json.loads(marker.read_text(encoding="utf-8"))
        backup, present = Path(intent["backup"]), list(intent["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatabaseDamagedError(f"{marker}: an interrupted repair's marker is unreadable", path=str(db),
                                   hint="restore the files from the newest <name>.repair-* folder beside the"
                                        " store by hand, then delete the marker") from exc
    for suffix in SUFFIXES:
        live = sibling_path(db, suffix)
        if suffix in present:
            tmp = live.with_name(f".{live.name}.restore")
            with open(backup / (db.name + suffix), "rb") as src, open(tmp, "wb") as dst:
                os.fchmod(dst.fileno(), 0o600)
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, live)
        elif os.path.lexists(live):
            os.unlink(live)
    fsync_dir(db.parent)
    os.unlink(marker)
    fsync_dir(db.parent)
    return True


def _remove_temp(new: Path) -> None:
    for leftover in (new, Path(f"{new}-wal"), Path(f"{new}-shm"), lock_path_for(new)):
        try:
            os.unlink(leftover)
        except FileNotFoundError:
            pass


def _remove_leftovers(db: Path) -> None:
    """Temp files a killed repair left beside the db (never the store's own files)."""
    _remove_temp(db.with_name(f".{db.name}.repair-new"))
    marker = intent_path(db)
    for leftover in (marker.with_name(marker.name + ".tmp"), *db.parent.glob(f".{db.name}*.restore"),
                     *db.parent.glob(f"..{db.name}.repair-new.*.tmp")):
        try:
            os.unlink(leftover)
        except FileNotFoundError:
            pass
