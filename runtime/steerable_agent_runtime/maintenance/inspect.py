"""inspect: the one-screen overview of a store, read-only.

Sizes of db/-wal/-shm, page size and count, freelist, schema version, record versions
histogram, rows per table, the newest write, the lease holder. Reads only page-level
pragmas, ``count(*)`` and indexed columns (never ``data``), so it is quick on any size.

Guarantees: reads through :func:`read_store` (no lease, no byte changed, no file
created). A schema newer than this build is shown with a ``schema-too-new`` finding and the
row statistics are left out (their layout may differ); never an exception for that.
Raises what ``open_readonly`` raises for a file that is not a readable store.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DatabaseDamagedError, ExitCode
from ..sqlitefile.pinned import open_pinned
from ..storage.access import sibling_path
from ..storage.specialfiles import refuse_special_files
from ..storage.lease import lease_holder
from ..storage.schema import SCHEMA_VERSION, TABLES
from .codes import FindingLog
from .readonly import ReadOnlyConnection, read_store
from .report import JobReport, Progress, no_progress

_NEWEST = {name: spec.newest for name, spec in TABLES.items()}


class InspectReport(JobReport):
    """The overview. Sizes in bytes; ``newest_write`` is the newest timestamp of any row."""

    job: str = "inspect"
    access: str = ""
    db_bytes: int = 0
    wal_bytes: int | None = None
    shm_bytes: int | None = None
    page_size: int = 0
    page_count: int = 0
    freelist_count: int = 0
    journal_mode: str = ""
    schema_version: int = 0
    build_schema_version: int = SCHEMA_VERSION
    application_id: int = 0
    rows: dict[str, int] = {}
    record_versions: dict[str, int] = {}
    records: int = 0
    newest_write: str | None = None
    newest_write_table: str | None = None
    lease_held: bool = False
    lease_holder_pid: int | None = None

    @property
    def exit_code(self) -> ExitCode:
        """Always OK (0): inspect shows; judging the store is check's job (exit 1 there)."""
        return ExitCode.OK


def inspect_store(path: str | os.PathLike[str], *, progress: Progress | None = None) -> InspectReport:
    """Return the overview of the store at ``path`` (see the module docstring)."""
    refuse_special_files(path)  # before _journal_mode opens the db: a FIFO would block
    tick, journal = progress or no_progress, _journal_mode(Path(path))

    def read(conn: ReadOnlyConnection) -> tuple[InspectReport, FindingLog]:
        log, report = FindingLog(max_per_code=20), InspectReport(path=str(path), **_file_sizes(Path(path)))
        _pages(conn, report)
        report.journal_mode = journal
        if conn.user_version > SCHEMA_VERSION:
            log.add("schema-too-new", f"schema version {conn.user_version} was written by a newer build (this"
                    f" build reads up to {SCHEMA_VERSION}); row statistics left out")
        else:
            _tables(conn, report, tick)
        return report, log

    report, log = read_store(path, read, allow_newer_schema=True)
    holder = lease_holder(path)
    report.lease_held, report.lease_holder_pid = holder is not None, holder.pid if holder else None
    report.findings = log.findings
    return report


def _size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def _journal_mode(path: Path) -> str:
    """``wal`` or ``rollback`` from the header's read/write version bytes (offsets 18, 19).

    Read through sqlitefile/pinned.py: closing a plain file descriptor of the db would drop this
    process's POSIX locks on it (the job's own, or an app's open SqliteStorage). (An
    ``immutable`` connection always says "delete".)
    """
    try:
        with open_pinned(path) as fh:
            header = fh.read(20)
    except OSError:
        return "unknown"
    return "wal" if header[18:20] == b"\x02\x02" else "rollback"


def _file_sizes(path: Path) -> dict[str, int | None]:
    return {"db_bytes": _size(path) or 0, "wal_bytes": _size(sibling_path(path, "-wal")),
            "shm_bytes": _size(sibling_path(path, "-shm"))}


def _pages(conn: ReadOnlyConnection, report: InspectReport) -> None:
    report.access, report.schema_version, report.application_id = conn.strategy, conn.user_version, conn.application_id
    for name in ("page_size", "page_count", "freelist_count"):
        setattr(report, name, conn.execute(f"PRAGMA {name}").fetchone()[0])


def _tables(conn: ReadOnlyConnection, report: InspectReport, tick: Progress) -> None:
    present = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    newest: tuple[str, str] | None = None
    for done, name in enumerate(n for n in TABLES if n in present):
        tick("tables", done, len(TABLES))
        report.rows[name] = conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
        stamp = conn.execute(f"SELECT max({_NEWEST[name]}) FROM {name}").fetchone()[0]
        if stamp is not None and not isinstance(stamp, str):  # SQLite orders blobs and numbers apart from text
            raise DatabaseDamagedError(
                f"{name}.{_NEWEST[name]} holds a {type(stamp).__name__} value, not a text timestamp",
                table=name, hint="run `steerable-maint check DB` to find the rows, then `steerable-maint repair DB`")
        if stamp is not None and (newest is None or stamp > newest[0]):
            newest = (stamp, name)
    if newest:
        report.newest_write, report.newest_write_table = newest
    if "history" in present:
        report.record_versions = {str(v): n for v, n in conn.execute("SELECT v, count(*) FROM history GROUP BY v")}
        report.records = conn.execute("SELECT count(DISTINCT record_id) FROM history").fetchone()[0]
