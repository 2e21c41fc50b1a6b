"""The parallel export's output is written back to disk while the workers write it
(privatefile.Writeback): a failed background fdatasync is never lost (Linux reports a failed
writeback to one fsync of the file only, so the final fsync may not see it), and the
export writes the bytes a single process writes."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from steerable_agent_runtime import privatefile
from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.maintenance.salvage import parallel as salvage_parallel
from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.maintenance.workers import Chunking
from steerable_agent_runtime.privatefile import Writeback
from tests.damage import build_store


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    build_store(src / "sessions.db", seed=11)
    return src / "sessions.db"


def _parallel(monkeypatch) -> None:
    monkeypatch.setattr(salvage_parallel, "worker_count", lambda _rows, _chunking=None: 2)
    monkeypatch.setattr(salvage_parallel, "CHUNKING", Chunking(min_rows_per_worker=50_000, chunk_rows=7))


def test_writeback_syncs_while_running_and_stops(tmp_path: Path, monkeypatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append(fd), raising=False)
    with open(tmp_path / "f", "wb") as fh:
        writeback = Writeback(fh.fileno(), interval=0.01)
        writeback.start()
        fh.write(b"x" * 100)
        fh.flush()
        deadline = time.monotonic() + 5
        while not synced and time.monotonic() < deadline:
            time.sleep(0.01)
        writeback.stop()
        count = len(synced)
        time.sleep(0.05)
        assert count and len(synced) == count and set(synced) == {fh.fileno()}  # nothing after stop()


def test_a_failed_background_sync_is_raised_by_stop(tmp_path: Path, monkeypatch) -> None:
    def failing(_fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing, raising=False)
    with open(tmp_path / "f", "wb") as fh:
        writeback = Writeback(fh.fileno(), interval=0.001)
        writeback.start()
        deadline = time.monotonic() + 5
        while writeback.error is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(OSError) as err:
            writeback.stop()
        assert err.value.errno == errno.EIO
        writeback.stop(check=False)  # (what the export's error paths call: no second raise)


def test_a_writeback_that_cannot_start_leaves_the_work_to_the_final_fsync(tmp_path: Path, monkeypatch) -> None:
    def no_thread(self) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(privatefile.threading.Thread, "start", no_thread)
    writeback = Writeback(0)
    writeback.start()
    writeback.stop()


def test_an_export_whose_background_sync_fails_is_a_write_error_and_publishes_nothing(store: Path, tmp_path: Path,
                                                                                     monkeypatch) -> None:
    _parallel(monkeypatch)

    def failing(_fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing, raising=False)
    monkeypatch.setattr(Writeback.__init__, "__defaults__", (0.0,))  # a sync at once, before the export ends
    with pytest.raises(SteerableError, match="cannot write") as err:
        salvage(store, tmp_path / "out.jsonl")
    assert "Input/output error" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_the_parallel_export_with_writeback_writes_the_bytes_of_one_process(store: Path, tmp_path: Path,
                                                                           monkeypatch) -> None:
    synced: list[int] = []
    real = getattr(os, "fdatasync", os.fsync)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1], raising=False)
    monkeypatch.setattr(Writeback.__init__, "__defaults__", (0.0,))
    one = salvage(store, tmp_path / "one.jsonl")  # a small store: one process, no writeback
    assert not synced
    _parallel(monkeypatch)
    many = salvage(store, tmp_path / "many.jsonl")
    assert synced
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "many.jsonl").read_bytes()
    assert one.model_dump() | {"out": ""} == many.model_dump() | {"out": ""}
