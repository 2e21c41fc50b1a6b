"""parse_duration: the valid forms and the UsageError for everything else."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from steerable_agent_runtime.errors import UsageError
from steerable_agent_runtime.maintenance.duration import cutoff_timestamp, parse_duration


@pytest.mark.parametrize("text, expected", [
    ("45m", timedelta(minutes=45)), ("12h", timedelta(hours=12)), ("30d", timedelta(days=30)),
    ("90d", timedelta(days=90)), ("2w", timedelta(weeks=2)), (" 7D ", timedelta(days=7)),
])
def test_parse_duration_accepts_number_and_unit(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "30x", "-3d", "1.5d", "0d", "30 days", "3d4h", "1y"])
def test_parse_duration_refuses_other_text_with_usage_error(text):
    with pytest.raises(UsageError) as info:
        parse_duration(text)
    assert info.value.exit_code == 2
    assert "30d" in info.value.hint and "12h" in info.value.hint


def test_cutoff_is_normalised_utc_text_now_minus_duration():
    now = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert cutoff_timestamp(timedelta(days=1), now) == "2026-02-28T12:00:00.000000Z"
