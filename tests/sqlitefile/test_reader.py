"""The pure-Python SQLite file-format reader against files SQLite itself wrote."""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable_agent_runtime.sqlitefile.btree import leaf_cells, read_schema, walk_freelist, walk_tree
from steerable_agent_runtime.sqlitefile.record import decode_record, read_varint
from steerable_agent_runtime.sqlitefile.pages import SqliteFile, detect_page_size
from steerable_agent_runtime.sqlitefile.wal import wal_checksum


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    if value >= 1 << 56:
        out = [value & 0xFF]
        value >>= 8
        for _ in range(8):
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        return bytes(reversed(out))
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(out))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trips_every_64_bit_value(value: int) -> None:
    raw = _encode_varint(value)
    assert read_varint(raw + b"\xff", 0) == (value, len(raw))


def test_varint_cut_off_is_none_not_an_error() -> None:
    assert read_varint(b"\x81\x82", 0) is None
    assert read_varint(b"", 0) is None


@given(st.binary(max_size=64))
def test_decode_record_never_raises_on_garbage(raw: bytes) -> None:
    decode_record(raw)


def _values_db(path: Path, page_size: int = 4096, wal: bool = False) -> list[tuple]:
    rows = [(i, i * 1000003 - 2**40 if i % 3 else i, float(i) / 7, None if i % 5 == 0 else f"t{i}" * (i * 13),
             bytes([i % 256]) * (i * 29)) for i in range(1, 200)]
    rows.append((200, 2**63 - 1, -0.0, "ü" * 5000, b""))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (k INTEGER, a INTEGER, b REAL, c TEXT, d BLOB)")
    conn.execute("CREATE TABLE w (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t VALUES (?,?,?,?,?)", rows)
    conn.executemany("INSERT INTO w VALUES (?,?)", [(f"k{i:03d}", "v" * (i * 37)) for i in range(150)])
    conn.execute("COMMIT")
    if not wal:
        conn.close()
    else:
        shutil.copyfile(path, f"{path}.copy")
        shutil.copyfile(f"{path}-wal", f"{path}.copy-wal")
        conn.close()
    return rows


def _as_python(fields: list) -> tuple:
    out = []
    for serial, value in fields:
        if isinstance(value, bytes) and serial % 2 == 1:
            value = value.decode("utf-8")
        out.append(value)
    return tuple(out)


def _roots(db: SqliteFile) -> dict[str, int]:
    return {e.name: e.rootpage for e in read_schema(db)}


@pytest.mark.parametrize("page_size", [512, 1024, 4096, 8192, 65536])
def test_reader_returns_exactly_the_rows_sqlite_wrote_with_overflow(tmp_path: Path, page_size: int) -> None:
    rows = _values_db(tmp_path / "v.db", page_size)
    with SqliteFile(tmp_path / "v.db") as db:
        roots = _roots(db)
        got = [_as_python(c.fields) for c in walk_tree(db, roots["t"])]
        without_rowid = sorted(_as_python(c.fields) for c in walk_tree(db, roots["w"]))
        assert db.damage == {}
    assert got == [tuple(r) for r in rows]
    assert without_rowid == [(f"k{i:03d}", "v" * (i * 37)) for i in range(150)]


def test_committed_wal_frames_overlay_the_database_file(tmp_path: Path) -> None:
    rows = _values_db(tmp_path / "v.db", wal=True)
    copy = tmp_path / "v.db.copy"
    with SqliteFile(copy, f"{copy}-wal") as db:
        assert db.wal is not None and db.wal.header_ok and db.wal.committed_frames > 0
        got = [_as_python(c.fields) for c in walk_tree(db, _roots(db)["t"])]
    assert got == [tuple(r) for r in rows]


def test_uncommitted_wal_frames_are_labelled_and_not_overlaid(tmp_path: Path) -> None:
    db_path = tmp_path / "u.db"
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (a TEXT)")
    conn.execute("PRAGMA cache_size = 1")  # a tiny cache spills dirty pages to the WAL before commit
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t VALUES (?)", [("u" * 500,)] * 400)
    shutil.copyfile(db_path, tmp_path / "c.db")
    shutil.copyfile(f"{db_path}-wal", tmp_path / "c.db-wal")
    conn.execute("ROLLBACK")
    conn.close()
    with SqliteFile(tmp_path / "c.db", tmp_path / "c.db-wal") as db:
        states = {f.state for f in db.wal.frames}
        assert "uncommitted" in states
        assert not any(f.state == "uncommitted" and db.wal.live.get(f.pgno) == f.index for f in db.wal.frames)
        assert [c for c in walk_tree(db, _roots(db)["t"])] == []


def test_a_damaged_frame_checksum_invalidates_it_and_every_later_frame(tmp_path: Path) -> None:
    _values_db(tmp_path / "v.db", wal=True)
    copy = tmp_path / "v.db.copy"
    wal = Path(f"{copy}-wal")
    raw = bytearray(wal.read_bytes())
    raw[32 + 3 * (24 + 4096) + 20] ^= 0xFF  # frame 3's second checksum word
    wal.write_bytes(bytes(raw))
    with SqliteFile(copy, wal) as db:
        states = [f.state for f in db.wal.frames]
        assert all(s != "committed" for s in states[3:])
        assert db.damage["wal_frame_checksum_mismatch"] == 1


def test_wal_header_checksum_matches_what_sqlite_wrote_in_both_byte_orders(tmp_path: Path) -> None:
    _values_db(tmp_path / "v.db", wal=True)
    header = Path(f"{tmp_path}/v.db.copy-wal").read_bytes()[:32]
    magic = struct.unpack(">I", header[:4])[0]
    assert wal_checksum(header[:24], 0, 0, bool(magic & 1)) == struct.unpack(">2I", header[24:32])
    swapped = b"".join(header[i:i + 4][::-1] for i in range(0, 24, 4))
    assert wal_checksum(swapped, 0, 0, not bool(magic & 1)) == wal_checksum(header[:24], 0, 0, bool(magic & 1))


@pytest.mark.parametrize("page_size", [512, 1024, 4096, 8192, 32768])
def test_zeroed_header_page_size_is_found_from_the_pages(tmp_path: Path, page_size: int) -> None:
    rows = _values_db(tmp_path / "v.db", page_size)
    raw = bytearray((tmp_path / "v.db").read_bytes())
    raw[:100] = bytes(100)
    (tmp_path / "v.db").write_bytes(bytes(raw))
    with open(tmp_path / "v.db", "rb") as fh:
        assert detect_page_size(fh, len(raw)) == page_size
    with SqliteFile(tmp_path / "v.db") as db:
        assert db.page_size_source == "detected" and db.damage["db_header_damaged"] == 1
        got = [_as_python(c.fields) for c in walk_tree(db, _roots(db)["t"])]
    assert got == [tuple(r) for r in rows]


def test_interior_page_pointing_at_itself_ends_the_walk_and_is_counted(tmp_path: Path) -> None:
    _values_db(tmp_path / "v.db")
    with SqliteFile(tmp_path / "v.db") as db:
        root = _roots(db)["t"]
        assert db.page(root)[0] == 5
    raw = bytearray((tmp_path / "v.db").read_bytes())
    struct.pack_into(">I", raw, (root - 1) * 4096 + 8, root)  # right-most child := itself
    struct.pack_into(">I", raw, (root - 1) * 4096 + 12 + 0, 0)  # and a cell pointer to offset 0
    (tmp_path / "v.db").write_bytes(bytes(raw))
    with SqliteFile(tmp_path / "v.db") as db:
        list(walk_tree(db, root))
        assert db.damage["page_reached_twice"] + db.damage["cell_pointer_out_of_range"] >= 1


def test_pointers_outside_the_file_and_overflow_cycles_are_counted(tmp_path: Path) -> None:
    _values_db(tmp_path / "v.db")
    with SqliteFile(tmp_path / "v.db") as db:
        leaves = [p for p in range(2, db.page_count + 1) if db.page(p)[0] == 13]
        with_overflow = next(p for p in leaves if any(
            c.fields and len(c.fields[3][1] or b"") > 4000 for c in leaf_cells(db, db.page(p), p)))
    truncated = tmp_path / "v.db"
    raw = bytearray(truncated.read_bytes())
    # Point every overflow page's "next" at itself: the chain must end, not spin.
    for p in range(2, len(raw) // 4096 + 1):
        if raw[(p - 1) * 4096] == 0 and p != with_overflow:
            struct.pack_into(">I", raw, (p - 1) * 4096, p)
    truncated.write_bytes(bytes(raw[: len(raw) - 4096 * 3]))
    with SqliteFile(truncated) as db:
        cells = list(walk_tree(db, _roots(db)["t"]))
        # a chain that reaches itself is a page reached twice in one walk; one cut off by the
        # truncation leaves the file
        assert db.damage["overflow_page_shared"] >= 1
        assert db.damage["overflow_chain_broken"] + db.damage["overflow_page_shared"] >= 2
        assert any(c.fields is None for c in cells)


def test_freelist_leaves_keep_deleted_rows_when_secure_delete_is_off(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA secure_delete = OFF")
    conn.execute("CREATE TABLE t (a TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"row{i:04d}" * 20,) for i in range(500)])
    conn.execute("DELETE FROM t WHERE rowid > 100")
    conn.close()
    with SqliteFile(path) as db:
        assert db.header.freelist_count > 0
        free = walk_freelist(db)
        found = {c.fields[0][1] for p in free if db.page(p)[0] == 13 for c in leaf_cells(db, db.page(p), p)}
    assert found and all(v.startswith(b"row") and int(v[3:7]) > 100 for v in found)


def test_garbage_is_not_a_database_and_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    path.write_bytes(bytes(range(256)) * 64)
    with open(path, "rb") as fh:
        assert detect_page_size(fh, path.stat().st_size) is None
    with SqliteFile(path) as db:
        assert read_schema(db) == []


def test_a_payload_size_larger_than_the_file_is_refused_without_reading(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a TEXT)")
    conn.execute("INSERT INTO t VALUES ('hello')")
    conn.commit()
    conn.close()
    raw = bytearray(path.read_bytes())
    with SqliteFile(path) as db:
        root = _roots(db)["t"]
        page = db.page(root)
    ptr = struct.unpack_from(">H", page, 8)[0]
    huge = _encode_varint(2**40)  # payload size := 1 TiB, written over the cell's first bytes
    start = (root - 1) * 4096 + ptr
    raw[start:start + len(huge)] = huge
    path.write_bytes(bytes(raw))
    with SqliteFile(path) as db:
        cells = list(walk_tree(db, _roots(db)["t"]))
    assert [c.fields for c in cells] == [None]


def _checksum_one_pair_at_a_time(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    """walChecksumBytes exactly as SQLite's wal.c writes it, one pair of words per step."""
    count = len(data) // 4 & ~1
    words = struct.unpack_from(f"{'>' if big_endian else '<'}{count}I", data)
    for i in range(0, count, 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


@given(words=st.integers(0, 40), seed=st.binary(min_size=0, max_size=4),
       s0=st.integers(0, 2**32 - 1), s1=st.integers(0, 2**32 - 1), big_endian=st.booleans())
def test_wal_checksum_four_pairs_a_step_equals_one_pair_a_step(words, seed, s0, s1, big_endian) -> None:
    import hashlib

    data = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(words))[: 8 * words] + b"\xff" * 3
    assert wal_checksum(data, s0, s1, big_endian) == _checksum_one_pair_at_a_time(data, s0, s1, big_endian)
    assert wal_checksum(b"\xff" * 4096, s0, s1, big_endian) == _checksum_one_pair_at_a_time(b"\xff" * 4096, s0, s1,
                                                                                          big_endian)
