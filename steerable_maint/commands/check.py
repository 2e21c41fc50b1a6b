"""steerable-maint check DB [--quick] [--json]: every check of DESIGN.md, read-only."""

from __future__ import annotations

import click
from rich.table import Table

from steerable_agent_runtime.maintenance import CODES, DEFAULT_WAL_THRESHOLD, CheckReport, check, check_url

from ..render import human_bytes, render_findings, run_job, stdout


@click.command(help="Check a store read-only (safe while the app runs): SQLite integrity, schema, every row's "
                    "checksum/JSON/columns, history seqs and versions, orphans, lease, WAL size. DB may also be "
                    "a SqlAlchemy store's URL (postgresql://user:password@host/db): then the row checks run on "
                    "its rows. "
                    "Exit: 0 no errors; 1 errors found; 2 bad arguments; 3 cannot run (not a store).")
@click.argument("db", type=click.Path(path_type=str, readable=False))  # the library says why it cannot read
@click.option("--quick", is_flag=True, help="PRAGMA quick_check and no per-row JSON validation (much faster).")
@click.option("--max-per-code", type=click.IntRange(min=0), default=20, show_default=True,
              help="List at most this many findings of each code (all are counted).")
@click.option("--wal-threshold", type=click.IntRange(min=0), default=DEFAULT_WAL_THRESHOLD, show_default=True,
              metavar="BYTES", help="Report a -wal larger than this.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, quick: bool, max_per_code: int, wal_threshold: int, as_json: bool) -> None:
    if "://" in db:  # a SqlAlchemy store: the row checks on its rows (maintenance/check/server.py)
        run_job(lambda progress: check_url(db, quick=quick, max_per_code=max_per_code, progress=progress),
                as_json=as_json, render=_render)
        return
    run_job(lambda progress: check(db, quick=quick, max_per_code=max_per_code, wal_threshold_bytes=wal_threshold,
                                   progress=progress),
            as_json=as_json, render=_render)


def _render(report: CheckReport) -> None:
    mode = "quick check" if report.quick else "full check"
    stdout.print(f"{mode} of {report.path} (schema v{report.schema_version}, read via {report.access},"
                 f" -wal {human_bytes(report.wal_bytes)})", markup=False, highlight=False)
    if report.rows:
        versions = ", ".join(f"v{v}: {n}" for v, n in report.record_versions.items()) or "none"
        stdout.print("rows: " + ", ".join(f"{t} {n}" for t, n in report.rows.items())
                     + f"; history versions: {versions}", markup=False, highlight=False)
    if report.counts:
        table = Table(title="findings by code")
        for column in ("code", "severity", "count", "listed"):
            table.add_column(column, justify="left" if column in ("code", "severity") else "right")
        for code, count in report.counts.items():
            listed = sum(f.code == code for f in report.findings)
            table.add_row(code, CODES[code].severity, str(count), str(listed))
        stdout.print(table)
        render_findings(report.findings)
    for d in report.downgrades:
        stdout.print(f"downgrade: chat {d.record_id} needs record v{max(d.versions)}; intact. "
                     f"Tell the user: \"{d.tell_the_user}\"", markup=False, highlight=False)
    errors = sum(n for code, n in report.counts.items() if CODES[code].severity == "error")
    verdict = f"[red]{errors} error(s) found[/]" if report.has_errors else "[green]no errors[/]"
    stdout.print(f"result: {verdict}")
