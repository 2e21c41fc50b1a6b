"""check's row pass in worker processes (tablescan.parallel_scan) reports exactly what the
one-process scan reports: on every fixture and on stores damaged every way tests/damage.py
knows. Workers are forced here (tiny stores, ranges of 3 rows) so the ranges, their merge
and a range SQLite cannot read are all exercised."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.maintenance.check import tablescan
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.workers import Chunking
from tests.damage import DAMAGES, WAL_DAMAGES, build_store, copy_store

from .conftest import CASES, FIXTURES, snapshot


def _both(db: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object, int]:
    """(one-process report or error, worker report or error, ranges the workers scanned)."""
    monkeypatch.setattr(tablescan, "CHUNKING", Chunking(min_rows_per_worker=10**12, chunk_rows=25_000))
    one = _run(db)
    ranges: list[int] = []
    real = tablescan.ParallelScan.results

    def counted(self, progress):  # noqa: ANN001, ANN202
        ranges.append(len(self.tasks))
        return real(self, progress)

    monkeypatch.setattr(tablescan, "CHUNKING", Chunking(min_rows_per_worker=1, chunk_rows=3))
    monkeypatch.setattr(tablescan, "fork_workers", lambda rows, _min: 2 if threading.active_count() == 1 else 1)
    monkeypatch.setattr(tablescan.ParallelScan, "results", counted)
    many = _run(db)
    return one, many, sum(ranges)


def _run(db: Path) -> object:
    try:
        return check(db).model_dump()
    except SteerableError as exc:
        return (type(exc).__name__, exc.message)


@pytest.mark.parametrize("case", CASES)
def test_workers_report_what_one_process_reports_on_every_fixture(case, tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / case, tmp_path / case)
    db = tmp_path / case / "sessions.db"
    before = snapshot(db.parent)
    one, many, ranges = _both(db, monkeypatch)
    assert one == many
    assert snapshot(db.parent) == before
    if case not in ("schema-too-new", "wal-pending"):  # no rows checked / read live (shared): one process
        assert ranges > 1


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel-bases")
    (root / "closed").mkdir()
    (root / "open").mkdir()
    build_store(root / "closed" / "sessions.db", seed=11)
    _, store = build_store(root / "scratch.db", seed=11, keep_open=True)
    copy_store(root / "scratch.db", root / "open" / "sessions.db")
    store.close_sync()
    return root


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(DAMAGES)), seed=st.integers(0, 2**32 - 1))
@example(name="flip_bytes", seed=673)  # spans' CREATE TABLE garbled, spans empty: workers skipped the table
def test_workers_report_what_one_process_reports_on_damaged_stores(bases, tmp_path_factory, name, seed):
    work = tmp_path_factory.mktemp("p") / "store"
    shutil.copytree(bases / ("open" if name in WAL_DAMAGES else "closed"), work)
    DAMAGES[name](work / "sessions.db", random.Random(seed))
    with pytest.MonkeyPatch.context() as monkeypatch:
        one, many, _ranges = _both(work / "sessions.db", monkeypatch)
    assert one == many
