"""Turn a store of this build into one as a schema-1 build wrote it (checksums over data alone)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from steerable_agent_runtime.storage.checksum import legacy_crc
from steerable_agent_runtime.storage.schema import TABLES


def to_schema_v1(db: Path) -> None:
    """Rewrite every row's crc with the schema-1 rule and stamp user_version 1 (one transaction;
    the -wal is checkpointed and removed, as a cleanly closed store has it)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'") if n in TABLES]
        for table in tables:
            rows = conn.execute(f"SELECT rowid, CAST(data AS BLOB) FROM {table}").fetchall()
            conn.executemany(f"UPDATE {table} SET crc = ? WHERE rowid = ?", [(legacy_crc(d), r) for r, d in rows])
        conn.execute("PRAGMA user_version = 1")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
