"""Report types shared by every maintenance job.

A job returns a typed report (a pydantic model); ``--json`` prints exactly
``report.model_dump_json()``. Findings carry a stable ``code``, a ``severity``, a
``message``, a ``hint`` (the remedy) and, where they apply, the location.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import ExitCode

Severity = Literal["error", "warning", "info"]

Progress = Callable[[str, int, "int | None"], None]
"""An optional progress callback: ``progress(phase, done, total_or_None)``. The library
calls it; the CLI wires it to a rich bar on stderr (only when stderr is a terminal)."""


def no_progress(phase: str, done: int, total: int | None) -> None:
    """The default progress callback: does nothing."""


class Finding(BaseModel):
    """One problem (or notable fact) a job found."""

    model_config = ConfigDict(extra="forbid")

    code: str
    severity: Severity
    message: str
    hint: str
    table: str | None = None
    record_id: str | None = None
    seq: int | None = None
    key: str | None = None


class JobReport(BaseModel):
    """Base of every job report: which job, on which file, and its findings."""

    model_config = ConfigDict(extra="forbid")

    job: str
    path: str
    dry_run: bool = False
    findings: list[Finding] = []

    @property
    def has_errors(self) -> bool:
        """Whether any finding has severity ``error``."""
        return any(f.severity == "error" for f in self.findings)

    @property
    def exit_code(self) -> ExitCode:
        """steerable-maint's exit code for this report: PROBLEMS (1) when problems were found, else OK."""
        return ExitCode.PROBLEMS if self.has_errors else ExitCode.OK
