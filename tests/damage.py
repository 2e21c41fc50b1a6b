"""Build real stores with known content, then damage them the way disks and people do.

``build_store`` writes random-but-seeded content through SqliteStorage and returns the
exact rows (``Original``: table, key, data, identity: the columns the checksum binds). ``copy_store`` snapshots db + -wal + -shm
(optionally while the owner still has it open, so committed rows sit in the -wal).
Each damage function takes the database path and a ``random.Random`` and changes bytes in
place; ``DAMAGES`` lists them by name. They are shared by the property tests, the salvage
tests and the benchmark corpus (bench/salvage_vs_recover.py).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass
from pathlib import Path

from steerable_agent_runtime.models import AgentSession, ChatMessage
from steerable_agent_runtime.storage.checksum import IDENTITY
from steerable_agent_runtime.storage.schema import TABLES
from steerable_agent_runtime.storage.sqlite import SqliteStorage


@dataclass(frozen=True)
class Original:
    """One row as stored: table, key (tuple of key column values), exact data bytes, and its
    identity (the values of storage.checksum.IDENTITY: key and place columns)."""

    table: str
    key: tuple
    data: bytes
    identity: tuple = ()


WORDS = ("hello", "wörld", "päckchen", "✓", "tool", "call", "sum", "\"quoted\"", "back\\slash", "日本")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


async def _fill(store: SqliteStorage, rng: random.Random, chats: int, entries: int, big: int) -> None:
    for c in range(chats):
        cid = f"chat-{c}"
        await store.upsert_session(AgentSession(session_id=f"s-{c}", user_id="u", chat_id=cid, current_stage="plan",
                                                is_active=bool(c % 2), created_at="2026-01-01T00:00:00Z",
                                                updated_at="2026-01-01T00:00:01Z"))
        for m in range(rng.randint(1, 6)):
            await store.append_message(ChatMessage(id=f"m-{c}-{m}", chat_id=cid, role="user",
                                                   content=_text(rng, rng.randint(1, 30)),
                                                   created_at="2026-01-01T00:00:02Z"))
        at = f"2026-01-01T00:01:{c:02d}.000000Z"  # fixed, so a seed always gives the same bytes
        items = [{"type": "item", "at": at, "message": {"role": "user", "content": _text(rng, rng.randint(1, 40))}}
                 for _ in range(entries)]
        items += [{"type": "item", "at": at, "message": {"role": "assistant", "content": "x" * rng.randint(3000, 9000)}}
                  for _ in range(big)]
        await store.append_history(cid, items)


def build_store(path: Path, *, seed: int, chats: int = 4, entries: int = 20, big: int = 1,
                keep_open: bool = False) -> tuple[list[Original], SqliteStorage | None]:
    """Write a store at ``path``; return its rows and, with ``keep_open``, the open store
    (its rows then sit in the -wal until the caller closes it)."""
    rng = random.Random(seed)
    store = SqliteStorage(path, synchronous="NORMAL")
    asyncio.run(_fill(store, rng, chats, entries, big))
    rows = read_rows(path)
    if keep_open:
        return rows, store
    store.close_sync()
    return rows, None


def read_rows(path: Path) -> list[Original]:
    """Every entity row of the store at ``path``, read by SQLite from a private copy."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = copy_store(path, Path(tmp) / "copy.db")
        conn = sqlite3.connect(copy)
        try:
            width = {t: len(spec.key) for t, spec in TABLES.items()}
            return [Original(t, tuple(r[:width[t]]), r[-1], tuple(r[width[t]:-1])) for t, spec in TABLES.items()
                    for r in conn.execute(f"SELECT {', '.join(spec.key)}, {', '.join(IDENTITY[t])},"
                                          f" CAST(data AS BLOB) FROM {t}")]
        finally:
            conn.close()


def copy_store(src: Path, dst: Path) -> Path:
    """Copy db, -wal and -shm (those that exist) to ``dst``; return ``dst``."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{src}{suffix}"):
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


def page_size_of(path: Path) -> int:
    with open(path, "rb") as fh:
        raw = struct.unpack(">H", fh.read(18)[16:18])[0]
    return 65536 if raw == 1 else raw or 4096


def _patch(path: Path | str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def flip_bytes(db: Path, rng: random.Random) -> None:
    """Flip 1-8 random bytes anywhere in the database file."""
    size = os.path.getsize(db)
    for _ in range(rng.randint(1, 8)):
        offset = rng.randrange(size)
        with open(db, "r+b") as fh:
            fh.seek(offset)
            byte = fh.read(1)[0]
            fh.seek(offset)
            fh.write(bytes([byte ^ rng.randint(1, 255)]))


def zero_page(db: Path, rng: random.Random) -> None:
    """Zero one random page (not page 1)."""
    ps = page_size_of(db)
    pages = os.path.getsize(db) // ps
    if pages > 1:
        _patch(db, rng.randrange(1, pages) * ps, b"\x00" * ps)


def zero_header(db: Path, rng: random.Random) -> None:
    """Zero the 100-byte database header."""
    _patch(db, 0, b"\x00" * 100)


def zero_page1(db: Path, rng: random.Random) -> None:
    """Zero page 1: header and sqlite_schema."""
    _patch(db, 0, b"\x00" * page_size_of(db))


def overwrite_root(db: Path, rng: random.Random) -> None:
    """Fill the root page of a random entity table with random bytes."""
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        roots = [r for (r,) in conn.execute("SELECT rootpage FROM sqlite_master WHERE type='table' AND name IN "
                                            f"({','.join('?' * len(TABLES))})", tuple(TABLES))]
    finally:
        conn.close()
    ps = page_size_of(db)
    _patch(db, (rng.choice(roots) - 1) * ps, rng.randbytes(ps))


def truncate(db: Path, rng: random.Random) -> None:
    """Cut the database file at a random length (at least one byte shorter)."""
    size = os.path.getsize(db)
    os.truncate(db, rng.randrange(max(1, size // 4), size))


def damage_wal_header(db: Path, rng: random.Random) -> None:
    """Flip one byte of the -wal header (magic, page size, salts or its checksum)."""
    wal = f"{db}-wal"
    if os.path.getsize(wal) >= 32:
        offset = rng.randrange(32)
        with open(wal, "rb") as fh:
            fh.seek(offset)
            byte = fh.read(1)[0]
        _patch(wal, offset, bytes([byte ^ 0xFF]))


def damage_wal_checksum(db: Path, rng: random.Random) -> None:
    """Flip a byte in the checksum of one random -wal frame (it and every later frame go invalid)."""
    wal = f"{db}-wal"
    ps = page_size_of(db)
    frames = (os.path.getsize(wal) - 32) // (24 + ps)
    if frames > 0:
        offset = 32 + rng.randrange(frames) * (24 + ps) + 16 + rng.randrange(8)
        with open(wal, "rb") as fh:
            fh.seek(offset)
            byte = fh.read(1)[0]
        _patch(wal, offset, bytes([byte ^ 0xFF]))


def remove_shm(db: Path, rng: random.Random) -> None:
    """Delete the -shm file (readers must rebuild the WAL index from the -wal)."""
    if os.path.exists(f"{db}-shm"):
        os.unlink(f"{db}-shm")


def append_garbage(db: Path, rng: random.Random) -> None:
    """Append 1 byte to 3 pages of random bytes."""
    with open(db, "ab") as fh:
        fh.write(rng.randbytes(rng.randint(1, 3 * page_size_of(db))))


_KEYS = re.compile(rb"(?:chat|s|m)-[0-9]+(?:-[0-9]+)?")


def flip_key(db: Path, rng: random.Random) -> None:
    """Change one digit of one key value somewhere in the file (a record_id, session id or
    message id in a row, an index or a JSON text): the text stays valid, the key becomes
    another, possibly one that exists (an entry moved to another chat)."""
    raw = db.read_bytes()
    found = [m for m in _KEYS.finditer(raw)]
    if found:
        m = rng.choice(found)
        digits = [i for i in range(m.start(), m.end()) if 48 <= raw[i] <= 57]
        at = rng.choice(digits)
        _patch(db, at, bytes([48 + (raw[at] - 48 + rng.randint(1, 9)) % 10]))


DAMAGES: dict[str, Callable[[Path, random.Random], None]] = {
    "flip_key": flip_key,
    "flip_bytes": flip_bytes, "zero_page": zero_page, "zero_header": zero_header, "zero_page1": zero_page1,
    "overwrite_root": overwrite_root, "truncate": truncate, "wal_header": damage_wal_header,
    "wal_checksum": damage_wal_checksum, "remove_shm": remove_shm, "append_garbage": append_garbage,
}
WAL_DAMAGES = frozenset({"wal_header", "wal_checksum", "remove_shm"})
"""Damage classes that need the store's rows in the -wal (build with keep_open)."""


# -- structural damage that breaks no checksum (issue 16 items 2 and 3) ------------------------
# Crafted with tests/pagecraft.py on a closed store (no -wal content) unless noted. They are
# kept out of DAMAGES (check's parallel test and the .recover benchmark corpus use that), and
# used by the salvage property tests (tests/maintenance/test_salvage_props.py).


def _entity_trees(db: Path) -> dict[str, list]:
    from tests import pagecraft

    tables = pagecraft.roots(db)
    return {name: pagecraft.tree(db, tables[name]) for name in TABLES if name in tables}


def _table_leaves(db: Path, rng: random.Random, cells: int = 2) -> list:
    from tests import pagecraft

    return [p for pages in _entity_trees(db).values() for p in pages
            if p.kind == pagecraft.TABLE_LEAF and len(p.pointers) >= cells]


def root_other_kind(db: Path, rng: random.Random) -> None:
    """Overwrite an entity table's root with a page of another kind: an index page, or a
    leaf of another table (copied from the same file)."""
    from tests import pagecraft

    tables = pagecraft.roots(db)
    target = rng.choice([t for t in TABLES if t in tables])
    donors = [root for name, root in tables.items() if name not in TABLES]  # indexes, full-text tables
    donors += [p.pgno for name, pages in _entity_trees(db).items() if name != target for p in pages
               if p.kind == pagecraft.TABLE_LEAF and p.pointers]
    pagecraft.write_page(db, tables[target], pagecraft.read_page(db, rng.choice(donors)))


def _two_pointers(db: Path, rng: random.Random) -> tuple[Any, list[int], int, int] | None:
    """A random table leaf with two cells or more, its cell pointers and two distinct indexes
    into them; None on a store too small to have one (one chat, no entries)."""
    leaves = _table_leaves(db, rng)
    if not leaves:
        return None
    leaf = rng.choice(leaves)
    i, j = rng.sample(range(len(leaf.pointers)), 2)
    return leaf, list(leaf.pointers), i, j


def repeat_cell_pointer(db: Path, rng: random.Random) -> None:
    """Make one cell pointer of a table leaf equal another (the row it reached is lost)."""
    from tests import pagecraft

    picked = _two_pointers(db, rng)
    if picked is None:
        return flip_bytes(db, rng)
    leaf, pointers, i, j = picked
    pointers[j] = pointers[i]
    pagecraft.set_pointers(db, leaf.pgno, pointers)


def overlap_cell_pointer(db: Path, rng: random.Random) -> None:
    """Point one cell pointer of a table leaf into the middle of another cell."""
    from tests import pagecraft

    picked = _two_pointers(db, rng)
    if picked is None:
        return flip_bytes(db, rng)
    leaf, pointers, i, j = picked
    pointers[j] = min(pointers[i] + rng.randint(1, 8), pagecraft.page_size(db) - 1)
    pagecraft.set_pointers(db, leaf.pgno, pointers)


def _overflow_leaves(db: Path) -> list:
    from tests import pagecraft

    size = pagecraft.page_size(db)
    found = []
    for leaf in _table_leaves(db, random.Random(0), cells=1):
        image = pagecraft.read_page(db, leaf.pgno)
        for ptr in leaf.pointers:
            cell = pagecraft.cell_bytes(image, ptr)
            if pagecraft.read_varint(cell, 0)[0] > size - 35:
                found.append((leaf, struct.unpack(">I", cell[-4:])[0]))
    return found


def share_overflow_chain(db: Path, rng: random.Random) -> None:
    """Copy a leaf holding a row with an overflow chain over another leaf: the chain is
    entered by two cells (and the overwritten leaf's rows are lost)."""
    from tests import pagecraft

    sources = _overflow_leaves(db)
    if not sources:
        return flip_bytes(db, rng)
    leaf, _first = rng.choice(sources)
    others = [p for p in _table_leaves(db, rng, cells=1) if p.pgno != leaf.pgno]
    if others:
        pagecraft.write_page(db, rng.choice(others).pgno, pagecraft.read_page(db, leaf.pgno))


def cycle_overflow_chain(db: Path, rng: random.Random) -> None:
    """Point an overflow page's "next" back at itself or at the chain's first page."""
    from tests import pagecraft

    sources = _overflow_leaves(db)
    if not sources:
        return flip_bytes(db, rng)
    _leaf, first = rng.choice(sources)
    chain, page = [first], first
    while True:
        nxt = struct.unpack(">I", pagecraft.read_page(db, page)[:4])[0]
        if not nxt or nxt in chain or len(chain) > 1000:
            break
        chain.append(page := nxt)
    at = rng.choice(chain)
    image = bytearray(pagecraft.read_page(db, at))
    struct.pack_into(">I", image, 0, rng.choice([at, first]))
    pagecraft.write_page(db, at, bytes(image))


def interior_cycle(db: Path, rng: random.Random) -> None:
    """Point a child pointer of an interior table page at its own tree's root (or itself)."""
    from tests import pagecraft

    interiors = [(pages[0].pgno, p) for pages in _entity_trees(db).values() for p in pages
                 if p.kind == pagecraft.TABLE_INTERIOR]
    if not interiors:
        return repeat_cell_pointer(db, rng)
    root, page = rng.choice(interiors)
    image = bytearray(pagecraft.read_page(db, page.pgno))
    target = rng.choice([root, page.pgno])
    if page.pointers and rng.random() < 0.5:
        struct.pack_into(">I", image, rng.choice(page.pointers), target)
    else:
        struct.pack_into(">I", image, 8, target)
    pagecraft.write_page(db, page.pgno, bytes(image))


def wal_bad_frame_mid(db: Path, rng: random.Random) -> None:
    """Flip a byte in the page of a -wal frame that a later commit frame follows (the
    committed transactions after it are invisible to SQLite)."""
    wal = f"{db}-wal"
    ps = page_size_of(db)
    raw = Path(wal).read_bytes()
    step = 24 + ps
    commits = [i for i in range((len(raw) - 32) // step) if struct.unpack_from(">I", raw, 32 + i * step + 4)[0]]
    if len(commits) < 2:
        return damage_wal_checksum(db, rng)
    index = rng.randrange(0, commits[-1])
    offset = 32 + index * step + 24 + rng.randrange(ps)
    _patch(wal, offset, bytes([raw[offset] ^ rng.randint(1, 255)]))


STRUCTURE_DAMAGES: dict[str, Callable[[Path, random.Random], None]] = {
    "root_other_kind": root_other_kind, "repeat_cell_pointer": repeat_cell_pointer,
    "overlap_cell_pointer": overlap_cell_pointer, "share_overflow_chain": share_overflow_chain,
    "cycle_overflow_chain": cycle_overflow_chain, "interior_cycle": interior_cycle,
    "wal_bad_frame_mid": wal_bad_frame_mid,
}
STRUCTURE_WAL_DAMAGES = frozenset({"wal_bad_frame_mid"})
