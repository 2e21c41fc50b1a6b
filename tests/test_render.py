"""The CLI's progress bar must not start a thread: check and salvage fork their workers only
from a single-threaded process, so a refresh thread would make a terminal run single-process."""

from __future__ import annotations

import sys
import threading

from steerable_maint import render


def test_progress_bar_on_a_terminal_runs_no_thread(monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    before = threading.active_count()
    with render.progress_bar() as update:
        for done in range(0, 100_001, 1_000):
            update("rows", done, 100_000)
        assert threading.active_count() == before
    assert threading.active_count() == before
