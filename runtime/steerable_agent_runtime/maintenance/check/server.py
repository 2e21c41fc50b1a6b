"""check URL: the row checks of ``check`` on a SqlAlchemy store (PostgreSQL, or SQLite by URL).

The server's rows are read exactly as stored (``SqlAlchemyStorage.read_rows``: every column,
``data`` as its bytes) into a private mirror, a SQLite file in a fresh 0700 temp directory
with the store's tables and no other index or trigger, and ``check`` runs on that mirror.
So a server store gets the very same row checks (checksums, JSON, shapes, indexed columns,
record seq contiguity, record versions and the downgrade triage, orphans) with the same
codes as a SQLite file. What is the mirror's own (SQLite integrity, the lease, the -wal) is
left out of the report: the server keeps its own integrity. The mirror is removed on exit.

Read-only: nothing on the server is created or changed (the store is opened with
``create=False``). Raises what SqlAlchemyStorage raises on open (StoreConnectionError,
StoreAuthError, NotAStoreError, SchemaTooNewError, UsageError for a bad URL).
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
from pathlib import Path

from ...storage.schema import APPLICATION_ID, DDL, TABLES, _statements
from ..report import Progress, no_progress
from .job import CheckReport, check

_MIRROR_ONLY = {"sqlite-integrity", "wal-large", "lease-held"}
SERVER_HINT = ("the store is on a database server, and salvage reads SQLite files only: restore the row from the"
               " server's backup (pg_dump, point-in-time recovery), then run `steerable-maint check URL` again")
"""The remedy of a finding whose SQLite-file remedy is salvage (CODES' hints name `salvage DB`)."""


def _server_hint(finding):
    """``finding`` with a remedy that works on a server store (no `salvage DB`)."""
    if "salvage" not in finding.hint:
        return finding
    return finding.model_copy(update={"hint": SERVER_HINT})
PAGE = 2000


def check_url(url: str, *, quick: bool = False, max_per_code: int = 20, progress: Progress | None = None) -> CheckReport:
    """Check the SqlAlchemy store at ``url`` read-only (see the module docstring)."""
    from ...storage.sqlalchemy import SqlAlchemyStorage

    tick = progress or no_progress
    store = SqlAlchemyStorage(url, create=False, upgrade=False)  # read-only: an older schema is reported, not upgraded
    workdir = Path(tempfile.mkdtemp(prefix="steerable-check-"))
    try:
        mirror = workdir / "mirror.db"
        loop = asyncio.new_event_loop()
        try:
            version = loop.run_until_complete(_mirror(store, mirror, tick))
        finally:
            loop.run_until_complete(store.close())
            loop.close()
        report = check(mirror, quick=quick, max_per_code=max_per_code, progress=progress)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    kept = [_server_hint(f) for f in report.findings if f.code not in _MIRROR_ONLY]
    counts = {code: n for code, n in report.counts.items() if code not in _MIRROR_ONLY}
    return report.model_copy(update={"path": store.where, "access": f"{store.backend} rows", "schema_version": version,
                                     "integrity_ok": None, "wal_bytes": 0, "lease_held": False,
                                     "lease_holder_pid": None, "findings": kept, "counts": counts})


async def _mirror(store: object, mirror: Path, tick: Progress) -> int:
    """Copy every row of ``store`` as stored into a new SQLite file; return the schema version."""
    await store.open()  # type: ignore[attr-defined]
    conn = sqlite3.connect(mirror, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a private scratch file: no journal, no fsync
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        for statement in _statements(DDL):
            conn.execute(statement)
        for table, spec in TABLES.items():
            names = spec.all_columns
            insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
            after, done = None, 0
            while True:
                rows, after = await store.read_rows(table, after=after, limit=PAGE)  # type: ignore[attr-defined]
                conn.executemany(insert, [(*row[:-2], _text(row[-2]), row[-1]) for row in rows])
                done += len(rows)
                tick(f"read {table}", done, None)
                if after is None:
                    break
        version = await store.schema_version()  # type: ignore[attr-defined]
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    finally:
        conn.close()
    return version


def _text(data: bytes | None) -> str | bytes | None:
    """The data as SQLite TEXT with the same bytes (kept as a BLOB when not UTF-8, so the
    mirror's CAST(data AS BLOB) still gives the stored bytes)."""
    if data is None:
        return None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(data)
