"""The steerable-maint command group: parse, one library call, render, exit code.

Each subcommand lives in ``steerable_maint/commands/<name>.py`` and exposes a click
command named ``command``; COMMANDS below registers them.
"""

from __future__ import annotations

import importlib
import sys

import click

from steerable_agent_runtime import __version__

COMMANDS = ("check", "inspect", "history", "search", "compact", "archive", "restore", "salvage", "traces", "copy",
            "repair")


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
            sys.exit(2)
        except click.Abort:
            click.echo("Error: aborted", err=True)
            click.echo("Hint: nothing was left half-done; re-run the command", err=True)
            sys.exit(3)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steerable-maint")
def main() -> None:
    """Maintenance and forensics for steerable-agent-runtime SQLite stores.

    Exit codes: 0 clean; 1 problems found; 2 usage error; 3 cannot run; 4 internal error.
    """


def _register() -> None:
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"steerable_maint.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"steerable_maint.commands.{name}":
                continue  # command not built into this checkout
            raise
        main.add_command(module.command, name)


_register()
