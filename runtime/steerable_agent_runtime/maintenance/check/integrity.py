"""SQLite's own check of a store: ``PRAGMA integrity_check`` (or ``quick_check``), its problems.

check runs it beside the row pass: in a thread of its own process, or, when the row pass
runs in forked worker processes (tablescan.parallel_scan), as the first task of that pool,
so that the job keeps as many busy threads as the machine has cores instead of one more
(three on two cores had the row workers share a core, and its caches, with it). Either way
it runs on its own connection opened the same way, so its answer is the same.
"""

from __future__ import annotations

import sqlite3
from typing import Any

MAX_ERRORS = 1_000_000


def integrity_problems(conn: Any, pragma: str) -> list[str]:
    """The problems ``PRAGMA {pragma}`` reports ([] when "ok"); closes ``conn``."""
    try:
        lines = [r[0] for r in conn.execute(f"PRAGMA {pragma}({MAX_ERRORS})")]
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        lines = [f"could not finish: {exc}"]
    finally:
        conn.close()
    return [line for line in lines if line != "ok"]
