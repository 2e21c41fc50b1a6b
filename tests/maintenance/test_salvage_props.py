"""Property tests: build a random store, damage it, salvage it.

Profiles (tests/conftest.py): ``ci`` runs by default (a few dozen cases, well under a
minute); ``soak`` runs thousands: ``pytest tests/maintenance/test_salvage_props.py
--hypothesis-profile=soak`` (or HYPOTHESIS_PROFILE=soak).

For every damage class in tests/damage.py (DAMAGES and STRUCTURE_DAMAGES) it asserts: check never crashes (a report or a
SteerableError) and reports a checksum failure salvage found; salvage never raises; every copy it
exports as verified is an original row by table, identity (key and place columns: the record
an entry belongs to, the trace of a span) AND data bytes (no invented rows, none moved under
another key: the checksum covers both; ``flip_key`` changes key columns on purpose); every
original row whose page was not damaged is exported verified (rows short enough to live on
one page: their leaf page is all that matters); and salvage never exits 0 while a row written
is missing from its verified winners (no silent loss).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from steerable_agent_runtime.errors import SteerableError
from steerable_agent_runtime.sqlitefile.btree import leaf_cells, loose_leaf_pages
from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.maintenance.salvage.rows import match_table, to_row
from steerable_agent_runtime.sqlitefile.pages import SqliteFile
from steerable_agent_runtime.storage.checksum import IDENTITY
from tests.damage import DAMAGES, STRUCTURE_DAMAGES, STRUCTURE_WAL_DAMAGES, WAL_DAMAGES, build_store, copy_store

ALL_DAMAGES = {**DAMAGES, **STRUCTURE_DAMAGES}
ALL_WAL_DAMAGES = WAL_DAMAGES | STRUCTURE_WAL_DAMAGES

SHORT = 1000
"""Rows whose data is shorter than this are stored whole on their leaf page (4096-byte pages)."""


def _leaf_pages(db: Path, wal: Path | None) -> dict[tuple[str, bytes], bytes]:
    """(table, data) -> the bytes of the page image holding it, read from the pristine copy."""
    out: dict[tuple[str, bytes], bytes] = {}
    with SqliteFile(db, wal) as pages:
        for pgno, image, _free in loose_leaf_pages(pages):
            for cell in leaf_cells(pages, image, pgno):
                name = match_table(cell.fields) if cell.fields else None
                row = to_row(name, cell.fields) if name else None
                if row is not None:
                    out[(row.table, row.data)] = image
    return out


def _page_images(db: Path, wal: Path | None) -> set[bytes]:
    """Every page image in the damaged files (db pages and WAL frame pages)."""
    images: set[bytes] = set()
    with SqliteFile(db, wal) as pages:
        for pgno in range(1, pages.file_pages + 1):
            images.add(pages.db_image(pgno) or b"")
        for frame in pages.wal.frames if pages.wal else ():
            images.add(pages.wal_image(frame.offset) or b"")
    return images


def _check_case(work: Path, damage: str, seed: int, chats: int, entries: int) -> None:
    wal_case = damage in ALL_WAL_DAMAGES
    rows, owner = build_store(work / "live.db", seed=seed, chats=chats, entries=entries, keep_open=wal_case)
    try:
        db = copy_store(work / "live.db", work / "case.db")
    finally:
        if owner is not None:
            owner.close_sync()
    wal = Path(f"{db}-wal") if Path(f"{db}-wal").exists() else None
    pristine = _leaf_pages(db, wal)
    ALL_DAMAGES[damage](db, random.Random(seed))
    wal = Path(f"{db}-wal") if Path(f"{db}-wal").exists() else None
    surviving = _page_images(db, wal)

    report = salvage(db, work / "out.jsonl", rebuild=work / "new.db")
    _check_reports_what_salvage_saw(db, report)

    lines = [json.loads(x) for x in (work / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    verified = {(r["table"], tuple(r["columns"][c] for c in IDENTITY[r["table"]]), r["data"].encode())
                for r in lines if r["verified"]}
    originals = {(r.table, r.identity, r.data) for r in rows}
    assert verified <= originals, f"a verified copy that is not an original row: {sorted(verified - originals)[:3]}"
    assert not report.collisions_total, "two verified copies of one key in a store that never had them"
    must = {(r.table, r.identity, r.data) for r in rows
            if len(r.data) < SHORT and pristine.get((r.table, r.data)) in surviving}
    assert must <= verified, f"{len(must - verified)} rows on undamaged pages not recovered ({damage})"
    assert report.rows_written == len(lines)
    # No silent loss: exit 0 only when every row written is a verified winner of its key.
    winners = {(r["table"], tuple(r["columns"][c] for c in IDENTITY[r["table"]]), r["data"].encode())
               for r in lines if r["verified"] and r["committed"] and not r["superseded"]}
    if report.exit_code == 0:
        missing = originals - winners
        assert not missing, f"salvage exited 0 with {len(missing)} rows missing ({damage}): {sorted(missing)[:2]}"


def _check_reports_what_salvage_saw(db: Path, report) -> None:
    """check never crashes: it returns a report or refuses the file with a SteerableError;
    a row salvage found failing its checksum is a problem check reports too."""
    try:
        found = check(db)
    except SteerableError:
        return
    if any(t.unverified for t in report.tables.values()):
        assert found.has_errors


@given(damage=st.sampled_from(sorted(ALL_DAMAGES)), seed=st.integers(0, 2**31), chats=st.integers(1, 4),
       entries=st.integers(0, 40))
# A table root overwritten by another page: check read its rowid bounds as astronomical and
# built ranges for them until memory ran out (maintenance.workers.MAX_RANGES).
@example(damage="root_other_kind", seed=89233600, chats=4, entries=40)
@example(damage="root_other_kind", seed=2071792559, chats=1, entries=22)
def test_salvage_never_crashes_never_invents_and_recovers_undamaged_pages(damage: str, seed: int, chats: int,
                                                                           entries: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _check_case(Path(tmp), damage, seed, chats, entries)


@pytest.mark.parametrize("damage", sorted(ALL_DAMAGES))
def test_every_damage_class_once(tmp_path: Path, damage: str) -> None:
    _check_case(tmp_path, damage, seed=1234, chats=3, entries=30)


@pytest.mark.parametrize("damage", sorted(ALL_DAMAGES))
def test_every_damage_class_on_the_smallest_store(tmp_path: Path, damage: str) -> None:
    # one chat, no entries: no table leaf holds two cells (the injector once raised IndexError here)
    _check_case(tmp_path, damage, seed=43, chats=1, entries=0)
