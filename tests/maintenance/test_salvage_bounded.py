"""Bounded work on hostile files (issue 16 item 3): every page is read at most once per walk,
so salvage's work, counted in page images read (``SalvageReport.pages_read``), grows
linearly with the file: doubling a crafted file at most about doubles it. Work is counted,
never timed.

The crafted files start as real stores (SqliteStorage); tests/pagecraft.py then rewrites
their history leaves the way a hostile file would: every cell a copy of one row with a long
overflow chain (each cell enters the same chain), or interior pages that all point at each
other.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.models import AgentSession
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests import pagecraft
from tests.damage import copy_store


def _store(path: Path, small: int, chain_pages: int, *, keep_open: bool = False) -> SqliteStorage | None:
    """A store whose history holds ``small`` short entries and, last, one whose data runs
    over about ``chain_pages`` overflow pages."""
    store = SqliteStorage(path, synchronous="NORMAL")

    async def fill() -> None:
        await store.upsert_session(AgentSession(session_id="s", user_id="u", chat_id="c", current_stage="plan",
                                                is_active=True, created_at="2026-01-01T00:00:00Z",
                                                updated_at="2026-01-01T00:00:00Z"))
        at = "2026-01-01T00:00:00.000000Z"
        await store.append_history("c", [{"type": "item", "at": at, "message": {"role": "user", "content": f"m{i}"}}
                                         for i in range(small)])
        await store.append_history("c", [{"type": "item", "at": at,
                                          "message": {"role": "user", "content": "x" * (4090 * chain_pages)}}])

    asyncio.run(fill())
    if keep_open:
        return store
    store.close_sync()
    return None


def _big_cell(db: Path) -> tuple[bytes, int]:
    """The raw cell of the row with the overflow chain, and its leaf page."""
    size = pagecraft.page_size(db)
    for leaf in pagecraft.leaves(db, "history"):
        image = pagecraft.read_page(db, leaf.pgno)
        for ptr in leaf.pointers:
            cell = pagecraft.cell_bytes(image, ptr)
            if pagecraft.read_varint(cell, 0)[0] > size:
                return cell, leaf.pgno
    raise AssertionError("no row with an overflow chain")


def _shared_chain(db: Path, leaves: int, chain_pages: int) -> int:
    """Craft: every history leaf but the big row's holds as many copies of the big row's
    cell as fit, each entering the same chain. Returns the file's page count."""
    _store(db, small=leaves * 40, chain_pages=chain_pages)
    cell, home = _big_cell(db)
    size = pagecraft.page_size(db)
    rowid = 1_000_000
    for leaf in pagecraft.leaves(db, "history"):
        if leaf.pgno == home:
            continue
        cells = []
        while 8 + 2 * (len(cells) + 1) + sum(map(len, cells)) + len(cell) + 8 < size:
            rowid += 1
            cells.append(pagecraft.with_rowid(cell, rowid))
        pagecraft.write_page(db, leaf.pgno, pagecraft.build_leaf(size, cells))
    return db.stat().st_size // size


def _interior_tangle(db: Path, leaves: int) -> int:
    """Craft: every history leaf becomes an interior table page whose children are all the
    crafted pages (and the tree's root): a web of pages pointing at each other."""
    _store(db, small=leaves * 40, chain_pages=1)
    size = pagecraft.page_size(db)
    root = pagecraft.roots(db)["history"]
    pages = [leaf.pgno for leaf in pagecraft.leaves(db, "history")]
    for pgno in pages:
        kids = ([p for p in pages if p != pgno] + [root])[: (size - 12) // 10]
        image = bytearray(size)
        end = size
        pointers = []
        for i, kid in enumerate(kids[:-1]):
            body = struct.pack(">I", kid) + pagecraft.varint(i + 1)
            end -= len(body)
            image[end:end + len(body)] = body
            pointers.append(end)
        image[0] = pagecraft.TABLE_INTERIOR
        struct.pack_into(">HHHBI", image, 1, 0, len(pointers), end, 0, kids[-1])
        for i, ptr in enumerate(pointers):
            struct.pack_into(">H", image, 12 + 2 * i, ptr)
        pagecraft.write_page(db, pgno, bytes(image))
    return db.stat().st_size // size


def _work(tmp_path: Path, name: str, craft, *args) -> tuple[int, int, object]:
    folder = tmp_path / name
    folder.mkdir()
    pages = craft(folder / "s.db", *args)
    report = salvage(folder / "s.db", folder / "out.jsonl")
    return report.pages_read, pages, report


def test_many_cells_sharing_one_overflow_chain_cost_linear_work(tmp_path: Path) -> None:
    one, pages1, report1 = _work(tmp_path, "one", _shared_chain, 40, 40)
    two, pages2, report2 = _work(tmp_path, "two", _shared_chain, 80, 80)
    assert pages2 >= 1.7 * pages1  # the file did (about) double
    for report, pages, read in ((report1, pages1, one), (report2, pages2, two)):
        assert read <= 3 * pages, (read, pages)  # re-reading the chain per cell would be ~ cells x chain
        assert report.exit_code == 1 and report.damage["overflow_page_shared"] > 10
        assert "salvage-overflow-page-shared" in {f.code for f in report.findings}
    assert two / one <= 1.25 * pages2 / pages1, (one, two, pages1, pages2)


def test_interior_pages_pointing_at_each_other_cost_linear_work(tmp_path: Path) -> None:
    one, pages1, report1 = _work(tmp_path, "one", _interior_tangle, 40)
    two, pages2, report2 = _work(tmp_path, "two", _interior_tangle, 80)
    assert pages2 >= 1.7 * pages1
    for report, pages, read in ((report1, pages1, one), (report2, pages2, two)):
        assert report.exit_code == 1 and report.damage["page_reached_twice"] > 10
        assert read <= 3 * pages, (read, pages)
    assert two / one <= 1.25 * pages2 / pages1, (one, two, pages1, pages2)


def test_old_wal_versions_of_a_leaf_share_its_rows_chain_without_damage_or_rereads(tmp_path: Path) -> None:
    """The legitimate case: a big row's leaf rewritten by many committed transactions. Every
    old frame of that leaf holds the row with the same chain: it is read once, not per frame,
    and it is not damage."""
    src = tmp_path / "src"
    src.mkdir()
    store = _store(src / "s.db", small=5, chain_pages=30, keep_open=True)
    try:
        at = "2026-01-01T00:00:00.000000Z"
        for i in range(15):
            asyncio.run(store.append_history("c", [{"type": "item", "at": at, "message": {"role": "user",
                                                                                          "content": f"later {i}"}}]))
        db = copy_store(src / "s.db", tmp_path / "c.db")
    finally:
        store.close_sync()
    frames = (Path(f"{db}-wal").stat().st_size - 32) // (24 + 4096)
    report = salvage(db, tmp_path / "out.jsonl")
    assert report.exit_code == 0 and not report.damage.get("overflow_page_shared")
    assert report.wal_frames["committed"] == frames >= 45
    # 30 chain pages x 15 old versions would be 450 reads of the chain alone
    assert report.pages_read <= frames + 2 * (db.stat().st_size // 4096) + 40, report.pages_read
