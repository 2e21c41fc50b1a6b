"""The steerable-maint command group: parse, one library call, render, exit code.

Each subcommand lives in ``steerable_maint/commands/<name>.py`` and exposes a click
command named ``command``; they are imported and registered statically below, so a command
that fails to import fails the CLI loudly instead of vanishing from ``--help``.
"""

from __future__ import annotations

import sys

import click

from steerable_agent_runtime import __version__
from steerable_agent_runtime.errors import ExitCode

from .commands import archive, check, compact, copy, history, inspect, repair, restore, salvage, search, traces

COMMANDS = {
    "check": check, "inspect": inspect, "history": history, "search": search, "compact": compact,
    "archive": archive, "restore": restore, "salvage": salvage, "traces": traces, "copy": copy, "repair": repair,
}


class _Group(click.Group):
    """A group that reports usage errors as one Error: line and one Hint: line, exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        try:
            code = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "steerable-maint"
            click.echo(f"Error: {exc.format_message()}", err=True)
            click.echo(f"Hint: run `{command} --help` for the usage", err=True)
            sys.exit(ExitCode.USAGE)
        except click.Abort:
            click.echo("Error: aborted", err=True)
            click.echo("Hint: nothing was left half-done; re-run the command", err=True)
            sys.exit(ExitCode.CANNOT_RUN)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steerable-maint")
def main() -> None:
    """Maintenance and forensics for steerable-agent-runtime SQLite stores.

    Exit codes: 0 clean; 1 problems found; 2 usage error; 3 cannot run; 4 internal error.
    """


for _name, _module in COMMANDS.items():
    main.add_command(_module.command, _name)
