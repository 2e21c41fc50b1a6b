"""The steerable-maint command group: parse, one library call, render, exit code."""

from __future__ import annotations

import click

from steerable_agent_runtime import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steerable-maint")
def main() -> None:
    """Maintenance and forensics for steerable-agent-runtime SQLite stores.

    Exit codes: 0 clean; 1 problems found; 2 usage error; 3 cannot run; 4 internal error.
    """
