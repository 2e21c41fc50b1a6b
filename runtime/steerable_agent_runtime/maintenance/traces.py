"""Read-only export of stored traces as OTLP/HTTP JSON: to a file, or POSTed to a collector.

The library half of ``steerable-maint traces DB [--session ID] [--chat ID] [--since 7d]
(--out FILE.json | --endpoint URL) [--json]``. Filters combine (all must match).

Guarantees:
- Read-only (DESIGN.md): the store is opened with ``open_readonly``: no lease, no
  checkpoint, committed rows still in the ``-wal`` are seen, no byte of db/-wal/-shm changes,
  no file is created next to the database.
- Fail closed: a row whose checksum does not match raises DataIntegrityError, a row that
  does not parse raises DatabaseDamagedError, each naming table and key; nothing is
  skipped silently (``check``/``salvage`` are the tolerant tools).
- ``--out``: the request is written to a temp file beside the target, fsynced, then linked
  into place (never replacing an existing file: OutputExistsError, unless ``force``, then
  an atomic rename), and the directory is fsynced. The file has mode 0600 (traces carry
  users' session, chat and user ids). The output may not be the store or its sidecars.
- ``--endpoint``: traces are sent in requests of at most ``batch_spans`` spans (a trace is
  never split); each request is retried by the exporter's rules. Spans the collector
  rejects (partial success) are an ``error`` finding (exit 1); an export that fails raises
  ExportError saying how many requests had been accepted before.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from ..errors import (
    DatabaseDamagedError,
    DataIntegrityError,
    ExportError,
    OutputExistsError,
    UsageError,
)
from ..models import HarnessTrace, TraceEvent, TraceSpan, WireModel, normalize_timestamp
from ..tracing.otlp import DEFAULT_SERVICE_NAME, TraceBundle, encode_request, export_request
from ..tracing.exporter import ExportResult, OtlpHttpExporter
from ..privatefile import atomic_output
from ..storage.checksum import Checker, identity_sql, store_checker
from .duration import HINT as DURATION_HINT
from .duration import cutoff_timestamp, parse_duration
from .readonly import read_store
from ..storage.specialfiles import refuse_special_output
from ..storage.access import is_store_file
from .codes import finding
from .report import Finding, JobReport, Progress, no_progress

M = TypeVar("M", bound=WireModel)
DEFAULT_BATCH_SPANS = 1000


class TracesReport(JobReport):
    """What ``traces`` exported, where to, and what the collector said."""

    job: Literal["traces"] = "traces"
    session_id: str | None = None
    chat_id: str | None = None
    since: str | None = None
    traces: int = 0
    spans: int = 0
    events: int = 0
    destination: Literal["file", "endpoint"]
    out: str | None = None
    out_bytes: int | None = None
    out_sha256: str | None = None
    endpoint: str | None = None
    requests: list[ExportResult] = []
    rejected_spans: int = 0


def since_cutoff(since: str | None, now: datetime | None = None) -> str | None:
    """``since`` as a normalised UTC timestamp: a duration back from ``now`` (``7d``) or an
    ISO 8601 timestamp. Raises UsageError for anything else."""
    if since is None:
        return None
    try:
        return cutoff_timestamp(parse_duration(since), now)
    except UsageError:
        pass
    try:
        return normalize_timestamp(since.strip())
    except ValueError:
        raise UsageError(f"--since: not a duration or timestamp: {since!r}",
                         hint=f"{DURATION_HINT}; or an ISO 8601 time such as 2026-01-31T00:00:00Z") from None


# reading --------------------------------------------------------------------------------
def _load(model: type[M], table: str, ok: Checker, row: tuple[Any, ...]) -> M:
    key, data, crc = row[:3]
    if not ok(table, row[3:], data, crc):
        raise DataIntegrityError(f"{table} {key!r}: stored bytes do not match their checksum (silent corruption)",
                                 table=table, key=key)
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise DatabaseDamagedError(f"{table} {key!r}: stored row does not parse: {exc.errors()[0]['msg']}",
                                   table=table, key=key,
                                   hint="run `steerable-maint check DB` to list the damage") from exc


def _select_traces(conn: sqlite3.Connection, session_id: str | None, chat_id: str | None,
                   since: str | None) -> list[HarnessTrace]:
    where, params = [], []
    for column, value in (("session_id", session_id), ("chat_id", chat_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("started_at >= ?")
        params.append(since)
    sql = f"SELECT trace_id, CAST(data AS BLOB), crc, {identity_sql('traces')} FROM traces"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY started_at, trace_id"
    ok = store_checker(conn)
    return [_load(HarnessTrace, "traces", ok, row) for row in conn.execute(sql, params)]


def _read_bundle(conn: sqlite3.Connection, trace: HarnessTrace) -> TraceBundle:
    ok = store_checker(conn)
    spans = [_load(TraceSpan, "spans", ok, row) for row in conn.execute(
        f"SELECT span_id, CAST(data AS BLOB), crc, {identity_sql('spans')} FROM spans WHERE trace_id = ? ORDER BY start_at, span_id",
        (trace.trace_id,))]
    events = [_load(TraceEvent, "events", ok, row) for row in conn.execute(
        f"SELECT event_id, CAST(data AS BLOB), crc, {identity_sql('events')} FROM events WHERE trace_id = ? ORDER BY at, event_id",
        (trace.trace_id,))]
    return TraceBundle(trace=trace, spans=spans, events=events)


def read_bundles(db: str | os.PathLike[str], *, session_id: str | None = None, chat_id: str | None = None,
                 since: str | None = None, progress: Progress = no_progress) -> list[TraceBundle]:
    """Every stored trace matching the filters (``since``: normalised timestamp, inclusive on
    started_at), with its spans and events, ordered by (started_at, trace_id). Read-only, on
    one snapshot (readonly.read_store: re-read if a checkpoint overtook an immutable read)."""
    def read(conn: sqlite3.Connection) -> list[TraceBundle]:
        traces = _select_traces(conn, session_id, chat_id, since)
        bundles = []
        for done, trace in enumerate(traces, start=1):
            bundles.append(_read_bundle(conn, trace))
            progress("read traces", done, len(traces))
        return bundles

    return read_store(db, read)


# writing a file -------------------------------------------------------------------------
def _refuse_store_paths(out: Path, db: Path) -> None:
    if is_store_file(out, db):
        raise UsageError(f"--out {out} is the store or one of its files", hint="write the export elsewhere")


def write_private_file(target: Path, data: bytes, *, force: bool = False) -> None:
    """Write ``data`` to ``target`` atomically with mode 0600 (see module guarantees).

    Raises OutputExistsError when ``target`` exists and not ``force``; the existing file is
    then untouched and no temp file is left behind.
    """
    refuse_special_output(target)
    if os.path.lexists(target) and not force:
        raise OutputExistsError(f"{target} already exists", path=str(target))
    with atomic_output(target, force=force) as (_tmp, fh):
        fh.write(data)


# exporting ------------------------------------------------------------------------------
def batches(bundles: list[TraceBundle], max_spans: int) -> Iterator[list[TraceBundle]]:
    """Consecutive groups of bundles of at most ``max_spans`` OTLP spans each (a trace with
    more spans than that goes alone: traces are never split)."""
    group: list[TraceBundle] = []
    size = 0
    for bundle in bundles:
        spans = len(bundle.spans) + 1  # + the agent.run root span
        if group and size + spans > max_spans:
            yield group
            group, size = [], 0
        group.append(bundle)
        size += spans
    if group:
        yield group


def _send(bundles: list[TraceBundle], exporter: OtlpHttpExporter, service_name: str, batch_spans: int,
          progress: Progress) -> list[ExportResult]:
    groups = list(batches(bundles, batch_spans))
    results: list[ExportResult] = []
    for done, group in enumerate(groups, start=1):
        try:
            results.append(exporter.export(export_request(group, service_name=service_name)))
        except ExportError as exc:
            raise ExportError(f"{exc.message} ({len(results)} of {len(groups)} requests accepted before)",
                              hint=exc.hint, **exc.extra) from exc
        progress("export", done, len(groups))
    return results


def _findings(results: list[ExportResult]) -> list[Finding]:
    findings = []
    for n, result in enumerate(results, start=1):
        if result.rejected_spans:
            findings.append(finding("traces-spans-rejected",
                                    f"request {n}: the collector rejected {result.rejected_spans} span(s): "
                                    f"{result.message or 'no reason given'}"))
        elif result.message:
            findings.append(finding("traces-collector-warning", f"request {n}: {result.message}"))
    return findings


def export_traces(db: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None,
                  endpoint: str | None = None, session_id: str | None = None, chat_id: str | None = None,
                  since: str | None = None, force: bool = False, service_name: str = DEFAULT_SERVICE_NAME,
                  gzip: bool | None = None, deadline: float = 30.0, batch_spans: int = DEFAULT_BATCH_SPANS,
                  exporter: OtlpHttpExporter | None = None, now: datetime | None = None,
                  progress: Progress = no_progress) -> TracesReport:
    """Export the matching traces to ``out`` or to ``endpoint`` (exactly one; a given
    ``exporter`` counts as the endpoint, else one is made from ``endpoint``, ``gzip``,
    ``deadline`` and the OTEL_EXPORTER_OTLP_* variables). See the module guarantees.

    Raises UsageError (bad arguments), NotAStoreError / DatabaseDamagedError /
    DataIntegrityError / SchemaTooNewError (the store), OutputExistsError, ExportError.
    """
    if (out is None) == (endpoint is None and exporter is None):
        raise UsageError("give exactly one destination: --out FILE.json or --endpoint URL",
                         hint="e.g. steerable-maint traces sessions.db --chat CHAT --out chat.json")
    if out is not None:
        _refuse_store_paths(Path(out), Path(db))
    cutoff = since_cutoff(since, now)
    if exporter is None and endpoint is not None:
        exporter = OtlpHttpExporter(endpoint, gzip=gzip, deadline=deadline)
    bundles = read_bundles(db, session_id=session_id, chat_id=chat_id, since=cutoff, progress=progress)
    report = TracesReport(path=str(db), session_id=session_id, chat_id=chat_id, since=cutoff,
                          traces=len(bundles), spans=sum(len(b.spans) for b in bundles),
                          events=sum(len(b.events) for b in bundles),
                          destination="file" if out is not None else "endpoint")
    if out is not None:
        return _to_file(report, bundles, Path(out), force, service_name)
    return _to_endpoint(report, bundles, exporter, service_name, batch_spans, progress)


def _to_file(report: TracesReport, bundles: list[TraceBundle], out: Path, force: bool,
             service_name: str) -> TracesReport:
    data = encode_request(export_request(bundles, service_name=service_name)) + b"\n"
    write_private_file(out, data, force=force)
    return report.model_copy(update={"out": str(out), "out_bytes": len(data),
                                     "out_sha256": hashlib.sha256(data).hexdigest()})


def _to_endpoint(report: TracesReport, bundles: list[TraceBundle], exporter: OtlpHttpExporter,
                 service_name: str, batch_spans: int, progress: Progress) -> TracesReport:
    results = _send(bundles, exporter, service_name, batch_spans, progress) if bundles else []
    return report.model_copy(update={"endpoint": exporter.url, "requests": results,
                                     "rejected_spans": sum(r.rejected_spans for r in results),
                                     "findings": _findings(results)})

