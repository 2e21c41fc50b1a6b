"""Every read-only job as one callable ``job(db) -> report``, for the read-only tests.

``live_rows(report)`` is how many history entries of writer_child's chat the job saw
(search: the ``stageData.writes`` of the chat's session, which the writer bumps with every
entry), so one test can assert for every job that rows still in the -wal are visible.
Stores named ``live.db`` are read at writer_child's chat; others at the fixtures' chat-alpha.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.history import history
from steerable_agent_runtime.maintenance import inspect_store
from steerable_agent_runtime.maintenance.search import search

from .writer_child import CHAT


def _chat(db: Path) -> str:
    return CHAT if db.name == "live.db" else "chat-alpha"


READ_JOBS: dict[str, Callable[[Path], Any]] = {
    "check": lambda db: check(db),
    "inspect": lambda db: inspect_store(db),
    "history": lambda db: history(db, _chat(db)),
    "search": lambda db: search(db, "marmalade" if db.name == "live.db" else "invoice"),
}


def live_rows(report: Any) -> int:
    """History entries of the live chat the report shows (see the module docstring)."""
    if report.job in ("check", "inspect"):
        return report.rows["history"]
    if report.job == "history":
        assert all(e.readable for e in report.entries)
        return len(report.entries)
    if report.job == "search":
        (session,) = report.sessions
        return session["stageData"]["writes"]
    raise AssertionError(f"unknown job {report.job}")
