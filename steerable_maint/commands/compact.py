"""steerable-maint compact DB --traces-older-than 30d [--dry-run] [--no-vacuum] [--json]."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import compact, CompactReport, parse_duration

from ..render import human_bytes, run_job, stdout
from .options import duration_option


@click.command(help="Prune traces (with spans and events) older than a cutoff, then VACUUM. "
                    "Sessions, messages and history are never touched. "
                    "Exit: 0 done; 2 bad arguments; 3 cannot run (not a store, lease held, newer schema).")
@click.argument("db", type=click.Path(dir_okay=True, path_type=str, readable=False))  # the library says why
@duration_option("--traces-older-than", "Prune traces that started longer ago than this (45m, 12h, 30d, 2w).")
@click.option("--dry-run", is_flag=True, help="Count what would be pruned; change nothing.")
@click.option("--no-vacuum", is_flag=True, help="Skip the VACUUM (free pages stay in the file for reuse).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, traces_older_than: str, dry_run: bool, no_vacuum: bool, as_json: bool) -> None:
    run_job(lambda progress: compact(db, older_than=parse_duration(traces_older_than), dry_run=dry_run,
                                     vacuum=not no_vacuum, progress=progress),
            as_json=as_json, render=_render)


def _render(report: CompactReport) -> None:
    verb = "would prune" if report.dry_run else "pruned"
    table = Table(title=f"compact {report.path}" + (" (dry run: nothing changed)" if report.dry_run else ""))
    table.add_column("what")
    table.add_column(verb, justify="right")
    for name in ("traces", "spans", "events"):
        table.add_row(name, str(getattr(report, name)))
    table.add_row("batches", f"{report.batches} of up to {report.batch_size} traces")
    stdout.print(table)
    stdout.print(f"cutoff: started before {report.cutoff}")
    vacuum = "VACUUM done" if report.vacuumed else "no VACUUM"
    stdout.print(f"size (db + wal): {human_bytes(report.bytes_before)} -> {human_bytes(report.bytes_after)}"
                 f" ({vacuum})")
