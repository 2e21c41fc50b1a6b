"""Find and rewrite b-tree pages of a real store file, to craft damage SQLite's own writer
never makes (independent of the reader under test: it parses only page headers and cell
pointers, https://www.sqlite.org/fileformat2.html section 1.6).

Every function works on a closed store file (no -wal content), in place.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass
from pathlib import Path

TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR = 13, 5, 10, 2


@dataclass(frozen=True)
class Page:
    """One page of a tree: number, kind, cell pointers, and (interior) its children."""

    pgno: int
    kind: int
    pointers: list[int]
    children: list[int]


def page_size(db: Path) -> int:
    raw = struct.unpack(">H", db.read_bytes()[16:18])[0]
    return 65536 if raw == 1 else raw


def roots(db: Path) -> dict[str, int]:
    """name -> root page of every table and index (read by SQLite, before the damage)."""
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return {name: root for name, root in conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0")}
    finally:
        conn.close()


def read_page(db: Path, pgno: int) -> bytes:
    size = page_size(db)
    with open(db, "rb") as fh:
        fh.seek((pgno - 1) * size)
        return fh.read(size)


def write_page(db: Path, pgno: int, image: bytes) -> None:
    size = page_size(db)
    assert len(image) == size
    with open(db, "r+b") as fh:
        fh.seek((pgno - 1) * size)
        fh.write(image)


def parse(image: bytes, pgno: int) -> Page:
    off = 100 if pgno == 1 else 0
    kind = image[off]
    cells = struct.unpack_from(">H", image, off + 3)[0]
    head = 8 if kind in (TABLE_LEAF, INDEX_LEAF) else 12
    pointers = [struct.unpack_from(">H", image, off + head + 2 * i)[0] for i in range(cells)]
    children = []
    if head == 12:
        children = [struct.unpack_from(">I", image, p)[0] for p in pointers]
        children.append(struct.unpack_from(">I", image, off + 8)[0])
    return Page(pgno, kind, pointers, children)


def tree(db: Path, root: int) -> list[Page]:
    """Every page of the b-tree rooted at ``root``, parents before children."""
    out, stack = [], [root]
    while stack:
        page = parse(read_page(db, pgno := stack.pop()), pgno)
        out.append(page)
        stack.extend(reversed(page.children))
    return out


def leaves(db: Path, table: str) -> list[Page]:
    """The leaf pages of ``table``'s tree that hold cells, in key order."""
    return [p for p in tree(db, roots(db)[table]) if p.kind in (TABLE_LEAF, INDEX_LEAF) and p.pointers]


def set_pointers(db: Path, pgno: int, pointers: list[int]) -> None:
    """Rewrite the cell pointer array of page ``pgno`` (same cell count)."""
    image = bytearray(read_page(db, pgno))
    off = 100 if pgno == 1 else 0
    head = 8 if image[off] in (TABLE_LEAF, INDEX_LEAF) else 12
    for i, ptr in enumerate(pointers):
        struct.pack_into(">H", image, off + head + 2 * i, ptr)
    write_page(db, pgno, bytes(image))


def build_leaf(size: int, cells: list[bytes], kind: int = TABLE_LEAF) -> bytes:
    """A leaf page image holding ``cells`` (raw cell bytes), packed from the end as SQLite does."""
    image = bytearray(size)
    end, pointers = size, []
    for cell in cells:
        end -= len(cell)
        image[end:end + len(cell)] = cell
        pointers.append(end)
    assert 8 + 2 * len(cells) <= end, "cells do not fit one page"
    image[0] = kind
    struct.pack_into(">HHHB", image, 1, 0, len(cells), end, 0)
    for i, ptr in enumerate(pointers):
        struct.pack_into(">H", image, 8 + 2 * i, ptr)
    return bytes(image)


def varint(value: int) -> bytes:
    """SQLite's varint of a non-negative value below 2**56."""
    if value < 0x80:
        return bytes([value])
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


def cell_bytes(image: bytes, ptr: int, table_leaf: bool = True) -> bytes:
    """The raw bytes of the cell at ``ptr`` of a leaf page (payload size, rowid, local part,
    overflow pointer), by fileformat2's local-size rule for a page of len(image) usable bytes."""
    size, pos = read_varint(image, ptr)
    if table_leaf:
        _rowid, pos = read_varint(image, pos)
    usable = len(image)
    max_local = usable - 35 if table_leaf else ((usable - 12) * 64 // 255) - 23
    local = size
    if size > max_local:
        min_local = ((usable - 12) * 32 // 255) - 23
        k = min_local + (size - min_local) % (usable - 4)
        local = k if k <= max_local else min_local
    return image[ptr:pos + local + (4 if local < size else 0)]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = buf[pos + i]
        if i == 8:
            return (value << 8) | byte, pos + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    raise AssertionError("unreachable")


def with_rowid(cell: bytes, rowid: int) -> bytes:
    """A table-leaf cell with its rowid replaced."""
    size, pos = read_varint(cell, 0)
    _old, rest = read_varint(cell, pos)
    return cell[:pos] + varint(rowid) + cell[rest:]
