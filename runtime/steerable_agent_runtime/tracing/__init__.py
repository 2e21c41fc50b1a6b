"""Tracing: the TraceRecorder (:mod:`.recorder`), attribute redaction (:mod:`.redaction`), the
OTLP/HTTP JSON mapping (:mod:`.otlp`)
and a standard-library OTLP exporter (:mod:`.exporter`, imported on first use: it loads ssl and
http.client)."""

from __future__ import annotations

import importlib
from typing import Any

from .otlp import DEFAULT_SERVICE_NAME, TraceBundle, encode_request, export_request
from .recorder import (RunHandle, SpanHandle, TraceRecorder, is_sampled, new_span_id,
                       new_trace_id, rejection_threshold)
from .redaction import REDACTED, is_secret_key, redact

_LAZY = {"ExportResult": ".exporter", "OtlpHttpExporter": ".exporter"}

__all__ = ["DEFAULT_SERVICE_NAME", "REDACTED", "RunHandle", "SpanHandle", "TraceBundle", "TraceRecorder",
           "encode_request", "export_request", "is_sampled", "is_secret_key", "new_span_id", "new_trace_id",
           "redact", "rejection_threshold", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
