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


def pytest_collection_modifyitems(config, items):
    """Every property test runs at least the loaded profile's example count. An explicit
    ``@settings(max_examples=400)`` overrides a profile, so without this the soak profile left
    the 46 tests that set one at their own count (found at stop 28). Under ``ci`` (40) nothing
    changes: a test's larger count stays."""
    floor = settings.default.max_examples
    for item in items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)  # set by @given / @settings
        if getattr(test, "hypothesis", None) is not None and current is not None and current.max_examples < floor:
            test._hypothesis_internal_use_settings = settings(current, max_examples=floor)


# PostgreSQL: one throwaway cluster per session (tests/pgcluster.py), a fresh database per test.
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def postgres():
    """The session's PostgreSQL server. Without one the test fails under CI=true and is
    skipped locally, with a message naming how to get one."""
    from tests.pgcluster import START_HINT, PgUnavailable, start_postgres

    try:
        server = start_postgres()
    except PgUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI: {exc}")
        pytest.skip(f"no PostgreSQL: {exc} ({START_HINT})")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL (superuser, trusted)."""
    return postgres.url(postgres.create_database())
