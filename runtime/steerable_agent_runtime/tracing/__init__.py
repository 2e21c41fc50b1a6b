"""Tracing: the TraceRecorder (:mod:`.recorder`), the OTLP/HTTP JSON mapping (:mod:`.otlp`)
and a standard-library OTLP exporter (:mod:`.exporter`)."""

from .recorder import (REDACTED, RunHandle, SpanHandle, TraceRecorder, is_sampled, is_secret_key, new_span_id,
                       new_trace_id, redact, rejection_threshold)

__all__ = ["REDACTED", "RunHandle", "SpanHandle", "TraceRecorder", "is_sampled", "is_secret_key", "new_span_id",
           "new_trace_id", "redact", "rejection_threshold"]
