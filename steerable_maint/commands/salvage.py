"""steerable-maint salvage DB --out FILE.jsonl [--rebuild NEW.db] [--force] [--json]."""

from __future__ import annotations

import click

from steerable_agent_runtime.maintenance import salvage, SalvageReport

from ..render import render_findings, run_job, stderr

_SOURCES = ("btree", "unallocated", "freelist", "wal")


@click.command(help="Export every decodable row to JSONL (one object per row copy), also when SQLite "
                    "refuses the file; never writes the source. --rebuild writes a fresh store from the "
                    "newest verified copy of each row. Exit: 0 all recovered and verified; 1 rows lost "
                    "or unverified; 2 bad arguments; 3 cannot run (not a store, output exists, lease held).")
@click.argument("db", type=click.Path(dir_okay=True, path_type=str, readable=False))  # the library says why
@click.option("--out", required=True, type=click.Path(path_type=str), help="The JSONL file to write (created 0600).")
@click.option("--rebuild", type=click.Path(path_type=str), default=None, help="Also write a fresh store here.")
@click.option("--force", is_flag=True, help="Replace existing output files.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, out: str, rebuild: str | None, force: bool, as_json: bool) -> None:
    run_job(lambda progress: salvage(db, out, rebuild=rebuild, force=force, progress=progress),
            as_json=as_json, render=_render)


def _render(report: SalvageReport) -> None:
    """The summary goes to stderr: the rows themselves are in the JSONL file."""
    stderr.print(f"salvage {report.path} -> {report.out} (read by {report.method}; page size {report.page_size},"
                 f" {report.page_size_source})", highlight=False)
    for name, t in sorted(report.tables.items()):
        found = ", ".join(f"{s} {t.copies_by_source[s]}" for s in _SOURCES if t.copies_by_source.get(s))
        stderr.print(f"  {name}: {t.keys} rows, {t.verified} verified, {t.unverified} failing their checksum,"
                     f" {t.invalid} invalid; {t.superseded} older and {t.uncommitted} uncommitted copies;"
                     f" found in {found}", highlight=False)
    stderr.print(f"{report.rows_written} row copies written to {report.out}", highlight=False)
    if report.rebuild:
        placed = sum(report.rebuilt.values())
        stderr.print(f"rebuilt {report.rebuild}: {placed} rows placed, {report.unplaced_total} not placed",
                     highlight=False)
    render_findings(report.findings, stderr)
