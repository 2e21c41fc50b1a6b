"""Upgrade a store of an older schema version to this build's, in one transaction.

Version 1 -> 2: every row's ``crc`` is recomputed with the identity-binding rule of
storage/checksum.py. A row whose stored checksum did not match under the old rule must not
be blessed by the upgrade: the new value is ``row_crc(...) XOR (old_crc XOR legacy_crc(data))``,
so a row that matched before matches now, and a row that did not still fails by exactly the
same bits (check and salvage keep reporting it). ``data`` and every other column are left
as they are; ``PRAGMA user_version`` is set in the same transaction, so a kill at any point
leaves the store entirely at the old version or entirely at the new one.

The caller holds the write lease. Raises DatabaseDamagedError (SQLite reports damage while
upgrading: nothing was changed, the transaction rolled back).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import DatabaseDamagedError
from .checksum import identity_sql, legacy_crc, row_crc
from .schema import SCHEMA_VERSION, TABLES
from .txn import transaction

log = logging.getLogger(__name__)

UpgradeProgress = Callable[[int, int], None]
"""``progress(rows_done, rows_total)``, called after each batch (and once at the end)."""

BATCH_ROWS = 20_000


def _upgrade_crc(crc: Any, data: Any, *identity: Any) -> Any:
    if type(crc) is not int or not isinstance(data, (bytes, str)):
        return crc  # not a checksum at all: it stays as damaged as it was
    return row_crc("", identity, data) ^ ((crc ^ legacy_crc(data)) & 0xFFFFFFFF)


def upgrade_store(conn: sqlite3.Connection, version: int, path: str | Path,
                  progress: UpgradeProgress | None = None) -> int:
    """Upgrade the store open on ``conn`` (autocommit) from schema ``version`` to
    SCHEMA_VERSION in one ``BEGIN IMMEDIATE`` transaction; return the rows rewritten.
    A store already at SCHEMA_VERSION is left alone (0)."""
    if version >= SCHEMA_VERSION:
        return 0
    conn.create_function("upgrade_crc", -1, _upgrade_crc, deterministic=True)
    try:
        with transaction(conn):
            tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                      if name in TABLES]
            total = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
            log.info("%s: upgrading schema %d -> %d (%d rows)", path, version, SCHEMA_VERSION, total)
            done = 0
            for table in tables:
                done = _rewrite(conn, table, done, total, progress)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        raise DatabaseDamagedError(
            f"{path}: SQLite reports damage while upgrading schema {version} -> {SCHEMA_VERSION}: {exc}",
            path=str(path), hint="nothing was changed; run `steerable-maint repair DB` (or salvage --rebuild)"
        ) from exc
    if progress is not None:
        progress(done, total)
    log.info("%s: schema upgraded to %d", path, SCHEMA_VERSION)
    return done


def _rewrite(conn: sqlite3.Connection, table: str, done: int, total: int,
             progress: UpgradeProgress | None) -> int:
    """Recompute ``crc`` of every row of ``table`` in rowid batches; the running count."""
    update = (f"UPDATE {table} SET crc = upgrade_crc(crc, CAST(data AS BLOB), {identity_sql(table)})"
              " WHERE rowid > ? AND rowid <= ?")
    last = -(2**63)
    while True:
        row = conn.execute(f"SELECT max(rowid), count(*) FROM (SELECT rowid FROM {table} WHERE rowid > ?"
                           " ORDER BY rowid LIMIT ?)", (last, BATCH_ROWS)).fetchone()
        if not row[1]:
            return done
        conn.execute(update, (last, row[0]))
        last, done = row[0], done + row[1]
        if progress is not None:
            progress(done, total)
