"""The steerable-maint command group: parse, one library call, render, exit code.

Each subcommand lives in ``steerable_maint/commands/<name>.py`` and exposes a click
command named ``command``; they are imported and registered statically below, so a command
that fails to import fails the CLI loudly instead of vanishing from ``--help``.
"""

from __future__ import annotations

import os
import sys

import click

from steerable_agent_runtime import __version__
from steerable_agent_runtime.errors import ExitCode

from .render import escape_unencodable_output, fail, one_line, quiet_broken_stdout

from .commands import archive, check, compact, copy, history, inspect, repair, restore, salvage, search, traces

COMMANDS = {
    "check": check, "inspect": inspect, "history": history, "search": search, "compact": compact,
    "archive": archive, "restore": restore, "salvage": salvage, "traces": traces, "copy": copy, "repair": repair,
}


class _Group(click.Group):
    """A group that reports usage errors as one Error: line and one Hint: line, exit 2.

    No arguments at all prints the usage (the group's help) on stderr, exit 2. An argument
    that is not valid UTF-8 is refused before parsing (exit 2): paths and text reach
    SQLite, JSON reports and collectors, which all need UTF-8. A reader that went away
    (``steerable-maint ... | head``) ends the run quietly with the job's own exit code. What
    stdout or stderr cannot encode (a lone surrogate in a stored value) is written escaped.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        escape_unencodable_output()
        try:
            _refuse_non_utf8(argv)
            code = super().main(args=argv, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else self.get_usage(click.Context(self)), err=True)
            sys.exit(ExitCode.USAGE)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "steerable-maint"
            sys.exit(fail(exc.format_message(), f"run `{command} --help` for the usage", ExitCode.USAGE).exit_code)
        except click.exceptions.Exit as exc:  # a bad argument found by the library, or a job's code
            sys.exit(exc.exit_code)
        except click.Abort:
            sys.exit(fail("aborted", "nothing was left half-done; re-run the command", ExitCode.CANNOT_RUN).exit_code)
        except SystemExit as exc:
            # click answers EPIPE (``--help | head``) with exit 1 after wrapping stdout; a job's
            # own output handles it in render.run_job. The reader went away: not a failure.
            if exc.code == 1 and _reader_gone():
                quiet_broken_stdout()
                sys.exit(ExitCode.OK)
            raise
        sys.exit(code if isinstance(code, int) else 0)


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end was closed (poll reports an error on it)."""
    try:
        import select

        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (OSError, AttributeError, ValueError):  # no poll (Windows), or no fd 1
        return False


def _refuse_non_utf8(argv: list[str]) -> None:
    """Raise the usage exit for an argument that did not decode as UTF-8 (surrogate escapes)."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg) if isinstance(arg, str) else arg
            raise fail(f"argument {position} is not valid UTF-8: {one_line(repr(raw))}",
                       "pass paths and text in UTF-8 (for a file with such a name, make a symlink with a UTF-8"
                       " name and pass that)", ExitCode.USAGE) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="steerable-maint")
def main() -> None:
    """Maintenance and forensics for steerable-agent-runtime SQLite stores.

    Exit codes: 0 clean; 1 problems found; 2 usage error; 3 cannot run; 4 internal error.
    """


for _name, _module in COMMANDS.items():
    main.add_command(_module.command, _name)
