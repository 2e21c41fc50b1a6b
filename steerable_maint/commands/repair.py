"""steerable-maint repair DB [--dry-run] [--json]."""

from __future__ import annotations

import click

from steerable_agent_runtime.maintenance import RepairReport, repair

from ..render import run_job, stdout


@click.command(help="Repair a corrupt store: take its lease, back its files up into a private folder "
                    "beside it, salvage and rebuild into a temp store, check the result, then swap it into "
                    "place. --dry-run does all but the swap. Exit: 0 repaired and nothing lost; 1 repaired "
                    "(or, with --dry-run, repairable) but rows or pages were lost (listed); 2 bad arguments; "
                    "3 cannot run (not a store, lease held, the result does not check clean): the original "
                    "is then exactly as it was.")
@click.argument("db", type=click.Path(dir_okay=True, path_type=str, readable=False))  # the library says why
@click.option("--dry-run", is_flag=True, help="Back up, salvage, rebuild and check, but do not swap.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def command(db: str, dry_run: bool, as_json: bool) -> None:
    run_job(lambda progress: repair(db, dry_run=dry_run, progress=progress), as_json=as_json, render=_render)


def _render(report: RepairReport) -> None:
    if report.rolled_back:
        stdout.print("an interrupted repair was rolled back first: the original files were restored", highlight=False)
    recovered = ", ".join(f"{t} {n}" for t, n in sorted(report.recovered.items())) or "no rows"
    verb = "would swap in" if report.dry_run else "swapped in"
    stdout.print(f"repair {report.path}: {verb} a rebuilt store with {recovered}", highlight=False)
    lost = [f"{n} {t} rows failing their checksum" for t, n in sorted(report.unverified.items())]
    if report.lost_keys:
        lost.append(f"{report.lost_keys} keys not placed")
    if report.damage:
        lost.append("damage: " + ", ".join(f"{c} x{n}" for c, n in sorted(report.damage.items())))
    stdout.print("lost: " + ("; ".join(lost) if lost else "nothing"), highlight=False)
    stdout.print(f"backup of the original files (and every salvaged row copy): {report.backup}", highlight=False)
    for f in report.findings:
        stdout.print(f"{f.severity} {f.code}: {f.message}", markup=False, highlight=False)
        stdout.print(f"  hint: {f.hint}", markup=False, highlight=False)
