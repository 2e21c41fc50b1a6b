"""Every read-only job as one callable ``job(db) -> report``, for the read-only tests.

``live_rows(report)`` is how many rows of writer_child's chat the job saw, so one test
can assert for every job that committed rows still in the -wal are visible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from steerable_agent_runtime.maintenance.check import check

from .writer_child import CHAT


def _check(db: Path) -> Any:
    return check(db)


READ_JOBS: dict[str, Callable[[Path], Any]] = {"check": _check}


def live_rows(report: Any) -> int:
    """History entries of the live chat the report shows (0 for a store without it)."""
    if report.job == "check":
        return report.rows["history"]
    raise AssertionError(f"unknown job {report.job}")
