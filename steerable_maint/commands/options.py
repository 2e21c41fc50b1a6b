"""Options shared by the write-job commands (compact, archive, restore). Not a command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def duration_option(name: str, help_text: str) -> Callable[[Any], Any]:
    """A required duration option; the text is parsed by the library (bad text -> exit 2)."""
    return click.option(name, required=True, metavar="DURATION", help=help_text)
