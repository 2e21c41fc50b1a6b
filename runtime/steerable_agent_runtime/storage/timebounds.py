"""Time bounds of a read (``list_traces(since=, until=)``): an instant, compared as stored.

Stored times are normalised to UTC ``...Z`` text, so text order is time order (DESIGN.md, Wire
models). A bound is normalised the same way before it is compared, so an offset
(``02:30+02:00``) or no zone (read as UTC) means the instant it names, in every store.
"""

from __future__ import annotations

from datetime import datetime

from ..errors import UsageError
from ..models import normalize_timestamp


def time_bound(name: str, value: str | datetime | None) -> str | None:
    """``value`` as the stored text of the same instant (None stays None); UsageError naming
    ``name`` for anything that is not an ISO 8601 timestamp."""
    if value is None:
        return None
    try:
        return normalize_timestamp(value)
    except (ValueError, TypeError):
        raise UsageError(f"{name} {value!r} is not an ISO 8601 timestamp",
                         hint=f"pass e.g. {name}='2026-01-01T00:00:00Z' (an offset such as +02:00 is fine)") from None
