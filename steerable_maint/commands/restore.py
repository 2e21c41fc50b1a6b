"""steerable-maint restore ARCHIVE.db --to DB --chat CHAT_ID [--json]."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import CHAT_TABLES, restore, RestoreReport

from ..render import render_findings, run_job, stdout


@click.command(help="Move one chat from ARCHIVE.db back into the store DB (copy, verify, then delete from "
                    "the archive). Exit: 0 done (or already restored); 1 conflict (see findings); "
                    "2 bad arguments or unknown chat; 3 cannot run (not a store, lease held, newer schema).")
@click.argument("archive_db", metavar="ARCHIVE.db", type=click.Path(path_type=str, readable=False))
@click.option("--to", "to", required=True, type=click.Path(path_type=str), metavar="DB", help="The store to restore into.")
@click.option("--chat", "chat_id", required=True, metavar="CHAT_ID", help="The chat to bring back.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(archive_db: str, to: str, chat_id: str, as_json: bool) -> None:
    run_job(lambda progress: restore(archive_db, to=to, chat_id=chat_id, progress=progress),
            as_json=as_json, render=_render)


def _render(report: RestoreReport) -> None:
    state = "restored" if report.restored else "not moved"
    table = Table(title=f"restore chat {report.chat_id}: {report.path} -> {report.target} ({state})")
    table.add_column("table")
    table.add_column("rows moved", justify="right")
    table.add_column("already in target", justify="right")
    for name in CHAT_TABLES:
        table.add_row(name, str(getattr(report.rows_moved, name)), str(getattr(report.rows_already_in_target, name)))
    stdout.print(table)
    render_findings(report.findings)
