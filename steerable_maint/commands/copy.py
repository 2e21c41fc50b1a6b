"""steerable-maint copy SRC.db --to URL|DEST.db [--dry-run] [--json]."""

from __future__ import annotations

import click
from rich.table import Table
from steerable_agent_runtime.maintenance import CopyReport, copy_store

from ..render import render_findings, run_job, stdout


@click.command(help="Copy every row of the store SRC.db, byte for byte, into a SqlAlchemy store (a URL such as "
                    "postgresql://user:password@host/db) or another SQLite file. Reads SRC.db read-only (safe "
                    "while the app runs); verifies each row's CRC on both sides; a re-run copies only what is "
                    "missing and never overwrites. Exit: 0 done; 1 rows skipped (damaged source rows, conflicts); "
                    "2 bad arguments; 3 cannot run (not a store, unreachable server, wrong credentials, lease held).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.option("--to", "to", required=True, metavar="URL|DEST.db",
              help="A database URL (postgresql://, sqlite:///) or a SQLite file path (created 0600 if missing).")
@click.option("--batch", type=click.IntRange(min=1), default=500, show_default=True,
              help="Rows per transaction on the destination.")
@click.option("--dry-run", is_flag=True, help="Count what would be copied; write nothing, create nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, to: str, batch: int, dry_run: bool, as_json: bool) -> None:
    run_job(lambda progress: copy_store(db, to=to, dry_run=dry_run, batch=batch, progress=progress),
            as_json=as_json, render=_render)


def _render(report: CopyReport) -> None:
    verb = "would copy" if report.dry_run else "copied"
    table = Table(title=f"copy {report.path} -> {report.destination}"
                  + (" (dry run: nothing changed)" if report.dry_run else ""))
    for column in ("table", "rows", verb, "already there", "skipped"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for name, rows in report.rows.items():
        table.add_row(name, str(rows), str(report.copied[name]), str(report.already[name]), str(report.skipped[name]))
    stdout.print(table)
    render_findings(report.findings)
    verdict = "[red]some rows were not copied[/]" if report.has_errors else "[green]every row is in the destination[/]"
    stdout.print(f"result: {verdict}" if not report.dry_run else f"result: {sum(report.copied.values())} rows {verb}")
