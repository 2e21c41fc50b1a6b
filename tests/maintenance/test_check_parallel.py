"""check's row pass in worker processes (tablescan.parallel_scan) reports exactly what the
one-process scan reports: on every fixture and on stores damaged every way tests/damage.py
knows. Workers are forced here (tiny stores, ranges of 3 rows) so the ranges, their merge
and a range SQLite cannot read are all exercised."""

from __future__ import annotations

import random
import sqlite3
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.maintenance.check import tablescan
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.workers import MAX_RANGES, Chunking, rowid_ranges
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


def test_rowid_ranges_stay_few_over_a_huge_rowid_span():
    # check estimates a table's rows from its rowid bounds; one row at rowid 2**62 (a sparse
    # table, or a damaged root read as one) once made that 2**62 rows: ~10**14 ranges, and the
    # list of them took all the memory (the test suite's 20 GB out-of-memory kills).
    ranges = rowid_ranges(1, 2**62, 2**62, 25_000)
    assert len(ranges) <= MAX_RANGES
    assert ranges[0][0] == 1 and ranges[-1][1] == 2**62
    assert all(hi + 1 == lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))  # contiguous, no rowid left out
    assert rowid_ranges(1, 100, 100, 25) == [(1, 25), (26, 50), (51, 75), (76, 100)]  # the usual split, as before


def test_a_store_with_a_row_at_rowid_2_to_the_62_checks_clean_in_bounded_memory(tmp_path):
    db = tmp_path / "sessions.db"
    build_store(db, seed=5)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE history SET rowid = ? WHERE rowid = (SELECT max(rowid) FROM history)", (2**62,))
    conn.close()
    report = check(db)
    assert not report.has_errors, report.counts
    assert report.rows["history"] == sqlite3.connect(db).execute("SELECT count(*) FROM history").fetchone()[0]
