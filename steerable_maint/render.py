"""The CLI's one output owner: run one library call, print its report, map errors to exit codes.

Everything steerable-maint prints goes through here: the report (JSON or human) on stdout
(salvage's summary on stderr: its rows are in the output file), findings, sizes, the
progress bar and every ``Error:``/``Hint:`` line on stderr. Exit codes are
:class:`~steerable_agent_runtime.errors.ExitCode`. Expected failures never print a traceback;
with STEERABLE_DEBUG=1 every failure also prints its exception chain (the causes kept by
``raise ... from``) to stderr.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from steerable_agent_runtime.errors import ExitCode, SteerableError

R = TypeVar("R", bound=BaseModel)

class _Console(Console):
    """A rich console whose broken pipe reaches run_job (rich itself would exit 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


stdout = _Console(soft_wrap=True)
stderr = _Console(stderr=True, soft_wrap=True)


def debug_enabled() -> bool:
    """Whether STEERABLE_DEBUG is set to something other than empty or 0."""
    return os.environ.get("STEERABLE_DEBUG", "") not in ("", "0")


_BREAKS = re.compile(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
MAX_LINE = 1000


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks (SQLite quotes multi-line schema SQL in some
    messages) become single spaces, other control characters (a terminal escape in stored
    data) are shown escaped, lone surrogates are escaped, and the line is cut at MAX_LINE."""
    text = _BREAKS.sub(" ", str(text).strip())
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 1] + "…"


def escape_unencodable_output() -> None:
    """Make stdout and stderr write a character they cannot encode as its backslash escape
    instead of failing the job: a lone surrogate in a stored value (JSON text ``"\\ud800"`` in
    a row's data) is shown as ``\\ud800``, the way ``one_line`` shows it in an Error line."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass  # not a text stream we can reconfigure: it keeps its own handler


def report_json(report: BaseModel) -> str:
    """The report as JSON text (``--json``). A stored value with a lone surrogate, which
    pydantic will not encode, is written as its JSON escape (``\\ud800``): the JSON stays
    valid and says exactly what is stored."""
    try:
        return report.model_dump_json(indent=2)
    except PydanticSerializationError:
        text = json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def fail(message: str, hint: str, code: int) -> "click.exceptions.Exit":
    """Print exactly one ``Error:`` line and one ``Hint:`` line to stderr; return the exit to raise."""
    try:
        click.echo(f"Error: {one_line(message) or 'failed'}", err=True)
        click.echo(f"Hint: {one_line(hint) or 'run the command with --help'}", err=True)
    except BrokenPipeError:  # nobody reads stderr any more; the exit code still tells
        quiet_broken_stdout(sys.stderr)
    return click.exceptions.Exit(code)


def quiet_broken_stdout(stream=None) -> None:
    """The reader of stdout (or ``stream``) went away: point it at /dev/null so nothing more
    (not even the interpreter's flush at exit) fails or prints an error about it."""
    stream = stream or sys.stdout
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


@contextmanager
def progress_bar() -> Iterator[Callable[[str, int, int | None], None]]:
    """A progress callback drawing a rich bar on stderr, or a no-op when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield lambda phase, done, total: None
        return
    # No refresh thread (auto_refresh=False; redrawn from the callback at most every 0.1 s):
    # check and salvage fork worker processes only from a single-threaded process.
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=stderr, transient=True, auto_refresh=False) as bar:
        tasks: dict[str, int] = {}
        drawn = [0.0]

        def update(phase: str, done: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)
            now = time.monotonic()
            if now - drawn[0] >= 0.1:
                drawn[0] = now
                bar.refresh()

        yield update


def run_job(call: Callable[[Callable[[str, int, int | None], None]], R], *, as_json: bool,
            render: Callable[[R], None], exit_code: Callable[[R], int] | None = None) -> None:
    """Run ``call(progress)``; print the report (JSON or human); exit with its code.

    SteerableError -> its Error/Hint lines and exit code; anything else -> exit 4.
    """
    try:
        with progress_bar() as progress:
            report = call(progress)
        try:
            if as_json:
                click.echo(report_json(report))
            else:
                render(report)
            sys.stdout.flush()
        except BrokenPipeError:  # `steerable-maint ... | head`: the reader has what it wanted
            quiet_broken_stdout()
    except SteerableError as exc:
        if debug_enabled():
            traceback.print_exception(exc)
        raise fail(exc.message, exc.hint, exc.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted", "nothing was left half-done; re-run the command", ExitCode.CANNOT_RUN) from None
    except Exception as exc:  # the one place an unexpected failure is turned into exit 4
        if debug_enabled():
            traceback.print_exception(exc)
        raise fail(f"internal error: {type(exc).__name__}: {exc}",
                   "this is a bug; re-run with STEERABLE_DEBUG=1 and report the traceback", ExitCode.INTERNAL) from None
    code = exit_code(report) if exit_code else getattr(report, "exit_code", ExitCode.OK)
    if code:
        raise click.exceptions.Exit(code)


_COLOURS = {"error": "red", "warning": "yellow", "info": "cyan"}


def render_findings(findings: list, console: Console = stdout) -> None:
    """Print each finding as ``severity code: message`` and its hint (human view only)."""
    for f in findings:
        console.print(f"[{_COLOURS[f.severity]}]{f.severity}[/] {f.code}: {f.message}", markup=True, highlight=False)
        console.print(f"  hint: {f.hint}", markup=False, highlight=False)


def human_bytes(count: int) -> str:
    """``1536`` -> ``1.5 KiB``: sizes for the human view (the JSON report keeps bytes)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
