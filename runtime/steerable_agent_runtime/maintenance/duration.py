"""Parse the short durations of the maintenance CLI: ``45m``, ``12h``, ``30d``, ``2w``.

A duration is a positive whole number followed by one unit letter: ``m`` minutes,
``h`` hours, ``d`` days, ``w`` weeks (case-insensitive, surrounding spaces ignored).
Anything else raises UsageError (exit 2) whose hint shows the valid forms; zero is refused
because "older than now" would select everything, and so is a duration that reaches back
before year 1 (no cutoff can be written for it).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from ..errors import UsageError
from ..models import normalize_timestamp

UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_FORM = re.compile(r"^\s*(\d{1,6})\s*([mhdw])\s*$", re.IGNORECASE)
HINT = "write a whole number and a unit: 45m (minutes), 12h (hours), 30d (days), 2w (weeks)"


def parse_duration(text: str) -> timedelta:
    """Return the timedelta ``text`` names; raise UsageError for any other text."""
    match = _FORM.match(text or "")
    if match is None:
        too_long = re.match(r"^\s*\d{7,}\s*[mhdw]\s*$", text or "", re.IGNORECASE)
        raise UsageError(f"{'duration too large' if too_long else 'not a duration'}: {text!r}", hint=HINT)
    amount, unit = int(match.group(1)), match.group(2).lower()
    if amount == 0:
        raise UsageError(f"duration must be positive: {text!r}", hint=HINT)
    return timedelta(**{UNITS[unit]: amount})


def cutoff_timestamp(older_than: timedelta, now: datetime | None = None) -> str:
    """The normalised UTC timestamp ``now - older_than``; rows strictly older are selected.

    Stored timestamps are normalised text, so text comparison against this is time order.
    """
    if older_than <= timedelta(0):
        raise UsageError(f"duration must be positive: {older_than}", hint=HINT)
    moment = now or datetime.now(timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return normalize_timestamp(moment - older_than)
    except (OverflowError, ValueError):
        raise UsageError(f"duration too large: {older_than.days} days reaches back before year 1",
                         hint=HINT) from None
