"""The OTLP/HTTP JSON mapping of stored traces (an ExportTraceServiceRequest as a dict).

Shape: ``{"resourceSpans": [{"resource": {...}, "scopeSpans": [{"scope": {...}, "spans": [...]}]}]}``.

Guarantees (OTLP JSON encoding, opentelemetry-proto ``docs/specification.md``):
- keys are lowerCamelCase; ``traceId`` is 32 and ``spanId``/``parentSpanId`` 16 lowercase hex
  digits (not base64), never all zero; ``kind`` and ``status.code`` are integers;
  ``startTimeUnixNano``/``endTimeUnixNano``/``timeUnixNano`` are decimal strings of
  nanoseconds since the Unix epoch, within fixed64's range (clamped at both ends); a span
  never ends before it starts (a stored end before its start, which only another writer can
  leave, exports as the start).
- attributes are typed AnyValues: bool is checked before int; ints in int64 range are
  ``intValue`` decimal strings (wider ints become ``stringValue``); non-finite floats are
  ``doubleValue`` ``"NaN"``/``"Infinity"``/``"-Infinity"`` (the proto3 JSON spelling, since
  JSON has no such numbers); lists are ``arrayValue``, dicts ``kvlistValue``; None attribute
  values are left out.
- each stored trace becomes one root span ``agent.run`` (id derived from the trace id, so a
  re-export produces the same ids) carrying session/chat/user ids and the outcome; stored
  spans without a parent become its children. ``parentSpanId`` appears only on child spans.
- the resource carries ``service.name``.
- ids that are not valid OTLP ids (e.g. hand-made fixtures) are replaced by a deterministic
  SHA-256 derived id; the stored id is kept in a ``steerable.*_id`` attribute.
- ``encode_request`` produces strict JSON (``allow_nan=False``): every request this module
  builds encodes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..models import HarnessTrace, TraceEvent, TraceSpan

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2

DEFAULT_SERVICE_NAME = "steerable-agent-runtime"
SCOPE_NAME = "steerable_agent_runtime.tracing"
ROOT_SPAN_NAME = "agent.run"

_KIND_TO_OTLP = {"llm": SPAN_KIND_CLIENT, "tool": SPAN_KIND_INTERNAL, "approval": SPAN_KIND_INTERNAL}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT64_MAX = 2**64 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class TraceBundle(BaseModel):
    """One stored trace with its spans and events: the unit the mapping exports."""

    model_config = ConfigDict(extra="forbid")

    trace: HarnessTrace
    spans: list[TraceSpan] = []
    events: list[TraceEvent] = []


def unix_nanos(timestamp: str) -> str:
    """An ISO 8601 timestamp as decimal-string nanoseconds since the epoch (exact, no float;
    the OTLP field is fixed64: times before 1970 clamp to 0, times after July 2554 to 2**64 - 1,
    since a value out of range makes the collector refuse the whole request)."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return str(min(max(0, micros) * 1000, _UINT64_MAX))


def _start_end(start: str, end: str) -> tuple[str, str]:
    """(startTimeUnixNano, endTimeUnixNano), the end never before the start."""
    start_ns, end_ns = unix_nanos(start), unix_nanos(end)
    return start_ns, end_ns if int(end_ns) >= int(start_ns) else start_ns


def any_value(value: Any) -> dict[str, Any]:
    """The OTLP AnyValue of a JSON-like Python value (see module guarantees)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"intValue": str(value)}
        return {"stringValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": _double(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": attributes(value)}}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


def _double(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def attributes(mapping: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """OTLP KeyValue list of ``mapping``, keys as strings, None values left out."""
    return [{"key": str(k), "value": any_value(v)} for k, v in (mapping or {}).items() if v is not None]


def otlp_id(raw: str, nbytes: int, *, salt: str = "") -> str:
    """``raw`` when it is already a valid OTLP id of ``nbytes`` (lowercased), else a
    deterministic non-zero id derived from SHA-256 of ``salt`` and ``raw``."""
    candidate = raw.lower()
    if re.fullmatch(f"[0-9a-f]{{{nbytes * 2}}}", candidate) and int(candidate, 16):
        return candidate
    digest = hashlib.sha256(f"{salt}\x00{raw}".encode()).hexdigest()[: nbytes * 2]
    return digest if int(digest, 16) else "0" * (nbytes * 2 - 1) + "1"


def root_span_id(trace_id: str) -> str:
    """The id of a trace's synthesised ``agent.run`` root span (deterministic, 16 hex)."""
    return otlp_id(f"root:{trace_id}", 8, salt="agent.run")


def _root_span(trace: HarnessTrace, otlp_trace_id: str, end: str) -> dict[str, Any]:
    attrs = {"session.id": trace.session_id, "steerable.chat_id": trace.chat_id,
             "user.id": trace.user_id, "steerable.outcome": trace.outcome,
             "steerable.trace.open": True if trace.ended_at is None else None}
    if otlp_trace_id != trace.trace_id:
        attrs["steerable.trace_id"] = trace.trace_id
    status = {"error": STATUS_ERROR, "ok": STATUS_OK}.get(trace.outcome or "", STATUS_UNSET)
    start_ns, end_ns = _start_end(trace.started_at, end)
    span = {"traceId": otlp_trace_id, "spanId": root_span_id(trace.trace_id), "name": ROOT_SPAN_NAME,
            "kind": SPAN_KIND_INTERNAL, "startTimeUnixNano": start_ns,
            "endTimeUnixNano": end_ns, "attributes": attributes(attrs),
            "status": {"code": status}}
    if status == STATUS_ERROR:
        span["status"]["message"] = f"run ended with outcome {trace.outcome}"
    return span


def _span_status(span: TraceSpan) -> dict[str, Any]:
    error_type = (span.attrs or {}).get("error.type")
    if error_type:
        return {"code": STATUS_ERROR, "message": str(error_type)}
    return {"code": STATUS_UNSET}


def _event(event: TraceEvent, orphan: bool) -> dict[str, Any]:
    attrs = dict(event.attrs or {})
    if orphan:
        attrs["steerable.span_id"] = event.span_id
    return {"timeUnixNano": unix_nanos(event.at), "name": event.name, "attributes": attributes(attrs)}


def _child_span(bundle: TraceBundle, span: TraceSpan, otlp_trace_id: str, fallback_end: str,
                events: list[dict[str, Any]]) -> dict[str, Any]:
    trace_id = bundle.trace.trace_id
    attrs = dict(span.attrs or {})
    attrs["steerable.span.kind"] = span.kind
    span_id = otlp_id(span.span_id, 8, salt=trace_id)
    if span_id != span.span_id:
        attrs["steerable.span_id"] = span.span_id
    if span.end_at is None:
        attrs["steerable.span.open"] = True
    parent = otlp_id(span.parent_id, 8, salt=trace_id) if span.parent_id else root_span_id(trace_id)
    start_ns, end_ns = _start_end(span.start_at, span.end_at or fallback_end)
    return {"traceId": otlp_trace_id, "spanId": span_id, "parentSpanId": parent, "name": span.name,
            "kind": _KIND_TO_OTLP.get(span.kind or "", SPAN_KIND_INTERNAL),
            "startTimeUnixNano": start_ns, "endTimeUnixNano": end_ns,
            "attributes": attributes(attrs), "events": events, "status": _span_status(span)}


def _trace_end(bundle: TraceBundle) -> str:
    """The trace's end, or for a trace still open the latest time it recorded."""
    if bundle.trace.ended_at:
        return bundle.trace.ended_at
    times = [bundle.trace.started_at, *(s.end_at or s.start_at for s in bundle.spans),
             *(e.at for e in bundle.events)]
    return max(times)


def bundle_spans(bundle: TraceBundle) -> list[dict[str, Any]]:
    """The OTLP spans of one trace: its ``agent.run`` root first, then its stored spans.

    Events are attached to their span; an event whose span is not in the bundle goes to the
    root span with its stored span id in ``steerable.span_id`` (nothing is dropped).
    """
    otlp_trace_id = otlp_id(bundle.trace.trace_id, 16, salt="trace")
    end = _trace_end(bundle)
    known = {s.span_id for s in bundle.spans}
    by_span: dict[str, list[dict[str, Any]]] = {}
    orphans = []
    for event in bundle.events:
        if event.span_id in known:
            by_span.setdefault(event.span_id, []).append(_event(event, False))
        else:
            orphans.append(_event(event, True))
    root = _root_span(bundle.trace, otlp_trace_id, end)
    root["events"] = orphans
    children = [_child_span(bundle, s, otlp_trace_id, end, by_span.get(s.span_id, [])) for s in bundle.spans]
    return [root, *children]


def export_request(bundles: Iterable[TraceBundle], *, service_name: str = DEFAULT_SERVICE_NAME,
                   resource_attrs: Mapping[str, Any] | None = None, scope_version: str | None = None,
                   ) -> dict[str, Any]:
    """The ExportTraceServiceRequest (JSON dict) of ``bundles``: one resource, one scope."""
    resource = {"service.name": service_name, **dict(resource_attrs or {})}
    scope: dict[str, Any] = {"name": SCOPE_NAME}
    if scope_version:
        scope["version"] = scope_version
    spans = [span for bundle in bundles for span in bundle_spans(bundle)]
    return {"resourceSpans": [{"resource": {"attributes": attributes(resource)},
                               "scopeSpans": [{"scope": scope, "spans": spans}]}]}


def count_spans(request: Mapping[str, Any]) -> int:
    """How many spans an ExportTraceServiceRequest dict carries."""
    return sum(len(ss.get("spans", [])) for rs in request.get("resourceSpans", [])
               for ss in rs.get("scopeSpans", []))


def encode_request(request: Mapping[str, Any]) -> bytes:
    """Strict, compact UTF-8 JSON of a request (raises ValueError on NaN/Infinity numbers)."""
    return json.dumps(request, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
