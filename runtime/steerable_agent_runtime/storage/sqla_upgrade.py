"""Upgrade a SqlAlchemyStorage store (PostgreSQL or SQLite) of an older schema version, in one
transaction, with the rule of storage/upgrade.py: every row's ``crc`` becomes
``row_crc(...) XOR (old_crc XOR legacy_crc(data))`` (a row that matched still matches, a
damaged one stays damaged by the same bits), then the version marker is stamped in the same
transaction. Rows are read in key order, in pages of BATCH rows (memory stays flat).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import text

from . import pgschema
from .checksum import IDENTITY
from .schema import SCHEMA_VERSION, TABLES
from .upgrade import UpgradeProgress, _upgrade_crc

log = logging.getLogger(__name__)
BATCH = 2_000


async def upgrade_rows(conn: Any, *, backend: str, blob: str, where: str,
                       progress: UpgradeProgress | None = None) -> int | None:
    """Upgrade the store open on ``conn`` (an AsyncConnection inside a write transaction)
    when its markers say an older version; return the rows rewritten, or None when it was
    already current (another opener may have upgraded it first)."""
    version = await _version(conn, backend)
    if version >= SCHEMA_VERSION:
        return None
    log.info("%s: upgrading schema %d -> %d", where, version, SCHEMA_VERSION)
    done, tables = 0, await _tables(conn, backend)
    total = 0
    for table in tables:
        total += int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar() or 0)
    for table in tables:
        done = await _rewrite(conn, table, blob, done, total, progress)
    if backend == "sqlite":
        await conn.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")
    else:
        await conn.execute(text(pgschema.STAMP_MARKERS), {"key": "schema_version", "value": str(SCHEMA_VERSION)})
    if progress is not None:
        progress(done, total)
    log.info("%s: schema upgraded to %d (%d rows)", where, SCHEMA_VERSION, done)
    return done


async def _version(conn: Any, backend: str) -> int:
    if backend == "sqlite":
        return int((await conn.exec_driver_sql("PRAGMA user_version")).scalar() or 0)
    if backend == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": pgschema.CREATE_LOCK})
    markers = dict((await conn.execute(text(pgschema.READ_MARKERS))).all())
    return int(markers.get("schema_version", "0"))


async def _tables(conn: Any, backend: str) -> list[str]:
    if backend == "sqlite":
        rows = await conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        rows = await conn.execute(text(pgschema.LIST_TABLES), {"names": list(TABLES)})
    present = {row[0] for row in rows}
    return [t for t in TABLES if t in present]


async def _rewrite(conn: Any, table: str, blob: str, done: int, total: int,
                   progress: UpgradeProgress | None) -> int:
    key = TABLES[table].key
    identity = IDENTITY[table]
    after = " AND (" + ", ".join(key) + ") > (" + ", ".join(f":a{i}" for i in range(len(key))) + ")"
    select = (f"SELECT {', '.join(key)}, {', '.join(identity)}, {blob}, crc FROM {table} WHERE 1 = 1"
              "{after} ORDER BY " + ", ".join(key) + f" LIMIT {BATCH}")
    update = text(f"UPDATE {table} SET crc = :crc WHERE " + " AND ".join(f"{k} = :k{i}" for i, k in enumerate(key)))
    last: tuple[Any, ...] | None = None
    while True:
        params = {} if last is None else {f"a{i}": v for i, v in enumerate(last)}
        rows = (await conn.execute(text(select.format(after="" if last is None else after)), params)).all()
        if not rows:
            return done
        changes = []
        for row in rows:
            keys, ident = row[:len(key)], row[len(key):len(key) + len(identity)]
            data, crc = row[-2], row[-1]
            new = _upgrade_crc(crc, bytes(data) if data is not None else None, *ident)
            changes.append({"crc": new, **{f"k{i}": v for i, v in enumerate(keys)}})
        await conn.execute(update, changes)
        last, done = tuple(rows[-1][:len(key)]), done + len(rows)
        if progress is not None:
            progress(done, total)
