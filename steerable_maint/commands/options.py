"""Options and formatting shared by the write-job commands (compact, archive, restore).

Not a command: cli.COMMANDS does not list it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def duration_option(name: str, help_text: str) -> Callable[[Any], Any]:
    """A required duration option; the text is parsed by the library (bad text -> exit 2)."""
    return click.option(name, required=True, metavar="DURATION", help=help_text)


def human_bytes(count: int) -> str:
    """``1536`` -> ``1.5 KiB``: sizes for the human view (the JSON report keeps bytes)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def render_findings(findings: list) -> None:
    """Print each finding as ``severity code: message`` and its hint (human view only)."""
    from ..render import stdout

    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    for f in findings:
        stdout.print(f"[{colours[f.severity]}]{f.severity}[/] {f.code}: {f.message}", markup=True, highlight=False)
        stdout.print(f"  hint: {f.hint}", markup=False, highlight=False)
