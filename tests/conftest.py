"""Shared test configuration: hypothesis profiles.

- ``ci`` (default): small example counts so the default suite stays well under 10 minutes.
- ``soak``: many thousands of cases; run with ``pytest -m soak --hypothesis-profile=soak``
  (or ``pytest --hypothesis-profile=soak tests/...`` for the property tests alone).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("soak", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
