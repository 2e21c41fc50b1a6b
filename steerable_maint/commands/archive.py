"""steerable-maint archive DB --to ARCHIVE.db --older-than 90d [--include-active] [--dry-run] [--json]."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import CHAT_TABLES, archive, ArchiveReport, parse_duration

from ..render import render_findings, run_job, stdout
from .options import duration_option


@click.command(help="Move whole chats idle longer than --older-than into ARCHIVE.db (a valid store; "
                    "created if missing, appended to otherwise). Copy, verify, then delete: a crash loses "
                    "nothing and a re-run converges. Exit: 0 done; 1 some chat conflicted (see findings); "
                    "2 bad arguments; 3 cannot run (not a store, lease held, newer schema).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.option("--to", "to", required=True, type=click.Path(path_type=str), metavar="ARCHIVE.db",
              help="The archive store (created 0600 if missing).")
@duration_option("--older-than", "Move chats with nothing newer than this (45m, 12h, 30d, 2w).")
@click.option("--include-active", is_flag=True, help="Also move chats whose sessions are still marked active.")
@click.option("--dry-run", is_flag=True, help="Count what would move; change nothing, create nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, to: str, older_than: str, include_active: bool, dry_run: bool, as_json: bool) -> None:
    run_job(lambda progress: archive(db, to=to, older_than=parse_duration(older_than), include_active=include_active,
                                     dry_run=dry_run, progress=progress),
            as_json=as_json, render=_render)


def _render(report: ArchiveReport) -> None:
    verb = "would move" if report.dry_run else "moved"
    title = f"archive {report.path} -> {report.archive}"
    table = Table(title=title + (" (dry run: nothing changed)" if report.dry_run else ""))
    table.add_column("table")
    table.add_column(f"rows {verb}", justify="right")
    table.add_column("already in archive", justify="right")
    for name in CHAT_TABLES:
        table.add_row(name, str(getattr(report.rows_moved, name)), str(getattr(report.rows_already_in_archive, name)))
    stdout.print(table)
    skipped = ", ".join(f"{n} {reason}" for reason, n in report.chats_skipped.items())
    stdout.print(f"chats {verb}: {report.chats_moved} in {report.batches} batches; kept: {skipped}")
    stdout.print(f"cutoff: nothing at or after {report.cutoff}"
                 + ("; archive file created" if report.archive_created else ""))
    if report.leftover_copies_removed.total:
        stdout.print(f"removed {report.leftover_copies_removed.total} rows from the archive that an interrupted"
                     f" earlier run had copied of {report.staying_chats_in_archive} chats that stay (each kept"
                     " byte-identical in the store)")
    render_findings(report.findings)
