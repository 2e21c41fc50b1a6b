"""Harvest row copies from page images into the spool (the page-reader side of salvage).

Each harvester reads one kind of place with :mod:`...sqlitefile.btree` and labels what it finds
with an :class:`~.spool.Origin`: the live trees (``btree``), pages no tree reaches
(``unallocated``) and freelist leaves (``freelist``), WAL frames that are not the current
image of their page (``wal``: older committed versions, uncommitted and invalid frames),
and database-file images a committed WAL frame replaced (``btree``, superseded). Pages
go to the spool one at a time. Nothing here raises on damaged content; ``Tally`` counts it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ...storage.schema import TABLES
from ...sqlitefile.btree import Cell, ChainLedger, leaf_cells, loose_leaf_pages, read_schema, walk_freelist, walk_tree
from ...sqlitefile.record import is_text
from .rows import Row, match_table, to_row
from .spool import LIVE, STALE, UNALLOCATED, Origin, Spool
from ...sqlitefile.pages import TABLE_LEAF, SqliteFile, page_header


@dataclass
class Tally:
    """What the harvest could not use: records matching no table, tables without a root."""

    unmatched_records: int = 0
    missing_roots: int = 0


def harvest_all(db: SqliteFile, spool: Spool, tally: Tally, progress: Callable[[int, int], None] | None = None
                ) -> None:
    """Everything the page reader can reach: live trees, loose pages, the WAL's other frames."""
    entries = {e.rootpage: e for e in read_schema(db) if e.type == "table" and e.rootpage > 0}
    tally.missing_roots = len(set(TABLES) - {e.name for e in entries.values()})
    for root, entry in entries.items():
        origin = Origin("btree", None, None, True, LIVE, True)
        # An unknown name (a full-text index table, or a damaged name) is matched by shape.
        # An entity table is a rowid table: a page of an index tree in it is damage.
        known = entry.name in TABLES
        cells = walk_tree(db, root, index=False if known else entry.without_rowid)
        _store(spool, tally, _rows(cells, entry.name if known else None, origin, spool.keyed, db))
    harvest_free(db, spool, tally, scan_loose=True, progress=progress)


def harvest_free(db: SqliteFile, spool: Spool, tally: Tally, *, scan_loose: bool,
                 progress: Callable[[int, int], None] | None = None) -> None:
    """Freelist leaves (and, with ``scan_loose``, every page no walk reached), then the WAL."""
    free = walk_freelist(db)
    if scan_loose:
        pages: Iterable[tuple[int, bytes, bool]] = loose_leaf_pages(db, progress)
    else:
        pages = ((p, img, True) for p in free if (img := db.page(p)) is not None and _is_leaf(db, p, img))
    for pgno, image, on_free in pages:
        origin = Origin("freelist" if on_free else "unallocated", pgno, None, True,
                        STALE if on_free else UNALLOCATED, not on_free)
        _store(spool, tally, _rows(leaf_cells(db, image, pgno), None, origin, spool.keyed))
    harvest_wal(db, spool, tally)


def harvest_wal(db: SqliteFile, spool: Spool, tally: Tally) -> None:
    """WAL frames that are not their page's current image, and the file images WAL replaced."""
    if db.wal is None:
        return
    commits = [f.index for f in db.wal.frames if f.commit_size]
    ledger = ChainLedger()  # one walk over the old frames: each image read at most once
    for frame in db.wal.frames:
        if db.wal.live.get(frame.pgno) == frame.index:
            continue
        image = db.wal_image(frame.offset)
        if image is not None and _is_leaf(db, frame.pgno, image):
            # A transaction writes its pages in page order, so a leaf's overflow pages may
            # come after it: read them as of the end of the leaf's transaction.
            end = bisect.bisect_left(commits, frame.index)
            as_of = commits[end] if end < len(commits) else len(db.wal.frames) - 1
            origin = Origin("wal", frame.pgno, frame.index, frame.state == "committed", STALE + 1 + frame.index, False)
            _store(spool, tally, _rows(leaf_cells(db, image, frame.pgno, as_of=as_of, ledger=ledger), None, origin, spool.keyed))
    ledger = ChainLedger()  # and one over the file images the committed frames replaced
    for pgno in sorted(db.wal.live):
        image = db.db_image(pgno)
        if image is not None and _is_leaf(db, pgno, image):
            origin = Origin("btree", pgno, None, True, STALE, False)
            _store(spool, tally, _rows(leaf_cells(db, image, pgno, as_of=-1, ledger=ledger), None, origin,
                                       spool.keyed))


def _is_leaf(db: SqliteFile, pgno: int, image: bytes) -> bool:
    head = page_header(image, db.header_offset(pgno), db.usable)
    return head is not None and head.kind == TABLE_LEAF and head.cell_count > 0


def _rows(cells: Iterator[Cell], table: str | None, origin: Origin, keyed: bool = True,
          db: SqliteFile | None = None) -> Iterator[tuple[Row | None, Origin, bool]]:
    """(row, origin, looks_ours) per decodable cell; row None when no table fits it.

    ``table`` None means the tree is not known to be an entity table: match by shape. In a
    known table's tree, a record of another shape (the root overwritten by another table's
    page, a pointer into another tree) is counted on ``db`` as ``record_not_of_its_table``.
    ``keyed``: the store's checksums cover the key columns (rows.to_row).
    """
    for cell in cells:
        if cell.fields is None:
            continue
        row = to_row(table, cell.fields, keyed=keyed) if table else None
        if row is None:  # unknown tree, or a damaged pointer led into another table's page
            if table and db is not None:
                db.note("record_not_of_its_table", cell.page)
            name = match_table(cell.fields)
            row = to_row(name, cell.fields, keyed=keyed) if name else None
        page = origin.page if origin.page is not None else cell.page
        yield row, Origin(origin.source, page, origin.frame, origin.committed, origin.rank, origin.placeable), \
            _looks_ours(cell.fields)


def _looks_ours(fields: list) -> bool:
    # Every entity table ends with (data TEXT, crc INTEGER); other trees' records do not.
    return len(fields) >= 5 and is_text(fields[-2][0]) and 1 <= fields[-1][0] <= 9


def _store(spool: Spool, tally: Tally, rows: Iterator[tuple[Row | None, Origin, bool]]) -> None:
    batch: list[tuple[Row, Origin]] = []
    for row, origin, ours in rows:
        if row is None:
            tally.unmatched_records += int(ours)
            continue
        batch.append((row, origin))
        if len(batch) >= 512:
            spool.add(batch)
            batch = []
    spool.add(batch)
