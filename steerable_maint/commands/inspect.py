"""steerable-maint inspect DB [--json]: the one-screen overview, read-only."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import InspectReport, inspect_store

from ..render import human_bytes, render_findings, run_job, stdout


@click.command(help="One-screen overview of a store, read-only (safe while the app runs): file sizes, pages, "
                    "schema and record versions, rows per table, newest write, lease holder. "
                    "Exit: 0 shown; 2 bad arguments; 3 cannot run (not a store).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, as_json: bool) -> None:
    run_job(lambda progress: inspect_store(db, progress=progress), as_json=as_json, render=_render)


def _size(count: int | None) -> str:
    return "absent" if count is None else human_bytes(count)


def _render(r: InspectReport) -> None:
    table = Table(title=f"inspect {r.path}", show_header=False)
    table.add_column("what")
    table.add_column("value")
    lease = f"held by pid {r.lease_holder_pid}" if r.lease_held else "free (the app is not running)"
    for what, value in (
            ("files", f"db {_size(r.db_bytes)}, -wal {_size(r.wal_bytes)}, -shm {_size(r.shm_bytes)}"),
            ("pages", f"{r.page_count} x {r.page_size} B, {r.freelist_count} free; journal {r.journal_mode}"),
            ("schema", f"v{r.schema_version} (this build reads up to v{r.build_schema_version});"
                       f" application_id {r.application_id:#x}"),
            ("rows", ", ".join(f"{t} {n}" for t, n in r.rows.items()) or "-"),
            ("history", f"{r.records} records; versions " + (", ".join(f"v{v}: {n}" for v, n in
                                                                    r.record_versions.items()) or "-")),
            ("newest write", f"{r.newest_write} ({r.newest_write_table})" if r.newest_write else "-"),
            ("lease", lease),
            ("read via", r.access)):
        table.add_row(what, value)
    stdout.print(table)
    render_findings(r.findings)
