"""``steerable-maint traces``: read-only export of stored traces as OTLP/HTTP JSON."""

from __future__ import annotations

import math
from pathlib import Path

import click

from steerable_agent_runtime.maintenance import export_traces, TracesReport
from steerable_agent_runtime.tracing import DEFAULT_SERVICE_NAME

from ..render import run_job


class FiniteSeconds(click.ParamType):
    """A finite number of seconds, at least 0.1 (``nan``, ``inf``, 0 and negatives are refused)."""

    name = "SECONDS"

    def convert(self, value, param, ctx):  # type: ignore[override]
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0.1:
            self.fail(f"{value!r} is not a finite number of seconds of at least 0.1", param, ctx)
        return seconds


def _render(report: TracesReport) -> None:
    """Human summary on stdout (``--json`` prints the report instead)."""
    what = f"{report.traces} trace(s) ({report.spans} spans, {report.events} events)"
    if report.destination == "file":
        click.echo(f"Exported {what} to {report.out} ({report.out_bytes} bytes, mode 0600)")
        click.echo(f"sha256 {report.out_sha256}")
    else:
        requests = len(report.requests)
        click.echo(f"Sent {what} to {report.endpoint} in {requests} request(s)")
        if report.traces and not report.rejected_spans:
            click.echo("The collector accepted every span.")
    for finding in report.findings:
        click.echo(f"{finding.severity}: [{finding.code}] {finding.message}")
        click.echo(f"  hint: {finding.hint}")


@click.command()
@click.argument("db", type=click.Path(path_type=Path, readable=False))  # the library says why it cannot read
@click.option("--session", "session_id", metavar="ID", help="Only the traces of this session.")
@click.option("--chat", "chat_id", metavar="ID", help="Only the traces of this chat.")
@click.option("--since", metavar="AGE|TIME", help="Only traces started since: 45m, 12h, 7d, 2w, or an ISO time.")
@click.option("--out", type=click.Path(path_type=Path), metavar="FILE.json",
              help="Write the OTLP/HTTP JSON request to this new file (mode 0600).")
@click.option("--endpoint", metavar="URL",
              help="POST to this OTLP/HTTP collector (base URL; /v1/traces is appended).")
@click.option("--force", is_flag=True, help="Replace an existing --out file.")
@click.option("--gzip/--no-gzip", default=None, help="Compress the POST body (default: OTEL_EXPORTER_OTLP_COMPRESSION).")
@click.option("--deadline", type=FiniteSeconds(), default=30.0, show_default=True,
              help="Seconds to keep retrying a busy or unreachable collector.")
@click.option("--service-name", default=DEFAULT_SERVICE_NAME, show_default=True,
              help="The service.name resource attribute.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def command(db: Path, session_id: str | None, chat_id: str | None, since: str | None, out: Path | None,
            endpoint: str | None, force: bool, gzip: bool | None, deadline: float, service_name: str,
            as_json: bool) -> None:
    """Export stored traces read-only, for Jaeger, Tempo or any OTLP backend.

    Filters combine. Exactly one of --out and --endpoint. Collector headers come from
    OTEL_EXPORTER_OTLP_HEADERS. Exit 1 when the collector rejected spans.
    """
    run_job(lambda progress: export_traces(
        db, out=out, endpoint=endpoint, session_id=session_id, chat_id=chat_id, since=since, force=force,
        service_name=service_name, gzip=gzip, deadline=deadline, progress=progress),
        as_json=as_json, render=_render)
