"""Tracing: the TraceRecorder (:mod:`.recorder`), attribute redaction (:mod:`.redaction`), the
OTLP/HTTP JSON mapping (:mod:`.otlp`)
and a standard-library OTLP exporter (:mod:`.exporter`, imported on first use: it loads ssl and
http.client)."""

from __future__ import annotations

from ..lazy import lazy_exports
from .otlp import DEFAULT_SERVICE_NAME, TraceBundle, encode_request, export_request
from .recorder import (RunHandle, SpanHandle, TraceRecorder, is_sampled, new_span_id,
                       new_trace_id, rejection_threshold)
from .redaction import REDACTED, is_secret_key, redact

_LAZY = {"ExportResult": ".exporter", "OtlpHttpExporter": ".exporter"}

__all__ = ["DEFAULT_SERVICE_NAME", "REDACTED", "RunHandle", "SpanHandle", "TraceBundle", "TraceRecorder",
           "encode_request", "export_request", "is_sampled", "is_secret_key", "new_span_id", "new_trace_id",
           "redact", "rejection_threshold", *sorted(_LAZY)]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
