"""A pure-Python reader of the SQLite database file format, for damaged files.

Reference: https://www.sqlite.org/fileformat2.html. This module opens nothing with SQLite:
it reads bytes. :class:`SqliteFile` gives the current image of each page (the database
file overlaid with the committed frames of its WAL, see :mod:`.wal`), the header,
b-tree pages and cells; :mod:`.btree` walks trees, the freelist and loose pages.

Guarantees:
- Bounded memory: pages are read one at a time with ``seek``/``read``; per page it keeps
  one byte of bookkeeping (``marks``), never the file.
- Never follows a pointer outside ``1..page_count`` and never reads past the file.
- Never raises on malformed content: every damaged structure is counted in ``damage``
  (a Counter keyed by a stable code) and skipped. I/O errors opening the files propagate.
- Works with a zeroed header: the page size then comes from the WAL header, or from the
  pages themselves (:func:`detect_page_size`), the text encoding is taken to be UTF-8.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections import Counter
from dataclasses import dataclass
from typing import BinaryIO

from .record import local_payload_size, read_varint
from .pinned import open_pinned
from .wal import WalScan, scan_wal, valid_page_size

MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR = 13, 5, 10, 2
BTREE_TYPES = (TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR)
# marks: what the walk found each page to be (0: not reached).
MARK_BTREE, MARK_OVERFLOW, MARK_FREE_TRUNK, MARK_FREE_LEAF, MARK_FREE_OVERFLOW = 1, 2, 3, 4, 5
"""MARK_FREE_OVERFLOW: a freelist leaf an overflow chain (of a freed row) ran through."""
NOTED_PAGES = 100
"""At most this many page numbers are kept per damage code (the count is always exact)."""


@dataclass(frozen=True)
class DbHeader:
    """The fields of the 100-byte database header salvage needs; ``magic_ok`` False if damaged."""

    magic_ok: bool
    page_size: int
    reserved: int
    db_pages: int
    freelist_trunk: int
    freelist_count: int
    text_encoding: int
    user_version: int
    application_id: int


def parse_header(raw: bytes) -> DbHeader:
    """Decode the header bytes (short or garbage input gives ``magic_ok=False`` and zeros)."""
    raw = raw.ljust(HEADER_SIZE, b"\x00")
    size = struct.unpack_from(">H", raw, 16)[0]
    size = 65536 if size == 1 else size
    fields = struct.unpack_from(">IIII", raw, 28)
    return DbHeader(
        magic_ok=raw[:16] == MAGIC, page_size=size, reserved=raw[20],
        db_pages=fields[0], freelist_trunk=fields[1], freelist_count=fields[2],
        text_encoding=struct.unpack_from(">I", raw, 56)[0],
        user_version=struct.unpack_from(">I", raw, 60)[0],
        application_id=struct.unpack_from(">I", raw, 68)[0],
    )


@dataclass(frozen=True)
class PageHeader:
    """A b-tree page header: type, cell count, where cells start, right-most child (interior)."""

    kind: int
    cell_count: int
    content_start: int
    right_child: int
    size: int
    offset: int

    @property
    def is_leaf(self) -> bool:
        return self.kind in (TABLE_LEAF, INDEX_LEAF)


def page_header(page: bytes, offset: int, usable: int) -> PageHeader | None:
    """Parse and sanity-check the b-tree header at ``page[offset]``; None if it is not one.

    Checks: a known page type, the cell pointer array fits before the content area, the
    content area starts inside the usable part of the page.
    """
    if len(page) < offset + 12:
        return None
    kind = page[offset]
    if kind not in BTREE_TYPES:
        return None
    cells, start = struct.unpack_from(">HH", page, offset + 3)
    start = 65536 if start == 0 else start
    size = 8 if kind in (TABLE_LEAF, INDEX_LEAF) else 12
    right = 0 if size == 8 else struct.unpack_from(">I", page, offset + 8)[0]
    if offset + size + 2 * cells > min(start, usable) or start > usable:
        return None
    return PageHeader(kind, cells, start, right, size, offset)


def cell_pointers(page: bytes, head: PageHeader, usable: int) -> list[int | None]:
    """The cell offsets of a page; an offset outside the content area is None (damaged)."""
    base = head.offset + head.size
    out: list[int | None] = []
    for i in range(head.cell_count):
        ptr = struct.unpack_from(">H", page, base + 2 * i)[0]
        out.append(ptr if head.content_start <= ptr < usable else None)
    return out


def looks_like_btree_page(page: bytes, offset: int, usable: int) -> bool:
    """Whether ``page`` holds a plausible b-tree page (header and every cell pointer in range)."""
    head = page_header(page, offset, usable)
    if head is None or (head.cell_count == 0 and head.content_start not in (usable, 65536)):
        return False
    return all(p is not None for p in cell_pointers(page, head, usable))


def detect_page_size(f: BinaryIO, file_size: int, samples: int = 96) -> int | None:
    """Guess the page size from the pages themselves (for a zeroed or damaged header).

    For each candidate size it samples page starts spread over the file and counts those
    holding a plausible b-tree page whose cell content reaches exactly the end of the page
    (SQLite packs cells from the page end; a freeblock or a fragment of at most 3 bytes may
    sit there instead). A page read with twice its size ends too early, with half its size
    points past the end, so only the true size scores. None when no page fits any size.
    """
    scores = {size: page_size_score(f, file_size, size, 0, samples) for size in (512 << i for i in range(8))}
    best = max(scores.values(), default=0)
    return max(size for size, hits in scores.items() if hits == best) if best else None


def page_size_score(f: BinaryIO, file_size: int, size: int, reserved: int, samples: int = 96) -> int:
    """How many of ``samples`` page starts spread over the file hold a b-tree page that fits
    ``size`` with ``reserved`` bytes at the end of each page (see detect_page_size)."""
    pages = file_size // size
    picks = sorted({1 + (k * (pages - 1)) // max(1, samples - 1) for k in range(min(samples, pages))})
    return sum(_sample_hit(f, pgno, size, size - reserved) for pgno in picks)


def _sample_hit(f: BinaryIO, pgno: int, size: int, usable: int) -> bool:
    f.seek((pgno - 1) * size)
    page = f.read(size)
    offset = HEADER_SIZE if pgno == 1 else 0
    head = page_header(page, offset, usable) if len(page) == size else None
    return (head is not None and looks_like_btree_page(page, offset, usable)
            and _content_end(page, head, usable) in range(usable - 3, usable + 1))


def _content_end(page: bytes, head: PageHeader, usable: int) -> int:
    """Where the cell content area ends: the end of the highest cell or freeblock."""
    ends = [head.content_start if head.cell_count == 0 else 0]
    pointers = [p for p in cell_pointers(page, head, usable) if p is not None]
    if pointers:
        ends.append(_cell_end(page, max(pointers), head.kind, usable))
    block, hops = struct.unpack_from(">H", page, head.offset + 1)[0], 0
    while block and block + 4 <= usable and hops < 1000:
        ends.append(block + struct.unpack_from(">H", page, block + 2)[0])
        block, hops = struct.unpack_from(">H", page, block)[0], hops + 1
    return max(ends)


def _cell_end(page: bytes, ptr: int, kind: int, usable: int) -> int:
    pos = ptr + (4 if kind in (TABLE_INTERIOR, INDEX_INTERIOR) else 0)
    size = read_varint(page, pos)
    if size is None:
        return -1
    if kind == TABLE_INTERIOR:
        return size[1]
    pos = size[1]
    if kind == TABLE_LEAF:
        rowid = read_varint(page, pos)
        if rowid is None:
            return -1
        pos = rowid[1]
    local = local_payload_size(max(size[0], 0), usable, table_leaf=kind == TABLE_LEAF)
    return pos + local + (4 if local < size[0] else 0)


class SqliteFile:
    """The current page images of a database file and its WAL, read lazily.

    ``page(n)`` is the newest committed WAL frame of page n if there is one, else page n
    of the database file, else None (missing: truncated, or beyond the end). Use as a
    context manager; it opens both files read-only and closes them on exit.
    """

    def __init__(self, db_path: str | os.PathLike[str], wal_path: str | os.PathLike[str] | None = None) -> None:
        self.damage: Counter[str] = Counter()
        self.damaged_pages: dict[str, list[int]] = {}
        self.pages_read = 0
        """Page images read so far (database file and WAL): the work a walk costs."""
        self._db = open_pinned(db_path)  # noqa: SIM115 - closed in close(); pinned: SQLite may have it open here
        self._wal: BinaryIO | None = None
        self.file_size = os.fstat(self._db.fileno()).st_size
        self.header = parse_header(self._db.read(HEADER_SIZE))
        self.wal: WalScan | None = None
        self._reserved_override: int | None = None
        self._frames_by_page: dict[int, list[int]] | None = None
        self.page_size, self.page_size_source = self._choose_page_size(wal_path)
        reserved = self.header.reserved if self.header.magic_ok else 0
        self.usable = self.page_size - (reserved if self._reserved_override is None else self._reserved_override)
        self.file_pages = self.file_size // self.page_size if self.page_size else 0
        # Pages of every WAL frame count, committed or not (older frames are read as evidence),
        # up to a bound: the database grows at most one page per frame, so a larger number in
        # a damaged frame header is garbage and must not size ``marks``.
        frames = self.wal.frames if self.wal else []
        bound = self.file_pages + len(frames)
        self.page_count = max([self.file_pages, *(f.pgno for f in frames if f.pgno <= bound)], default=0)
        self.marks = bytearray(self.page_count + 1)
        if self.wal is not None and 1 in self.wal.live:
            # The header that counts is the newest committed page 1 (freelist, size, versions).
            newest = parse_header(self.page(1) or b"")
            self.header = newest if newest.magic_ok else self.header

    def _choose_page_size(self, wal_path: str | os.PathLike[str] | None) -> tuple[int, str]:
        hdr = self.header
        size, source = (hdr.page_size, "header") if hdr.magic_ok and valid_page_size(hdr.page_size) else (0, "")
        if not hdr.magic_ok and self.file_size:
            self.note("db_header_damaged", 1)
        if wal_path is not None and os.path.exists(wal_path):
            self._wal = open_pinned(wal_path)  # noqa: SIM115 - closed in close()
            self.wal = scan_wal(self._wal, os.fstat(self._wal.fileno()).st_size, size or None)
            if self.wal is not None:
                self.damage.update(self.wal.damage)
                if not size and valid_page_size(self.wal.page_size):
                    size, source = self.wal.page_size, "wal"
        if size and not page_size_score(self._db, self.file_size, size, hdr.reserved):
            size, source = self._header_layout_refuted(size, source)
        if not size:
            detected = detect_page_size(self._db, self.file_size)
            size, source = (detected, "detected") if detected else (4096, "default")
        if self.wal is not None and self.wal.page_size != size:
            self.damage["wal_page_size_mismatch"] += 1
            self.wal = None
        return size, source

    def _header_layout_refuted(self, size: int, source: str) -> tuple[int, str]:
        """The header's page size (or reserved bytes) fits no page: a damaged header field.
        Keep it only when nothing fits better (a file of overflow pages only, say)."""
        detected = detect_page_size(self._db, self.file_size)
        if detected is None:
            return size, source
        self.note("db_header_layout_wrong", 1)
        self._reserved_override = 0
        return 0, ""

    def close(self) -> None:
        """Close both files (idempotent)."""
        self._db.close()
        if self._wal is not None:
            self._wal.close()

    def __enter__(self) -> "SqliteFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def note(self, code: str, page: int | None = None) -> None:
        """Count one damaged structure; remember up to NOTED_PAGES page numbers per code."""
        self.damage[code] += 1
        pages = self.damaged_pages.setdefault(code, [])
        if page is not None and len(pages) < NOTED_PAGES and page not in pages:
            pages.append(page)

    def valid_pgno(self, pgno: int) -> bool:
        """Whether a page pointer is inside the database (1..page_count)."""
        return 1 <= pgno <= self.page_count

    def page(self, pgno: int) -> bytes | None:
        """The current image of page ``pgno`` (WAL overlay), or None if it is not in either file."""
        if not self.valid_pgno(pgno):
            return None
        frame = self.wal.live.get(pgno) if self.wal else None
        if frame is not None:
            return self.wal_image(self.wal.frames[frame].offset)
        return self.db_image(pgno)

    def db_image(self, pgno: int) -> bytes | None:
        """Page ``pgno`` as stored in the database file itself (ignoring the WAL)."""
        if not 1 <= pgno <= self.file_pages:
            return None
        self.pages_read += 1
        self._db.seek((pgno - 1) * self.page_size)
        return self._db.read(self.page_size)

    def wal_image(self, offset: int) -> bytes | None:
        """The page image stored in the WAL at ``offset``."""
        if self._wal is None:
            return None
        self.pages_read += 1
        self._wal.seek(offset)
        data = self._wal.read(self.page_size)
        return data if len(data) == self.page_size else None

    def image_as_of(self, pgno: int, frame_index: int) -> bytes | None:
        """Page ``pgno`` as of WAL frame ``frame_index``: its newest frame up to that index
        (whatever the frames' state), else the database file's image."""
        return self.image(self.locate(pgno, frame_index))

    def locate(self, pgno: int, as_of: int | None = None) -> int:
        """Which stored image is page ``pgno`` (current, or as of WAL frame ``as_of``): a WAL
        frame index (>= 0), or ``-pgno`` for the database file's page. Reads nothing."""
        if self.wal is None:
            return -pgno
        if as_of is None:
            frame = self.wal.live.get(pgno)
            return -pgno if frame is None else frame
        if self._frames_by_page is None:
            self._frames_by_page = {}
            for frame in self.wal.frames:
                self._frames_by_page.setdefault(frame.pgno, []).append(frame.index)
        indices = self._frames_by_page.get(pgno, [])
        at = bisect.bisect_right(indices, as_of)
        return indices[at - 1] if at else -pgno

    def image(self, key: int) -> bytes | None:
        """The stored image ``key`` names (see locate), or None if it is not in the files."""
        if key < 0:
            return self.db_image(-key)
        return self.wal_image(self.wal.frames[key].offset) if self.wal is not None else None

    def header_offset(self, pgno: int) -> int:
        """Where the b-tree header of page ``pgno`` starts (after the file header on page 1)."""
        return HEADER_SIZE if pgno == 1 else 0
