"""SQLite's quick_check beside a parallel export (salvage/verdict.py) changes no result: on
every damage class, salvage with the check beside its workers writes the same bytes and the
same report as salvage with the check first (the attempt before this change); a check that
fails throws the export away; and the attempt is only taken for a parallel export."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from steerable_agent_runtime.maintenance.salvage import job as salvage_job
from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel
from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.maintenance.salvage import verdict as salvage_verdict
from steerable_agent_runtime.maintenance.workers import Chunking
from steerable_agent_runtime.storage.schema import TABLES
from tests.damage import DAMAGES, STRUCTURE_DAMAGES, STRUCTURE_WAL_DAMAGES, WAL_DAMAGES, build_store, copy_store

ALL_DAMAGES = {**DAMAGES, **STRUCTURE_DAMAGES}
ALL_WAL_DAMAGES = WAL_DAMAGES | STRUCTURE_WAL_DAMAGES


@pytest.fixture()
def two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(salvage_parallel, "worker_count", lambda _rows, _chunking=None: 2)
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=50_000, chunk_rows=7))


class _Spy:
    """Counts the checks started beside an export and the attempts run with the check first."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, beside: bool = True) -> None:
        self.started = self.plain = 0
        real_start, real_run = salvage_verdict.BesideCheck.start, salvage_job._Job.run
        spy = self

        def start(check: salvage_verdict.BesideCheck) -> None:
            spy.started += 1
            real_start(check)

        def run(job: salvage_job._Job, *, fast: bool, beside: bool = False):  # noqa: ANN202
            if beside and not spy.beside:
                raise salvage_job._NotBeside()
            spy.plain += not beside
            return real_run(job, fast=fast, beside=beside)

        self.beside = beside
        monkeypatch.setattr(salvage_verdict.BesideCheck, "start", start)
        monkeypatch.setattr(salvage_job._Job, "run", run)


def _salvage(db: Path, out: Path) -> tuple[bytes, dict]:
    report = salvage(db, out, force=True)
    return out.read_bytes(), report.model_dump() | {"out": ""}


@pytest.mark.parametrize("damage", sorted(ALL_DAMAGES))
def test_the_check_beside_the_export_gives_what_the_check_first_gives(damage: str, tmp_path: Path, two_workers,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(3):
        work = tmp_path / str(seed)
        work.mkdir()
        wal_case = damage in ALL_WAL_DAMAGES
        _rows, owner = build_store(work / "live.db", seed=seed, chats=3, entries=15, keep_open=wal_case)
        try:
            db = copy_store(work / "live.db", work / "case.db")
        finally:
            if owner is not None:
                owner.close_sync()
        ALL_DAMAGES[damage](db, random.Random(seed))
        with monkeypatch.context() as m:
            _Spy(m, beside=False)
            first = _salvage(db, work / "first.jsonl")
        with monkeypatch.context() as m:
            _Spy(m)
            beside = _salvage(db, work / "beside.jsonl")
        assert beside == first, f"{damage}, seed {seed}"


def test_a_healthy_store_is_checked_beside_its_export_once(tmp_path: Path, two_workers,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _rows, _ = build_store(tmp_path / "s.db", seed=3, chats=3, entries=15)
    spy = _Spy(monkeypatch)
    report = salvage(tmp_path / "s.db", tmp_path / "out.jsonl")
    assert report.method == "sqlite" and report.exit_code == 0
    assert spy.started == 1 and spy.plain == 0


def test_an_export_in_one_process_checks_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rows, _ = build_store(tmp_path / "s.db", seed=3, chats=3, entries=15)
    spy = _Spy(monkeypatch)
    report = salvage(tmp_path / "s.db", tmp_path / "out.jsonl")
    assert report.method == "sqlite" and report.exit_code == 0
    assert spy.started == 0 and spy.plain == 1  # not parallel: the attempt with the check first


def _failing_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(check: salvage_verdict.BesideCheck) -> None:
        check._sound = False
        check._done.set()

    monkeypatch.setattr(salvage_verdict.BesideCheck, "_check", fails)


def test_a_failed_check_throws_the_export_away_and_checks_first(tmp_path: Path, two_workers,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _rows, _ = build_store(tmp_path / "s.db", seed=4, chats=3, entries=15)
    with monkeypatch.context() as m:
        _Spy(m, beside=False)
        first = _salvage(tmp_path / "s.db", tmp_path / "first.jsonl")
    _failing_check(monkeypatch)
    spy = _Spy(monkeypatch)
    beside = _salvage(tmp_path / "s.db", tmp_path / "beside.jsonl")
    assert spy.started == 1 and spy.plain == 1 and beside == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beside.jsonl", "first.jsonl", "s.db", "s.lock"]


def test_a_read_error_under_a_failed_check_is_the_checks_to_report(tmp_path: Path, two_workers,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's read error while the check fails: the attempt with the check first decides
    (here the check really passes there, so the read error makes it the page reader's)."""
    rows, _ = build_store(tmp_path / "s.db", seed=5, chats=3, entries=15)
    real = salvage_parallel.write_live

    def failing(conn, table, schema, fh, tally, progress, rowids=None, **kwargs):  # noqa: ANN001, ANN202
        if table == "history" and rowids and rowids[0] > 20:
            raise sqlite3.DatabaseError("database disk image is malformed")
        real(conn, table, schema, fh, tally, progress, rowids, **kwargs)

    monkeypatch.setattr(salvage_parallel, "write_live", failing)
    _failing_check(monkeypatch)
    spy = _Spy(monkeypatch)
    report = salvage(tmp_path / "s.db", tmp_path / "out.jsonl")
    assert spy.started == 1 and spy.plain == 2  # beside: thrown away; check first: read error; page reader
    assert report.method == "page-reader" and report.damage["sqlite_read_failed"] == 1


def test_without_a_thread_for_the_check_it_runs_in_the_parent_first(tmp_path: Path, two_workers,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    _rows, _ = build_store(tmp_path / "s.db", seed=6, chats=3, entries=15)
    with monkeypatch.context() as m:
        _Spy(m, beside=False)
        first = _salvage(tmp_path / "s.db", tmp_path / "first.jsonl")
    real_start = threading.Thread.start

    def no_thread(thread: threading.Thread) -> None:
        if thread.name == "salvage-quick-check":
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    spy = _Spy(monkeypatch)
    assert _salvage(tmp_path / "s.db", tmp_path / "beside.jsonl") == first
    assert spy.started == 1 and spy.plain == 0


def test_the_span_scan_runs_in_the_check_and_agrees_with_the_seeks(tmp_path: Path, two_workers,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The export is split by spans from seeks; the scan that tests the file (spool.span_sql)
    runs in the check beside it, for every table read, and gives the same values."""
    _rows, _ = build_store(tmp_path / "s.db", seed=6, chats=3, entries=15)
    scanned: dict[str, tuple[int, int, int]] = {}
    real = salvage_verdict._span

    def span(conn: sqlite3.Connection, table: str) -> tuple[int, int, int]:
        scanned[table] = real(conn, table)
        return scanned[table]

    monkeypatch.setattr(salvage_verdict, "_span", span)
    spy = _Spy(monkeypatch)
    report = salvage(tmp_path / "s.db", tmp_path / "out.jsonl")
    assert report.method == "sqlite" and report.exit_code == 0 and spy.started == 1 and spy.plain == 0
    conn = sqlite3.connect(tmp_path / "s.db")
    present = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert sorted(scanned) == sorted(t for t in TABLES if t in present)
    for table, span_ in scanned.items():
        lo, hi, count = conn.execute(f"SELECT min(rowid), max(rowid), count(*) FROM {table}").fetchone()
        assert span_ == (lo or 0, hi or 0, count)
    conn.close()


@pytest.mark.parametrize("how", ["fails", "disagrees"])
def test_a_span_scan_that_fails_or_disagrees_throws_the_export_away_and_checks_first(
        how: str, tmp_path: Path, two_workers, monkeypatch: pytest.MonkeyPatch) -> None:
    _rows, _ = build_store(tmp_path / "s.db", seed=7, chats=3, entries=15)
    with monkeypatch.context() as m:
        _Spy(m, beside=False)
        first = _salvage(tmp_path / "s.db", tmp_path / "first.jsonl")
    if how == "fails":
        monkeypatch.setattr(salvage_verdict, "span_sql", lambda table: f"SELECT * FROM no_such_{table}")
    else:
        monkeypatch.setattr(salvage_verdict, "_span", lambda _conn, _table: (0, 0, -1))
    spy = _Spy(monkeypatch)
    beside = _salvage(tmp_path / "s.db", tmp_path / "beside.jsonl")
    assert spy.started == 1 and spy.plain == 1 and beside == first
