"""Fixtures: a sidecar process, cleaned up (and its stdout checked) after each test."""

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
