"""No silent loss (issue 16 item 2): damage that drops rows without breaking a checksum must
make salvage exit 1 and name it. Each test crafts one class of damage on a real store file
(tests/pagecraft.py rewrites pages the way a bad disk or a buggy writer could) and asserts
the exit code, the damage code and, where the class loses rows, that rows really were lost
(so the test cannot pass on a damage that did nothing)."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from steerable_agent_runtime.maintenance.salvage import salvage
from tests import pagecraft
from tests.damage import Original, build_store, zero_header


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def _verified_winners(lines: list[dict]) -> set[tuple]:
    return {(r["table"], tuple(r["key"]), r["data"].encode()) for r in lines
            if r["committed"] and not r["superseded"] and r["verified"]}


def _originals(rows: list[Original]) -> set[tuple]:
    return {(r.table, r.key, r.data) for r in rows}


@pytest.fixture()
def store(tmp_path: Path) -> tuple[Path, list[Original]]:
    src = tmp_path / "src"
    src.mkdir()
    rows, _ = build_store(src / "sessions.db", seed=11, chats=4, entries=30)
    return src / "sessions.db", rows


def _codes(report) -> set[str]:
    return {f.code for f in report.findings if f.severity == "error"}


def test_an_index_page_sqlite_cannot_read_is_sqlites_check_failing_named_and_exit_1(store, tmp_path: Path) -> None:
    db, rows = store
    index_root = pagecraft.roots(db)["sqlite_autoindex_history_1"]
    size = pagecraft.page_size(db)
    pagecraft.write_page(db, index_root, b"\x00" * size)  # no table page is touched
    report = salvage(db, tmp_path / "out.jsonl")
    assert _verified_winners(_lines(tmp_path / "out.jsonl")) == _originals(rows)  # every row is still there
    assert report.exit_code == 1 and report.damage["sqlite_check_failed"] >= 1
    assert "salvage-sqlite-check-failed" in _codes(report)
    finding = next(f for f in report.findings if f.code == "salvage-sqlite-check-failed")
    assert "quick_check" in finding.message and "\n" not in finding.message


def test_a_leaf_whose_cell_count_was_lowered_loses_rows_and_exits_1(store, tmp_path: Path) -> None:
    db, rows = store
    leaf = max(pagecraft.leaves(db, "history"), key=lambda p: len(p.pointers))
    image = bytearray(pagecraft.read_page(db, leaf.pgno))
    struct.pack_into(">H", image, 3, len(leaf.pointers) - 2)  # the last two cells fall off the page
    pagecraft.write_page(db, leaf.pgno, bytes(image))
    report = salvage(db, tmp_path / "out.jsonl")
    assert len(_originals(rows) - _verified_winners(_lines(tmp_path / "out.jsonl"))) == 2
    assert report.exit_code == 1 and "salvage-sqlite-check-failed" in _codes(report)


def test_a_table_root_overwritten_by_an_index_page_is_named_and_exit_1(store, tmp_path: Path) -> None:
    db, rows = store
    tables = pagecraft.roots(db)
    root = tables["sessions"]
    assert pagecraft.parse(pagecraft.read_page(db, root), root).kind == pagecraft.TABLE_LEAF
    pagecraft.write_page(db, root, pagecraft.read_page(db, tables["sessions_chat"]))
    zero_header(db, random.Random(0))  # SQLite cannot open it: the page reader alone must see it
    report = salvage(db, tmp_path / "out.jsonl")
    lost = _originals(rows) - _verified_winners(_lines(tmp_path / "out.jsonl"))
    assert {t for t, _k, _d in lost} == {"sessions"}
    assert report.exit_code == 1 and report.damaged_pages["btree_page_wrong_kind"] == [root]
    assert "salvage-btree-page-wrong-kind" in _codes(report)


def test_a_table_root_overwritten_by_another_tables_leaf_is_named_and_exit_1(store, tmp_path: Path) -> None:
    db, rows = store
    tables = pagecraft.roots(db)
    root = tables["sessions"]
    messages_leaf = pagecraft.leaves(db, "messages")[0].pgno
    pagecraft.write_page(db, root, pagecraft.read_page(db, messages_leaf))
    zero_header(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl")
    lost = _originals(rows) - _verified_winners(_lines(tmp_path / "out.jsonl"))
    assert {t for t, _k, _d in lost} == {"sessions"}
    assert report.exit_code == 1 and report.damaged_pages["record_not_of_its_table"] == [root]
    assert "salvage-record-not-of-its-table" in _codes(report)


def test_a_repeated_cell_pointer_is_named_and_exit_1(store, tmp_path: Path) -> None:
    db, rows = store
    leaf = max(pagecraft.leaves(db, "history"), key=lambda p: len(p.pointers))
    pointers = list(leaf.pointers)
    pointers[3] = pointers[2]  # the row at pointers[3] is no longer reachable
    pagecraft.set_pointers(db, leaf.pgno, pointers)
    zero_header(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl")
    lines = _lines(tmp_path / "out.jsonl")
    assert len(_originals(rows) - _verified_winners(lines)) == 1
    assert report.exit_code == 1 and report.damaged_pages["cell_pointer_repeated"] == [leaf.pgno]
    assert "salvage-cell-pointers-overlap" in _codes(report)
    # the row the repeated pointer reaches is exported once, not twice
    assert len(lines) == len({(r["table"], tuple(r["key"]), r["source"], r["page"]) for r in lines})


def test_overlapping_cell_pointers_are_named_and_exit_1(store, tmp_path: Path) -> None:
    db, rows = store
    leaf = max(pagecraft.leaves(db, "history"), key=lambda p: len(p.pointers))
    pointers = list(leaf.pointers)
    pointers[3] = pointers[2] + 1  # into the middle of its neighbour: the row it reached is lost
    pagecraft.set_pointers(db, leaf.pgno, pointers)
    zero_header(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.exit_code == 1 and report.damaged_pages["cell_pointers_overlap"] == [leaf.pgno]
    assert "salvage-cell-pointers-overlap" in _codes(report)


def test_history_entries_missing_between_recovered_ones_are_named(store, tmp_path: Path) -> None:
    db, rows = store
    leaf = max(pagecraft.leaves(db, "history"), key=lambda p: len(p.pointers))
    pointers = list(leaf.pointers)
    image = bytearray(pagecraft.read_page(db, leaf.pgno))
    keep = pointers[:2] + pointers[3:]  # drop one cell from the middle, neatly: no overlap, no repeat
    struct.pack_into(">H", image, 3, len(keep))
    for i, ptr in enumerate(keep + [0]):
        struct.pack_into(">H", image, 8 + 2 * i, ptr)
    pagecraft.write_page(db, leaf.pgno, bytes(image))
    zero_header(db, random.Random(0))
    report = salvage(db, tmp_path / "out.jsonl")
    lost = _originals(rows) - _verified_winners(_lines(tmp_path / "out.jsonl"))
    assert len(lost) == 1 and next(iter(lost))[0] == "history"
    assert report.exit_code == 1 and report.damage["history_seq_gap"] == 1
    finding = next(f for f in report.findings if f.code == "salvage-rows-unaccounted")
    assert finding.severity == "error" and next(iter(lost))[1][0] in finding.message
