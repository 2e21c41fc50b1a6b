"""check and a -wal whose frames stop verifying before its end (issue 16 item 2): the
committed transactions after the bad frame are invisible to SQLite (and so to the app and
to integrity_check), so check must say so as an error with the salvage remedy; a torn
uncommitted tail (a writer killed mid-transaction) is not damage."""

from __future__ import annotations

import struct
from pathlib import Path

from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.salvage import salvage
from tests.damage import build_store, copy_store, page_size_of


def _store_with_wal(tmp_path: Path) -> tuple[Path, int]:
    """A copy of a store whose rows are in several committed transactions of its -wal;
    returns it and the number of frames."""
    src = tmp_path / "src"
    src.mkdir()
    _rows, owner = build_store(src / "s.db", seed=3, chats=4, entries=20, keep_open=True)
    try:
        db = copy_store(src / "s.db", tmp_path / "c.db")
    finally:
        owner.close_sync()
    (tmp_path / "c.db-shm").unlink(missing_ok=True)
    size = page_size_of(db)
    frames = (Path(f"{db}-wal").stat().st_size - 32) // (24 + size)
    return db, frames


def _commit_frames(db: Path) -> list[int]:
    raw = Path(f"{db}-wal").read_bytes()
    size = page_size_of(db)
    step = 24 + size
    return [i for i in range((len(raw) - 32) // step) if struct.unpack_from(">I", raw, 32 + i * step + 4)[0]]


def _flip_frame_page(db: Path, index: int) -> None:
    wal = Path(f"{db}-wal")
    raw = bytearray(wal.read_bytes())
    raw[32 + index * (24 + page_size_of(db)) + 24 + 100] ^= 0x55
    wal.write_bytes(bytes(raw))


def test_a_bad_frame_before_later_commits_is_an_error_with_the_salvage_remedy(tmp_path: Path) -> None:
    db, _frames = _store_with_wal(tmp_path)
    commits = _commit_frames(db)
    assert len(commits) >= 3
    _flip_frame_page(db, commits[0] + 1)  # a frame of the second transaction: the later ones are cut off
    report = check(db)
    found = [f for f in report.findings if f.code == "wal-frames-stop-verifying"]
    assert len(found) == 1 and found[0].severity == "error" and report.exit_code == 1
    assert f"frame {commits[0] + 1}" in found[0].message
    assert "steerable-maint salvage" in found[0].hint
    assert report.counts["wal-frames-stop-verifying"] == 1
    # salvage says the same, and reads what SQLite cannot
    assert salvage(db, tmp_path / "out.jsonl").damage.get("wal_frame_checksum_mismatch") == 1


def test_a_healthy_wal_and_a_torn_uncommitted_tail_are_not_findings(tmp_path: Path) -> None:
    db, frames = _store_with_wal(tmp_path)
    assert "wal-frames-stop-verifying" not in check(db).counts
    with open(f"{db}-wal", "ab") as fh:  # a frame of a transaction that never committed, torn
        fh.write(struct.pack(">6I", 2, 0, 1, 2, 3, 4) + b"\x07" * page_size_of(db))
    report = check(db)
    assert "wal-frames-stop-verifying" not in report.counts and not report.has_errors
