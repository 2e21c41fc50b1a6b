"""Fixtures: a sidecar process, cleaned up (and its stdout checked) after each test; one shared
in-memory sidecar for the tests that only send frames and read their answers."""

from __future__ import annotations

import pytest

from .harness import Sidecar


@pytest.fixture
def spawn():
    started: list[Sidecar] = []

    def make(*args: str, **kwargs) -> Sidecar:
        sidecar = Sidecar(*args, **kwargs)
        started.append(sidecar)
        return sidecar

    yield make
    for sidecar in started:
        sidecar.kill()
        assert sidecar.bad_lines == [], f"stdout carried non-protocol lines: {sidecar.bad_lines[:3]}"


@pytest.fixture(scope="session")
def _shared_process():
    sidecar = Sidecar()
    sidecar.wait_ready()
    yield sidecar
    sidecar.kill()
    assert sidecar.bad_lines == [], f"stdout carried non-protocol lines: {sidecar.bad_lines[:3]}"


@pytest.fixture
def shared(_shared_process):
    """One in-memory sidecar (started once per session) for a test that needs no fresh process:
    it sends frames and reads their answers, starts no stream, stops nothing, and asserts on
    what it did itself. The answers and notifications of earlier tests are cleared first (the
    ``lifecycle.ready`` notification stays first); after the test the process must still serve
    and its stdout must still be protocol only."""
    sc = _shared_process
    assert sc.proc.poll() is None, "an earlier test stopped the shared sidecar"
    with sc._cond:
        sc.responses.clear()
        del sc.notifications[1:]
    yield sc
    assert sc.bad_lines == [], f"stdout carried non-protocol lines: {sc.bad_lines[:3]}"
    assert sc.call("system.ping")["pong"] is True, "the test left the shared sidecar unable to serve"
