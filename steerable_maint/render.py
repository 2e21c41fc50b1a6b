"""Shared CLI plumbing: run one library call, print its report, map errors to exit codes.

Exit codes (DESIGN.md): 0 clean; 1 problems found; 2 usage error; 3 cannot run;
4 internal error. Expected failures print ``Error: ...`` and ``Hint: ...`` on stderr and
never a traceback (set STEERABLE_DEBUG=1 to see one for an internal error).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from steerable_agent_runtime.errors import SteerableError

R = TypeVar("R", bound=BaseModel)

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_CANNOT_RUN, EXIT_INTERNAL = 0, 1, 2, 3, 4

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def fail(message: str, hint: str, code: int) -> "click.exceptions.Exit":
    """Print the one-line error and hint to stderr and return the exit to raise."""
    click.echo(f"Error: {message}", err=True)
    click.echo(f"Hint: {hint}", err=True)
    return click.exceptions.Exit(code)


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
        if as_json:
            click.echo(report.model_dump_json(indent=2))
        else:
            render(report)
    except SteerableError as exc:
        raise fail(exc.message, exc.hint, exc.exit_code) from None
    except KeyboardInterrupt:
        raise fail("interrupted", "nothing was left half-done; re-run the command", EXIT_CANNOT_RUN) from None
    except Exception as exc:  # the one place an unexpected failure is turned into exit 4
        if os.environ.get("STEERABLE_DEBUG"):
            traceback.print_exc()
        raise fail(f"internal error: {type(exc).__name__}: {exc}",
                   "this is a bug; re-run with STEERABLE_DEBUG=1 and report the traceback", EXIT_INTERNAL) from None
    code = exit_code(report) if exit_code else getattr(report, "exit_code", EXIT_OK)
    if code:
        raise click.exceptions.Exit(code)
