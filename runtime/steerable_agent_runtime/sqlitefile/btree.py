"""Walk b-trees, the freelist and loose pages of a :class:`~.pages.SqliteFile`.

Reference: https://www.sqlite.org/fileformat2.html sections 1.5 (freelist), 1.6 (b-tree
pages, cells, overflow pages) and 2.6 (sqlite_schema).

Guarantees:
- Each page is visited at most once per walk (``SqliteFile.marks`` is the visited set),
  so a cycle or a page shared by two trees ends the walk there and is counted; overflow
  pages too (a chain entered by two cells, or by itself, is ``overflow_page_shared``).
  Old page versions (WAL frames, replaced file images) are walked with a ChainLedger of
  their own, so the work is linear in the size of the files (``SqliteFile.pages_read``).
- Cells of one page must not repeat or overlap (``cell_pointer_repeated``,
  ``cell_pointers_overlap``); a tree must hold pages of one kind (``btree_page_wrong_kind``).
- A pointer outside the file, a page that is not what its parent says, a cell whose
  payload cannot be read: each is counted in ``SqliteFile.damage`` and skipped; the walk
  goes on with the rest.
- Generators: cells are produced one page at a time; nothing accumulates but the marks.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from .record import decode_record, local_payload_size, read_varint
from .pages import (
    INDEX_INTERIOR, INDEX_LEAF, MARK_BTREE, MARK_FREE_LEAF, MARK_FREE_OVERFLOW, MARK_FREE_TRUNK, MARK_OVERFLOW, TABLE_LEAF,
    SqliteFile, cell_pointers, page_header,
)


@dataclass(frozen=True)
class Cell:
    """One decoded cell: where it was, its rowid (None in index/WITHOUT ROWID trees) and
    its record fields as (serial type, value) pairs; ``fields`` is None when undecodable."""

    page: int
    rowid: int | None
    fields: list[tuple[int, Any]] | None


@dataclass(frozen=True)
class SchemaEntry:
    """One row of sqlite_schema: type, name, table name, root page and SQL."""

    type: str
    name: str
    tbl_name: str
    rootpage: int
    sql: str

    @property
    def without_rowid(self) -> bool:
        return "WITHOUT ROWID" in " ".join(self.sql.upper().split())


def read_schema(db: SqliteFile) -> list[SchemaEntry]:
    """The entries of sqlite_schema (the table b-tree rooted at page 1); [] if unreadable."""
    out: list[SchemaEntry] = []
    for cell in walk_tree(db, 1):
        fields = cell.fields
        if fields is None or len(fields) != 5 or not isinstance(fields[3][1], int):
            db.note("schema_row_undecodable")
            continue
        text = [v.decode("utf-8", "replace") if isinstance(v, bytes) else "" for _, v in fields]
        out.append(SchemaEntry(text[0], text[1], text[2], fields[3][1], text[4]))
    return out


def walk_tree(db: SqliteFile, root: int, *, index: bool | None = None) -> Iterator[Cell]:
    """Every leaf cell of the b-tree rooted at ``root`` (table or index), in page order.

    ``index``: whether the tree is an index (or WITHOUT ROWID) tree; None takes the root's
    kind. A page of the other kind (a table root overwritten by an index page, a child of
    the wrong kind) is counted as ``btree_page_wrong_kind`` and not entered: its cells are
    not this tree's. Interior pages give their children; pages already marked are not
    entered again.
    """
    stack = [root]
    while stack:
        pgno = stack.pop()
        page = _enter(db, pgno)
        if page is None:
            continue
        head = page_header(page, db.header_offset(pgno), db.usable)
        if head is None:
            db.note("btree_page_malformed", pgno)
            continue
        is_index = head.kind in (INDEX_LEAF, INDEX_INTERIOR)
        if index is None:
            index = is_index
        if is_index != index:
            db.note("btree_page_wrong_kind", pgno)
            continue
        if head.is_leaf:
            yield from leaf_cells(db, page, pgno)
            continue
        if head.kind == INDEX_INTERIOR:
            # Index (and WITHOUT ROWID) interior cells are entries too, not just separators.
            yield from _index_interior_cells(db, page, pgno, head)
        stack.extend(reversed(_children(db, page, head)))


def _enter(db: SqliteFile, pgno: int) -> bytes | None:
    if not db.valid_pgno(pgno):
        db.note("pointer_out_of_range")
        return None
    if db.marks[pgno]:
        db.note("page_reached_twice", pgno)
        return None
    page = db.page(pgno)
    if page is None:
        db.note("page_missing", pgno)
        return None
    db.marks[pgno] = MARK_BTREE
    return page


def _children(db: SqliteFile, page: bytes, head: Any) -> list[int]:
    kids = []
    for ptr in cell_pointers(page, head, db.usable):
        if ptr is None or ptr + 4 > db.usable:
            db.note("cell_pointer_out_of_range")
            continue
        kids.append(struct.unpack_from(">I", page, ptr)[0])
    kids.append(head.right_child)
    return kids


def _index_interior_cells(db: SqliteFile, page: bytes, pgno: int, head: Any) -> Iterator[Cell]:
    for ptr in cell_pointers(page, head, db.usable):
        cell = _leaf_cell(db, page, pgno, ptr + 4, False) if ptr is not None else None
        if cell is None or cell.fields is None:
            db.note("cell_undecodable", pgno)
        else:
            yield cell


class ChainLedger:
    """The page images the overflow chains of one walk over old page versions have read
    (WAL frames that are not current, file images a frame replaced), keyed by
    SqliteFile.locate, and where each chain started.

    Several versions of a leaf legitimately share the overflow chain of a row they all
    hold unchanged: a chain that starts at an image already read, for a cell with the same
    payload size and local bytes, is that row again and is skipped (not re-read, not
    damage); any other second entry into a read image is ``overflow_page_shared``. So each
    image is read at most once per walk, whatever the file says.
    """

    def __init__(self) -> None:
        self.read: set[int] = set()
        self.starts: dict[int, tuple[int, int]] = {}


_REPEAT = Cell(0, None, None)
"""A cell a ChainLedger recognised as a copy already produced in this walk (skipped)."""


def leaf_cells(db: SqliteFile, page: bytes, pgno: int, *, as_of: int | None = None,
               ledger: ChainLedger | None = None) -> Iterator[Cell]:
    """Decode every cell of a leaf page image (table or index); damaged cells have fields None.

    Cells must not share bytes: a pointer that repeats another is counted once as
    ``cell_pointer_repeated`` (its cell is produced once), cells whose extents overlap
    as ``cell_pointers_overlap`` (per page; each cell is still decoded where it can be).
    ``as_of`` (a WAL frame index): the image is that frame's, so overflow pages are read as
    they were then (the newest frame up to it, else the database file), not as they are now.
    ``ledger``: the page is an old version, read in a walk of its own (see ChainLedger);
    without one, overflow pages are the current ones and follow the marks (read_overflow).
    """
    head = page_header(page, db.header_offset(pgno), db.usable)
    if head is None or head.kind not in (TABLE_LEAF, INDEX_LEAF):
        db.note("leaf_page_malformed", pgno)
        return
    table = head.kind == TABLE_LEAF
    pointers = cell_pointers(page, head, db.usable)
    seen: set[int] = set()
    for ptr in pointers:
        if ptr is not None and ptr in seen:
            continue
        cell = _leaf_cell(db, page, pgno, ptr, table, as_of, ledger) if ptr is not None else None
        if ptr is not None:
            seen.add(ptr)
        if cell is _REPEAT:
            continue
        if cell is None or cell.fields is None:
            db.note("cell_undecodable", pgno)
            yield cell or Cell(pgno, None, None)
        else:
            yield cell
    if len(seen) < sum(p is not None for p in pointers):
        db.note("cell_pointer_repeated", pgno)
    if _overlapping(page, sorted(seen), table, db.usable):
        db.note("cell_pointers_overlap", pgno)


def _overlapping(page: bytes, starts: list[int], table: bool, usable: int) -> bool:
    """Whether any cell (by its header: payload size, rowid, local part, overflow pointer)
    reaches into the next one, or past the usable end of the page."""
    for at, ptr in enumerate(starts):
        end = _cell_end(page, ptr, table, usable)
        limit = starts[at + 1] if at + 1 < len(starts) else usable
        if end is not None and end > limit:
            return True
    return False


def _cell_end(page: bytes, ptr: int, table: bool, usable: int) -> int | None:
    size = read_varint(page, ptr)
    if size is None or size[0] < 0:
        return None
    pos = size[1]
    if table:
        rowid = read_varint(page, pos)
        if rowid is None:
            return None
        pos = rowid[1]
    local = local_payload_size(size[0], usable, table_leaf=table)
    return pos + local + (4 if local < size[0] else 0)


def _leaf_cell(db: SqliteFile, page: bytes, pgno: int, ptr: int, table: bool, as_of: int | None = None,
               ledger: ChainLedger | None = None) -> Cell | None:
    size = read_varint(page, ptr)
    if size is None or size[0] < 0:
        return None
    rowid = read_varint(page, size[1]) if table else (None, size[1])
    if rowid is None:
        return None
    payload = _payload(db, page, rowid[1], size[0], table, as_of, ledger)
    if payload is _SKIP:
        return _REPEAT
    return Cell(pgno, rowid[0], decode_record(payload) if payload is not None else None)


_SKIP = b"\x00<repeat>"


def _payload(db: SqliteFile, page: bytes, start: int, total: int, table: bool, as_of: int | None,
             ledger: ChainLedger | None) -> bytes | None:
    """The whole payload of a cell: its local part, then its overflow chain (_SKIP: a row
    the ledger has seen in this walk)."""
    if total > db.page_count * db.usable:
        return None  # a damaged size: more bytes than the whole file holds (never buffer that)
    local = local_payload_size(total, db.usable, table_leaf=table)
    if start + local > db.usable or (local < total and start + local + 4 > db.usable):
        return None
    head = page[start:start + local]
    if local == total:
        return head
    first = struct.unpack_from(">I", page, start + local)[0]
    if ledger is not None:
        rest = _ledger_chain(db, ledger, first, total - local, as_of, zlib.crc32(head))
    else:
        rest = read_overflow(db, first, total - local)
    if rest is _SKIP:
        return _SKIP
    return head + rest if rest is not None else None


def read_overflow(db: SqliteFile, pgno: int, need: int, as_of: int | None = None) -> bytes | None:
    """Follow an overflow chain for ``need`` bytes; None if it leaves the file, loops or ends short.

    Without ``as_of`` (the current images, one walk with the tree walks): a page goes
    through ``db.marks`` like any page, so it is read at most once per walk: a page that is
    already a b-tree page, a freelist trunk or part of a chain (two cells sharing it, a
    cycle) is counted as ``overflow_page_shared`` and not read again. A freelist leaf may
    be entered once (a freed row's chain). With ``as_of``: the chain as it was then, in a
    walk of its own (see leaf_cells' ``ledger``; this form re-reads nothing only per chain).
    """
    if as_of is not None:
        return _ledger_chain(db, ChainLedger(), pgno, need, as_of, None)

    def take(number: int) -> bytes | None | Literal[False]:
        mark = db.marks[number]
        if mark not in (0, MARK_FREE_LEAF):
            return False
        db.marks[number] = MARK_OVERFLOW if mark == 0 else MARK_FREE_OVERFLOW
        return db.page(number)

    return _follow_chain(db, pgno, need, take)


def _follow_chain(db: SqliteFile, pgno: int, need: int,
                  take: Callable[[int], bytes | None | Literal[False]]) -> bytes | None:
    """The one overflow-chain walk: ``need`` bytes from page ``pgno`` on. ``take(pgno)`` claims
    and reads a page: its image, None when it cannot be read, False when this walk has had it
    already (noted as ``overflow_page_shared``). None if the chain leaves the file, meets a page
    twice or ends short (noted as ``overflow_chain_broken``)."""
    parts: list[bytes] = []
    while need > 0:
        if not db.valid_pgno(pgno):
            db.note("overflow_chain_broken")
            return None
        page = take(pgno)
        if page is False:
            db.note("overflow_page_shared", pgno)
            return None
        if page is None:
            db.note("overflow_chain_broken", pgno)
            return None
        chunk = page[4:db.usable][:need]
        parts.append(chunk)
        need -= len(chunk)
        pgno = struct.unpack_from(">I", page, 0)[0]
    return b"".join(parts)


def _ledger_chain(db: SqliteFile, ledger: ChainLedger, pgno: int, need: int, as_of: int | None,
                  local_crc: int | None) -> bytes | None:
    """read_overflow over old page versions: every image read at most once per ledger."""
    if not db.valid_pgno(pgno):
        db.note("overflow_chain_broken")
        return None
    first = db.locate(pgno, as_of)
    if first in ledger.read:
        if local_crc is not None and ledger.starts.get(first) == (need, local_crc):
            return _SKIP
        db.note("overflow_page_shared", pgno)
        return None
    if local_crc is not None:
        ledger.starts[first] = (need, local_crc)

    def take(number: int) -> bytes | None | Literal[False]:
        key = db.locate(number, as_of)
        if key in ledger.read:
            return False
        ledger.read.add(key)
        return db.image(key)

    return _follow_chain(db, pgno, need, take)


def walk_freelist(db: SqliteFile) -> list[int]:
    """Mark the freelist trunk and leaf pages; return the leaf page numbers (they may hold old rows).

    Trunk page: next trunk (4 bytes), leaf count (4 bytes), then the leaf page numbers.
    """
    leaves: list[int] = []
    trunk, budget = db.header.freelist_trunk, db.page_count
    while trunk and budget > 0:
        budget -= 1
        page = db.page(trunk) if db.valid_pgno(trunk) and not db.marks[trunk] else None
        if page is None:
            db.note("freelist_trunk_broken", trunk)
            return leaves
        db.marks[trunk] = MARK_FREE_TRUNK
        count = min(struct.unpack_from(">I", page, 4)[0], (db.usable - 8) // 4)
        leaves.extend(_free_leaves(db, page, count))
        trunk = struct.unpack_from(">I", page, 0)[0]
    return leaves


def _free_leaves(db: SqliteFile, page: bytes, count: int) -> Iterator[int]:
    for i in range(count):
        leaf = struct.unpack_from(">I", page, 8 + 4 * i)[0]
        if not db.valid_pgno(leaf) or db.marks[leaf]:
            db.note("freelist_leaf_invalid")
            continue
        db.marks[leaf] = MARK_FREE_LEAF
        yield leaf


def loose_leaf_pages(db: SqliteFile, progress: Callable[[int, int], None] | None = None
                     ) -> Iterator[tuple[int, bytes, bool]]:
    """Table-leaf page images no walk reached, and freelist leaves: (pgno, image, on_freelist).

    Scans every page once, in file order (``progress(done, total)`` every 4096 pages). A
    page the walks left unmarked that still holds a table-leaf header was orphaned (its
    parent or the schema lost) or never reused.
    """
    for pgno in range(1, db.page_count + 1):
        if progress is not None and pgno % 4096 == 0:
            progress(pgno, db.page_count)
        if db.marks[pgno] not in (0, MARK_FREE_LEAF):
            continue
        page = db.page(pgno)
        if page is None:
            continue
        head = page_header(page, db.header_offset(pgno), db.usable)
        if head is not None and head.kind == TABLE_LEAF and head.cell_count:
            yield pgno, page, db.marks[pgno] == MARK_FREE_LEAF

