"""copy: every row of an embedded store into a SqlAlchemy store (PostgreSQL) or another SQLite file.

``copy_store(SRC.db, to=URL_OR_PATH)`` moves rows unchanged: the ``data`` bytes, ``crc`` and
indexed columns of each row of every table (storage/schema.TABLES) are inserted as they are,
so ``steerable-maint check`` finds the same rows on both sides. (A source of an older schema
is verified with its own checksum rule and its rows get this build's checksum,
storage/checksum.py, so the destination is current.)

Guarantees:
- The source is read read-only (maintenance/readonly.read_store: no lease, no checkpoint,
  no byte changed), so it is safe while the app runs; the copy is of one snapshot.
- Verified on both sides: every source row's CRC-32 is checked before it is sent (a row whose
  bytes do not match is not copied: ``copy-source-damaged``), and every inserted row is read
  back and compared byte for byte and by CRC (``copy-verify-failed`` otherwise).
- Idempotent: a row already in the destination with the same bytes is counted in
  ``already`` and not written again; one with other bytes is a conflict (``copy-conflict``):
  the destination keeps its row, nothing is overwritten. A re-run after an interrupted copy
  finishes it (rows go in batches, one transaction each).
- ``dry_run`` reads both sides and reports what a real run would copy, writing nothing (an
  empty destination database gets no schema either).
- A SQLite destination is held by its write lease for the whole copy (and created 0600 when
  missing); the source and the destination must be different stores (UsageError).
- Raises NotAStoreError, SchemaTooNewError, StoreConnectionError, StoreAuthError,
  StoreAlreadyOwnedError, UsageError before anything is written.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import NotAStoreError
from ..storage.checksum import IDENTITY, Checker, current_checker, row_crc, store_checker
from ..storage.schema import TABLES
from .readonly import ReadOnlyConnection, read_store
from .codes import finding
from .report import JobReport, Progress, no_progress

BATCH = 500


class CopyReport(JobReport):
    """What copy did (or, with ``dry_run``, would do), per table."""

    job: str = "copy"
    destination: str = ""
    rows: dict[str, int] = {}
    copied: dict[str, int] = {}
    already: dict[str, int] = {}
    skipped: dict[str, int] = {}


def is_url(target: str) -> bool:
    """Whether ``target`` is a database URL (``scheme://``) rather than a SQLite file path."""
    return "://" in target


def copy_store(source: str | os.PathLike[str], *, to: str, dry_run: bool = False,
               batch: int = BATCH, progress: Progress | None = None) -> CopyReport:
    """Copy every row of the store at ``source`` into ``to`` (a URL, or a SQLite file path).

    See the module docstring for the guarantees and what is raised.
    """
    tick = progress or no_progress
    from ..storage.access import probe, refuse_foreign

    refuse_foreign(probe(source), source)  # before the destination's lease: a refused source leaves no lock file
    with _destination(source, to, create=not dry_run) as (dest, where):
        report = CopyReport(path=str(source), destination=where, dry_run=dry_run)
        loop = asyncio.new_event_loop()
        try:
            known = not dry_run or loop.run_until_complete(_has_schema(dest))

            def job(conn: ReadOnlyConnection) -> CopyReport:
                fresh = report.model_copy(deep=True)  # read_store may run the job again
                for table in TABLES:
                    _copy_table(conn, loop, dest if known else None, table, fresh, batch, dry_run, tick)
                return fresh

            report = read_store(source, job)
        finally:
            loop.run_until_complete(dest.close())
            loop.close()
    return report


@contextmanager
def _destination(source: str | os.PathLike[str], to: str, *, create: bool) -> Iterator[tuple[Any, str]]:
    """The destination store (a SqlAlchemyStorage) and its name for reports; a SQLite file's
    write lease is held until exit."""
    from ..storage.access import claim, refuse_same_store
    from ..storage.sqlalchemy import SqlAlchemyStorage

    if is_url(to):
        store = SqlAlchemyStorage(to, create=create, upgrade=create)
        if store.backend == "sqlite":
            refuse_same_store(source, store.url.database or "")
        yield store, store.where
        return
    refuse_same_store(source, to)
    _, lease = claim(to, allow_missing=True, write=True)
    try:
        yield SqlAlchemyStorage(f"sqlite+aiosqlite:///{Path(to).resolve()}", create=create, upgrade=create), str(to)
    finally:
        lease.release(discard=True)


async def _has_schema(dest: Any) -> bool:
    try:
        await dest.open()
    except NotAStoreError as exc:
        if "no steerable schema" in exc.message or "no such file" in exc.message:
            return False
        raise
    return True


def _copy_table(conn: ReadOnlyConnection, loop: asyncio.AbstractEventLoop, dest: Any, table: str,
                report: CopyReport, batch: int, dry_run: bool, tick: Progress) -> None:
    spec = TABLES[table]
    cols = ", ".join(spec.all_columns[:-2])
    cursor = conn.execute(f"SELECT {cols}, CAST(data AS BLOB), crc FROM {table} ORDER BY rowid")
    ok = store_checker(conn)
    for name in ("rows", "copied", "already", "skipped"):
        getattr(report, name)[table] = 0
    while rows := cursor.fetchmany(batch):
        report.rows[table] += len(rows)
        good = [row for row in (_checked(table, row, report, ok) for row in rows) if row is not None]
        stored = loop.run_until_complete(dest.stored_rows(table, [_key(table, r) for r in good])) if dest else {}
        fresh = [r for r in good if not _known(table, r, stored.get(_key(table, r)), report)]
        if not dry_run and fresh:
            loop.run_until_complete(dest.insert_rows(table, fresh))
            back = loop.run_until_complete(dest.stored_rows(table, [_key(table, r) for r in fresh]))
            fresh = [r for r in fresh if _verified_copy(table, r, back.get(_key(table, r)), report)]
        report.copied[table] += len(fresh)
        tick(f"copy {table}", report.rows[table], None)


def _key(table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    spec = TABLES[table]
    return tuple(row[spec.all_columns.index(k)] for k in spec.key)


def _identity(table: str, row: tuple[Any, ...]) -> list[Any]:
    spec = TABLES[table]
    return [row[spec.all_columns.index(c)] for c in IDENTITY[table]]


def _checked(table: str, row: tuple[Any, ...], report: CopyReport, ok: Checker) -> tuple[Any, ...] | None:
    """The row with ``data`` as text and this build's checksum, or None (and a finding) when
    it fails the checksum rule of the source's schema version (``ok``)."""
    data, crc = row[-2], row[-1]
    problem = None
    if not ok(table, _identity(table, row), data, crc):
        problem = "its data bytes do not match their CRC-32"
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            problem = "its data is not valid UTF-8"
    if problem is not None:
        report.skipped[table] += 1
        report.findings.append(finding(
            "copy-source-damaged", table=table, key=str(_key(table, row)),
            message=f"{table} {_key(table, row)!r}: {problem}; not copied"))
        return None
    return (*row[:-2], text, row_crc(table, _identity(table, row), text))


def _known(table: str, row: tuple[Any, ...], stored: tuple[bytes, int] | None, report: CopyReport) -> bool:
    """Whether the destination already has the row's key (same bytes: ``already``; else a conflict)."""
    if stored is None:
        return False
    if stored == (row[-2].encode("utf-8"), row[-1]):
        report.already[table] += 1
    else:
        report.skipped[table] += 1
        report.findings.append(finding(
            "copy-conflict", table=table, key=str(_key(table, row)),
            message=f"{table} {_key(table, row)!r} is in the destination with different bytes; it was kept there,"
                    " nothing was overwritten"))
    return True


def _verified_copy(table: str, row: tuple[Any, ...], stored: tuple[bytes, int] | None, report: CopyReport) -> bool:
    data = row[-2].encode("utf-8")
    if stored is not None and stored == (data, row[-1]) and current_checker(table, _identity(table, row), *stored):
        return True
    report.skipped[table] += 1
    report.findings.append(finding(
        "copy-verify-failed", table=table, key=str(_key(table, row)),
        message=f"{table} {_key(table, row)!r}: read back from the destination, it is not the row sent"
                " (another writer inserted that key meanwhile, or the destination changed it)"))
    return False

