"""Write salvage results safely: the JSONL export and the rebuilt store.

Guarantees:
- A target that exists (a file, a directory, a dangling symlink) is refused with
  OutputExistsError unless ``force``; a target that is the source itself is always refused.
- Output is written to a new temp file (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) in the
  target's directory, fsynced, then linked into place (no ``force``: an entry that appeared
  meanwhile is not replaced) or renamed over it (``force``: the old entry is replaced, a
  symlink itself and never what it points to); the directory is fsynced after.
- On any failure the temp file is removed and the target is untouched.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pydantic_core import from_json

from ...errors import NotAStoreError, OutputExistsError
from ...privatefile import atomic_output
from ...storage.checksum import IDENTITY, row_checker, row_crc
from ...storage.schema import SCHEMA_VERSION, TABLES, create_schema
from .rows import LIVE_VALID as _VALID, expected_columns, indexed_values, row_valid
from .live import LOOPS, Place
from .spool import Copy, Spool, live_copies_sql, live_rows_sql
from ...storage.access import is_store_file, transaction
from ...storage.specialfiles import refuse_special_output

def check_target(target: str | os.PathLike[str], *, force: bool, source: Path) -> Path:
    """Validate an output path before any work is done; return it as a Path."""
    path = Path(target)
    refuse_special_output(path)
    if is_store_file(path, source):
        raise OutputExistsError(f"{path}: is the database being salvaged or one of its files", path=str(path),
                                hint="write the output somewhere else; salvage never writes its source")
    if os.path.lexists(path) and (not force or path.is_dir()):
        raise OutputExistsError(f"{path}: already exists", path=str(path))
    if not path.parent.is_dir():
        raise NotAStoreError(f"{path}: directory {path.parent} does not exist", path=str(path),
                             hint="create the directory first, or choose another output path")
    return path


TALLY_FIELDS = ("copies", "superseded", "uncommitted", "keys", "verified", "invalid")


Tally = dict[tuple[str, str], list[int]]
"""Per (table, source): the counts named by TALLY_FIELDS."""


def write_jsonl(spool: Spool, fh: BinaryIO, progress: Callable[[int], None], *, live: bool = True) -> Tally:
    """Write one JSON object per copy in the spool (``live=False``: without the live
    tables' rows, written elsewhere); return the tally (keys/verified/invalid count winning
    copies: committed, not superseded)."""
    tally: Tally = {}
    write_copies(spool.copies(live=live), fh, tally, progress)
    return tally


def write_copies(copies: Iterable[Copy], fh: BinaryIO, tally: Tally, progress: Callable[[int], None]) -> None:
    """Write each copy as one JSON line and count it into ``tally``."""
    count = 0
    for c in copies:
        valid = row_valid(c.table, c.data, indexed_values(c.table, json.loads(c.columns)), key=c.key)
        text = c.data.decode("utf-8", "replace") if c.data is not None else None
        fh.write((f'{{"table":"{c.table}","key":{c.key},"columns":{c.columns},'
                  f'"data":{json.dumps(text, ensure_ascii=False)},"source":"{c.source}",'
                  f'"page":{_n(c.page)},"frame":{_n(c.frame)},"committed":{_b(c.committed)},'
                  f'"verified":{_b(c.verified)},"valid":{_b(valid)},"superseded":{_b(c.superseded)}}}\n'
                  ).encode("utf-8", "surrogatepass"))
        t = tally.get((c.table, c.source)) or tally.setdefault((c.table, c.source), [0] * 6)
        t[0] += 1
        t[1] += bool(c.superseded)
        t[2] += not c.committed
        if c.committed and not c.superseded:
            t[3] += 1
            t[4] += bool(c.verified)
            t[5] += not valid
        count += 1
        if count % 10000 == 0:
            progress(count)


_LIVE_ENDS = {(verified, valid): f'","source":"btree","page":null,"frame":null,"committed":true,'
                                 f'"verified":{str(verified).lower()},"valid":{str(valid).lower()},'
                                 '"superseded":false}\n'.encode() for verified in (False, True) for valid in (False, True)}
"""The end of a live line after its data text, per (verified, valid)."""


def write_live(conn: sqlite3.Connection, table: str, schema: str, fh: BinaryIO, tally: Tally,
               progress: Callable[[int], None], rowids: tuple[int, int] | None = None, *,
               version: int = SCHEMA_VERSION) -> None:
    """Write every row of ``schema.table`` (a sound store attached to ``conn``; ``rowids``:
    only those from ``lo`` to ``hi``) as a live b-tree copy, in rowid order, exactly as
    write_copies would (same fields, same order, equal values), and count it into ``tally``.

    The hot path of salvage on a healthy store. history and messages (the bulk of a store)
    have loops of their own (:mod:`.live`: each column fetched once, the line head built in
    Python where it needs no escaping; any other row goes through the general loop, alone).
    The general loop: SQLite renders the line up to the data (live_rows_sql); ``data`` is parsed once, for validity and to know it is JSON text (valid
    UTF-8, no control character inside a string), then escaped as a JSON string with the
    bytes write_copies' json.dumps would give. A row where that fails (damaged bytes, or
    whitespace between JSON tokens) is written by write_copies from live_copies_sql, read
    with the connection's own text factory (the export's is lenient: damaged UTF-8 as
    U+FFFD). The indexed text columns are decoded by SQLite's module itself (``str``); when
    one is not UTF-8 the read stops there and the rest is read again with the connection's
    factory. ``version``: the store's schema version (its checksum rule, checked in Python
    through storage.checksum.row_checker: no SQL function call and second copy of ``data``
    per row). The careful path's SELECT needs storage.checksum.register on ``conn``."""
    fresh = (table, "btree") not in tally
    counts = tally.setdefault((table, "btree"), [0] * 6)
    at = Place(rowids[0] - 1 if rowids else None, rowids[1] if rowids else None)
    factory = conn.text_factory
    loop = LOOPS.get(table)
    try:
        if loop is not None:
            def careful(rowid: int) -> None:
                _general(conn, table, schema, fh, tally, counts, _no_progress, Place(rowid - 1, rowid), version, factory)
                conn.text_factory = str

            try:
                conn.text_factory = str
                loop(conn, schema, fh.write, counts, at, version, _LIVE_ENDS, careful, progress)
                loop = None  # done
            except sqlite3.OperationalError:  # a text column that is not UTF-8 (or a read error: raised again)
                conn.text_factory = factory
        if loop is not None or table not in LOOPS:
            _general(conn, table, schema, fh, tally, counts, progress, at, version, factory)
    finally:
        conn.text_factory = factory
    if fresh and not counts[0]:  # as write_copies: a table without rows has no tally entry
        del tally[table, "btree"]


def _general(conn: sqlite3.Connection, table: str, schema: str, fh: BinaryIO, tally: Tally, counts: list[int],
             progress: Callable[[int], None], at: Place, version: int, factory: Any) -> None:
    """The general loop from ``at``: C text decoding, then (a text column that is not UTF-8)
    the rest again with the connection's own text factory ``factory``."""
    try:
        _live_rows(conn, table, schema, fh, tally, counts, progress, at, version, careful=factory)
    except sqlite3.OperationalError:  # a text column that is not UTF-8 (or a read error: raised again)
        conn.text_factory = factory
        _live_rows(conn, table, schema, fh, tally, counts, progress, at, version, careful=None)


def _live_rows(conn: sqlite3.Connection, table: str, schema: str, fh: BinaryIO, tally: Tally, counts: list[int],
               progress: Callable[[int], None], at: Place, version: int, *, careful: Any) -> None:
    """write_live's loop from ``at``; ``careful``: the text factory to read a row write_copies
    writes with (None: keep the connection's; else the loop reads with ``str``)."""
    head_end = len(IDENTITY[table]) + 4
    write, verify, valid_row = fh.write, row_checker(table, version), _VALID[table]
    if careful is not None:
        conn.text_factory = str
    for row in conn.execute(live_rows_sql(table, schema, at.after, at.last)):
        data = row[1]
        try:
            raw = from_json(data)
        except (ValueError, TypeError):  # not JSON, not UTF-8, or NULL: the careful path
            raw = _UNRENDERED
        head = row[0]
        # (find, not ``in``: ``bytes in bytes`` first tries the operand as an integer, and
        # raising and clearing that TypeError costs more than the scan)
        if (raw is _UNRENDERED or data.find(b"\n") >= 0 or data.find(b"\t") >= 0 or data.find(b"\r") >= 0
                or not (head.isascii() or _is_utf8(head))):
            if careful is not None:
                conn.text_factory = careful
            rows = conn.execute(live_copies_sql(table, schema, f"WHERE rowid = {int(row[3])}", version=version))
            write_copies(map(Copy._make, rows), fh, tally, _no_progress)
            if careful is not None:
                conn.text_factory = str
        else:
            verified = verify(*row[4:head_end], data, row[2])
            valid = valid_row(raw, data, row[head_end:])
            # JSON text with no raw tab or line break holds no control character at all, so
            # escaping backslash and quote gives what json.dumps(text, ensure_ascii=False) gives.
            write(b"".join((head, data.replace(b"\\", b"\\\\").replace(b'"', b'\\"'), _LIVE_ENDS[verified, valid])))
            counts[0] += 1
            counts[3] += 1
            counts[4] += verified
            counts[5] += not valid
        at.after = row[3]
        at.count += 1
        if at.count % 10000 == 0:
            progress(at.count)


_UNRENDERED = object()


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _no_progress(_done: int) -> None:
    pass


def merge_tally(into: Tally, other: Tally) -> None:
    """Add ``other``'s counts to ``into``."""
    for key, counts in other.items():
        mine = into.setdefault(key, [0] * len(counts))
        for i, n in enumerate(counts):
            mine[i] += n


def _n(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def _b(flag: Any) -> str:
    return "true" if flag else "false"


def write_store(spool: Spool, target: Path, *, force: bool,
                on_unplaced: Callable[[str, list[Any], str], None]) -> dict[str, int]:
    """Write a fresh store (current schema) with the newest verified copy of each placeable
    key (never a key whose verified copies collide); the caller holds the target's write lease. Each row's checksum is computed anew with the current rule (a copy is only placed once
    it verified under its store's rule). Return rows placed per table."""
    placed: dict[str, int] = {}
    with atomic_output(target, force=force) as (tmp, _fh):
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            create_schema(conn)
            clashes = spool.collisions()
            with transaction(conn):
                for table, key, columns, data, placeable in _best_copies(spool):
                    reason = _COLLISION if (table, key) in clashes else _unplaceable(data, placeable)
                    if reason:
                        on_unplaced(table, json.loads(key), reason)
                        continue
                    _insert(conn, table, columns or {}, data or b"")
                    placed[table] = placed.get(table, 0) + 1
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
    return placed


def _best_copies(spool: Spool) -> Iterator[tuple[str, str, dict[str, Any] | None, bytes | None, bool]]:
    """The live rows (a failing one replaced by its newest verified older copy), then the
    spooled keys without a live row."""
    for table in spool.live_tables:
        for c in spool.live_copies(table):
            if c.verified:
                yield table, c.key, json.loads(c.columns), c.data, True
                continue
            older = spool.stale_verified(table, c.key)
            yield (table, c.key, *older, True) if older else (table, c.key, None, None, True)
    yield from spool.best_verified()


_COLLISION = "key collision: two verified copies with different data; neither was placed"


def _unplaceable(data: bytes | None, placeable: bool) -> str:
    if not placeable:
        return "only on freed or superseded pages (a deleted row, or the live copy was lost)"
    if data is None:
        return "no copy passes its checksum"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "its data is not UTF-8 text (a TEXT column cannot hold it)"
    return ""


def _insert(conn: sqlite3.Connection, table: str, columns: dict[str, Any], data: bytes) -> None:
    """Insert one row with its exact data bytes; indexed columns come from data; the CRC is
    computed with the current rule over the row as written (storage.checksum.row_crc)."""
    text = data.decode("utf-8")
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    values = dict(columns)
    if isinstance(raw, dict):
        values.update({k: v for k, v in expected_columns(table, raw).items() if v is not None})
    names = list(TABLES[table].all_columns)
    values["data"] = text
    values["crc"] = row_crc(table, [values.get(c) for c in IDENTITY[table]], data)
    conn.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                 [values.get(n) for n in names])
