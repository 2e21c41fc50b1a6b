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
