"""Property: on a damaged store every read-only job reports or refuses, never crashes, never
writes; and a check that finds no error means every row is exactly as written."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.maintenance.check import check
from tests.damage import DAMAGES, WAL_DAMAGES, build_store, copy_store, read_rows

from .conftest import snapshot
from .readjobs import READ_JOBS


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """One store cleanly closed, and one copied while its owner was open (rows in the -wal)."""
    root = tmp_path_factory.mktemp("damage-bases")
    (root / "closed").mkdir()
    (root / "open").mkdir()
    originals, _ = build_store(root / "closed" / "sessions.db", seed=7)
    _, store = build_store(root / "scratch.db", seed=7, keep_open=True)
    copy_store(root / "scratch.db", root / "open" / "sessions.db")
    store.close_sync()
    return root, sorted(originals, key=repr)


def _damaged(bases, tmp_path: Path, name: str, seed: int) -> Path:
    root, _ = bases
    work = tmp_path / f"{name}-{seed}"
    shutil.copytree(root / ("open" if name in WAL_DAMAGES else "closed"), work)
    DAMAGES[name](work / "sessions.db", random.Random(seed))
    return work / "sessions.db"


@settings(max_examples=60)
@given(name=st.sampled_from(sorted(DAMAGES)), seed=st.integers(0, 2**32 - 1))
def test_every_read_job_reports_or_refuses_and_changes_nothing(bases, tmp_path_factory, name, seed):
    db = _damaged(bases, tmp_path_factory.mktemp("d"), name, seed)
    before = snapshot(db.parent)
    for job in (*READ_JOBS.values(), lambda path: check(path, quick=True)):
        try:
            job(db)
        except SteerableError as exc:
            assert exc.exit_code in (2, 3) and exc.hint
    assert snapshot(db.parent) == before


@settings(max_examples=60)
@given(name=st.sampled_from(sorted(set(DAMAGES) - WAL_DAMAGES)), seed=st.integers(0, 2**32 - 1))
def test_a_check_without_errors_means_every_row_is_as_written(bases, tmp_path_factory, name, seed):
    db = _damaged(bases, tmp_path_factory.mktemp("d"), name, seed)
    try:
        report = check(db)
    except SteerableError:
        return  # refused: the operator is told to salvage; nothing was claimed healthy
    if not report.has_errors:
        assert sorted(read_rows(db), key=repr) == bases[1], report.model_dump_json()
