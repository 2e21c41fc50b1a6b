"""The row checksum: one rule for every store (SQLite, SQLAlchemy) and every maintenance job.

Schema version 2 (this build): ``crc`` is the CRC-32 of the row's *identity* followed by its
``data`` bytes. The identity is the values of ``IDENTITY[table]``: the table's key columns
and the columns that place the row but are not inside ``data`` (the record a history entry
belongs to, the trace of a span or an event). So one flipped byte in a key column fails the
checksum as surely as one in ``data``: salvage can no longer export an entry as verified
under another chat.

Schema version 1 (older stores): the CRC-32 of ``data`` alone (:func:`legacy_crc`).

Every reader checks a stored ``crc`` through :func:`checker` / :func:`bytes_checker` (the one
CRC check; :func:`row_checker` is the same check for a hot row loop, :func:`batch_checker`
for a loop over fetched batches); writers compute it with
:func:`row_crc` (:func:`history_rows` for an append's rows).
Readers of a store pass its version (:func:`checker`); a store of version 1 is upgraded by
:mod:`.upgrade` (the app does it on open, in one transaction).

The identity encoding is unambiguous: each value is a type tag (``s`` text, ``i`` integer,
``f`` real, ``n`` NULL), its length in bytes, ``:`` and its bytes; text is its UTF-8 bytes
(a ``bytes`` value counts as text: the page reader and ``CAST(col AS BLOB)`` give raw text
bytes). ``zlib.crc32(data, zlib.crc32(identity))`` equals ``zlib.crc32(identity + data)``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .schema import SCHEMA_VERSION, TABLES

KEYED_SINCE = 2
"""The first schema version whose checksum covers the identity columns."""

IDENTITY: dict[str, tuple[str, ...]] = {
    name: (*spec.key, *(c for c, field in spec.columns.items() if not field and c not in spec.key))
    for name, spec in TABLES.items()}
"""Per table, the columns the checksum binds ``data`` to, in order: the key columns, then the
place columns that are not in ``data`` (history: record_id, seq; spans/events: their id and
trace_id)."""

_crc32 = zlib.crc32

_HEADS = tuple(_crc32(b"s%d:" % n) for n in range(256))
"""``crc32(b"s<n>:")`` for n < 256: the CRC of a first identity value's tag and length when it
is text of n bytes, so the hot loops hash its part as ``crc32(raw, _HEADS[n])`` (equal to
``crc32(b"s%d:%s" % (n, raw))``, without building that string)."""


def _text_head(n: int) -> int:
    """The CRC of the tag and length of a first identity value that is text of ``n`` bytes."""
    return _HEADS[n] if n < 256 else _crc32(b"s%d:" % n)


def identity_bytes(values: Sequence[Any]) -> bytes:
    """The unambiguous encoding of identity ``values`` (see the module docstring)."""
    out = b""
    for value in values:
        kind = type(value)
        if kind is str:
            raw = value.encode("utf-8", "surrogatepass")
            out += b"s%d:%s" % (len(raw), raw)
        elif kind is int:
            raw = b"%d" % value
            out += b"i%d:%s" % (len(raw), raw)
        elif kind is bytes:
            out += b"s%d:%s" % (len(value), value)
        else:
            out += _other(value)
    return out


def _other(value: Any) -> bytes:
    if isinstance(value, str):  # a str subclass: the same bytes as the plain text
        raw, tag = str(value).encode("utf-8", "surrogatepass"), b"s"
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw, tag = bytes(value), b"s"
    elif value is None:
        raw, tag = b"", b"n"
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raw, tag = repr(value).encode(), b"?"
    elif isinstance(value, int):
        raw, tag = str(value).encode(), b"i"
    else:
        raw, tag = repr(value).encode(), b"f"
    return b"%s%d:%s" % (tag, len(raw), raw)


def row_crc(table: str, key_values: Sequence[Any], data: str | bytes) -> int:
    """The checksum (schema version 2) of a row of ``table`` whose IDENTITY columns hold
    ``key_values`` (in IDENTITY order) and whose ``data`` is ``data`` (text: its UTF-8 bytes).
    Unsigned 32-bit. ``table`` is accepted for symmetry with the readers; the rule is the same
    for every table."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return _crc32(data, _crc32(identity_bytes(key_values)))


def history_rows(record_id: Any, entries: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """The history rows ``(record_id, seq, v, type, at, data, crc)`` of prepared entries of one
    record, each given as ``(seq, v, type, at, data, ...)`` (a history_append.PreparedEntry): ``crc`` is
    ``row_crc("history", (record_id, seq), data)`` (a property test holds them equal), with the
    record id's part hashed once and the row built in the same pass (the append path's rows)."""
    start = _crc32(identity_bytes((record_id,)))
    crc32 = _crc32
    rows = []
    for entry in entries:
        seq, data = entry[0], entry[4]
        if type(seq) is int and type(data) is str:
            raw = b"%d" % seq
            crc = crc32(data.encode("utf-8", "surrogatepass"), crc32(b"i%d:%s" % (len(raw), raw), start))
        else:
            crc = row_crc("history", (record_id, seq), data)
        rows.append((record_id, seq, entry[1], entry[2], entry[3], data, crc))
    return rows


def legacy_crc(data: str | bytes) -> int:
    """The checksum of schema version 1: CRC-32 of the ``data`` bytes alone."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return _crc32(data)


Checker = Callable[[str, Sequence[Any], Any, Any], bool]
BytesChecker = Callable[[Sequence[Any], Any, Any], bool]


def bytes_checker(version: int) -> BytesChecker:
    """The CRC check itself (every reader's, through :func:`checker` or directly in a hot row
    loop): ``ok(key_values, data, crc)`` for a store of schema ``version``, where ``data`` is
    the raw bytes (``CAST(data AS BLOB)``) or None, and ``key_values`` the row's IDENTITY
    values (ignored before KEYED_SINCE). False for a NULL ``data``."""
    crc32, ident = _crc32, identity_bytes
    if version >= KEYED_SINCE:
        def ok(key_values: Sequence[Any], data: Any, crc: Any) -> bool:
            return data is not None and crc32(data, crc32(ident(key_values))) == crc
    else:
        def ok(key_values: Sequence[Any], data: Any, crc: Any) -> bool:
            return data is not None and crc32(data) == crc
    return ok


def row_checker(table: str, version: int) -> Callable[..., bool]:
    """:func:`bytes_checker`'s check for one table's rows read in a loop (check's row pass,
    salvage's export): ``ok(*identity, data, crc)``, the IDENTITY[table] values as positional
    arguments, then the raw ``data`` bytes (or None) and the stored ``crc``. It returns what
    ``bytes_checker(version)(identity, data, crc)`` returns, for every input (a property test
    holds them equal over arbitrary sequences of calls), only faster per row: a text or
    integer identity value is encoded inline, and for a two-column identity the first
    value's part is hashed once per run of rows that repeat it (history in rowid order: one
    record's entries come together). Not thread-safe (it remembers the last first value):
    one per scan."""
    fast = bytes_checker(version)
    arity = len(IDENTITY[table])
    if not covers_key(version):
        crc32 = _crc32

        def legacy(*row: Any) -> bool:
            data = row[-2]
            return data is not None and crc32(data) == row[-1]

        return legacy
    if arity == 1:
        return _one_column(fast)
    if arity == 2:
        return _two_columns(fast)
    return lambda *row: fast(row[:-2], row[-2], row[-1])


def _one_column(fast: BytesChecker) -> Callable[[Any, Any, Any], bool]:
    crc32, heads, head = _crc32, _HEADS, _text_head

    def ok(key: Any, data: Any, crc: Any) -> bool:
        if type(data) is bytes:  # identity_bytes((key,)) inlined for text (str, or its raw bytes)
            kind = type(key)
            if kind is str:
                try:
                    raw = key.encode()
                except UnicodeEncodeError:
                    raw = key.encode("utf-8", "surrogatepass")
                n = len(raw)
                return crc32(data, crc32(raw, heads[n] if n < 256 else head(n))) == crc
            if kind is bytes:
                n = len(key)
                return crc32(data, crc32(key, heads[n] if n < 256 else head(n))) == crc
        return fast((key,), data, crc)

    return ok


_NOTHING = object()


def _two_columns(fast: BytesChecker) -> Callable[[Any, Any, Any, Any], bool]:
    crc32, heads, head = _crc32, _HEADS, _text_head
    last: Any = _NOTHING  # only ever a str or bytes value once set
    start = 0
    parts: dict[int, bytes] = {}  # an integer's identity part, by value (seqs repeat across records)

    def ok(first: Any, second: Any, data: Any, crc: Any) -> bool:
        nonlocal last, start
        if type(data) is not bytes:
            return fast((first, second), data, crc)
        # Only a str equals a str and only bytes-like values equal bytes: each of those encodes
        # as identity_bytes encodes ``last``, so an equal ``first`` has the same part.
        if first != last:
            kind = type(first)
            if kind is str:
                try:
                    raw = first.encode()
                except UnicodeEncodeError:
                    raw = first.encode("utf-8", "surrogatepass")
            elif kind is bytes:
                raw = first
            else:
                return fast((first, second), data, crc)
            n = len(raw)
            last, start = first, crc32(raw, heads[n] if n < 256 else head(n))
        if type(second) is int:
            part = parts.get(second)
            if part is None:
                raw = b"%d" % second
                part = b"i%d:%s" % (len(raw), raw)
                if len(parts) < _PARTS_KEPT:
                    parts[second] = part
            return crc32(data, crc32(part, start)) == crc
        return crc32(data, crc32(identity_bytes((second,)), start)) == crc

    return ok


_PARTS_KEPT = 1 << 16


def batch_checker(table: str, version: int, identity_at: Sequence[int], data_at: int,
                  crc_at: int) -> Callable[[Sequence[Sequence[Any]]], list[bool]]:
    """:func:`row_checker`'s check over a batch of fetched rows (check's row pass, which reads
    ``fetchmany`` batches): ``check(rows)`` returns, for each row in order, what
    ``row_checker(table, version)(*identity, data, crc)`` returns for it, where ``identity`` is
    the row's values at ``identity_at`` (IDENTITY[table] order), ``data`` its value at
    ``data_at`` and ``crc`` at ``crc_at`` (a property test holds them equal over arbitrary
    sequences of batches). Faster per row, for the usual row: no Python call per row (the
    encoding is row_checker's, inline in one loop over the batch; the first value of a
    two-column identity, history's record id, is hashed once per run of rows that repeat it,
    across batches too). Not thread-safe: one per scan."""
    fast = bytes_checker(version)
    if covers_key(version) and len(identity_at) == len(IDENTITY[table]) == 2:
        return _two_column_batches(fast, identity_at[0], identity_at[1], data_at, crc_at)
    if covers_key(version) and len(identity_at) == len(IDENTITY[table]) == 1:
        return _one_column_batches(fast, identity_at[0], data_at, crc_at)
    ok = row_checker(table, version)
    return lambda rows: [ok(*(row[i] for i in identity_at), row[data_at], row[crc_at]) for row in rows]


def _one_column_batches(fast: BytesChecker, key_at: int, data_at: int,
                        crc_at: int) -> Callable[[Sequence[Sequence[Any]]], list[bool]]:
    crc32, heads, head = _crc32, _HEADS, _text_head

    def check(rows: Sequence[Sequence[Any]]) -> list[bool]:
        out: list[bool] = []
        add = out.append
        for row in rows:
            key, data, crc = row[key_at], row[data_at], row[crc_at]
            if type(data) is bytes and type(key) is str:  # identity_bytes((key,)) inlined for text
                try:
                    raw = key.encode()
                except UnicodeEncodeError:
                    raw = key.encode("utf-8", "surrogatepass")
                n = len(raw)
                add(crc32(data, crc32(raw, heads[n] if n < 256 else head(n))) == crc)
            else:
                add(fast((key,), data, crc))
        return out

    return check


def _two_column_batches(fast: BytesChecker, first_at: int, second_at: int, data_at: int,
                        crc_at: int) -> Callable[[Sequence[Sequence[Any]]], list[bool]]:
    crc32, heads, head = _crc32, _HEADS, _text_head
    last: Any = _NOTHING  # only ever a str or bytes value once set (as in _two_columns)
    start = 0
    parts: dict[int, bytes] = {}

    def check(rows: Sequence[Sequence[Any]]) -> list[bool]:
        nonlocal last, start
        out: list[bool] = []
        add = out.append
        for row in rows:
            first, second, data, crc = row[first_at], row[second_at], row[data_at], row[crc_at]
            if type(data) is not bytes:
                add(fast((first, second), data, crc))
                continue
            if first != last:
                kind = type(first)
                if kind is str:
                    try:
                        raw = first.encode()
                    except UnicodeEncodeError:
                        raw = first.encode("utf-8", "surrogatepass")
                elif kind is bytes:
                    raw = first
                else:
                    add(fast((first, second), data, crc))
                    continue
                n = len(raw)
                last, start = first, crc32(raw, heads[n] if n < 256 else head(n))
            if type(second) is int:
                part = parts.get(second)
                if part is None:
                    raw = b"%d" % second
                    part = b"i%d:%s" % (len(raw), raw)
                    if len(parts) < _PARTS_KEPT:
                        parts[second] = part
                add(crc32(data, crc32(part, start)) == crc)
            elif type(second) is str:  # spans' and events' trace_id
                try:
                    raw = second.encode()
                except UnicodeEncodeError:
                    raw = second.encode("utf-8", "surrogatepass")
                add(crc32(data, crc32(raw, crc32(b"s%d:" % len(raw), start))) == crc)
            else:
                add(crc32(data, crc32(identity_bytes((second,)), start)) == crc)
        return out

    return check


def checker(version: int) -> Checker:
    """``ok(table, key_values, data, crc)`` for a store of schema ``version``: whether the
    stored ``crc`` matches (False for a NULL or non-bytes/str ``data`` or a non-int crc).
    Text ``data`` is checked as its UTF-8 bytes; the check is :func:`bytes_checker`'s."""
    fast = bytes_checker(version)

    def ok(table: str, key_values: Sequence[Any], data: Any, crc: Any) -> bool:
        if type(crc) is not int:
            return False
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        elif not isinstance(data, bytes):
            return False
        return fast(key_values, data, crc)

    return ok


current_checker: Checker = checker(SCHEMA_VERSION)
"""The check of rows written by this build (the stores' own reads, copy's read-back)."""


def covers_key(version: int) -> bool:
    """Whether a store of schema ``version`` has checksums that cover the identity columns."""
    return version >= KEYED_SINCE


def identity_sql(table: str, alias: str = "") -> str:
    """The IDENTITY columns of ``table`` as SQL arguments for the ``row_crc`` SQL function
    (text columns cast to BLOB, so the raw bytes are hashed), comma-separated."""
    prefix = f"{alias}." if alias else ""
    integer = {"seq"}
    return ", ".join(f"{prefix}{c}" if c in integer else f"CAST({prefix}{c} AS BLOB)" for c in IDENTITY[table])


def sql_row_crc(data: Any, *key_values: Any) -> int | None:
    """``row_crc(data, key...)`` as a SQLite function (``create_function("row_crc", -1, ...)``)."""
    if not isinstance(data, (bytes, str)):
        return None
    return row_crc("", key_values, data)


def crc_sql(table: str, version: int = SCHEMA_VERSION, alias: str = "") -> str:
    """A SQL expression computing the checksum rule of ``version`` for a row of ``table``
    (needs :func:`sql_row_crc` registered as ``row_crc``; the legacy rule as ``row_crc`` with
    only the data argument is the CRC-32 of an empty identity, so it is registered apart as
    ``legacy_crc``)."""
    prefix = f"{alias}." if alias else ""
    if not covers_key(version):
        return f"legacy_crc(CAST({prefix}data AS BLOB))"
    return f"row_crc(CAST({prefix}data AS BLOB), {identity_sql(table, alias)})"


def register(conn: Any) -> None:
    """Register ``row_crc`` (version 2) and ``legacy_crc`` (version 1) on a sqlite3 connection."""
    conn.create_function("row_crc", -1, sql_row_crc, deterministic=True)
    conn.create_function("legacy_crc", 1, lambda d: legacy_crc(d) if isinstance(d, (bytes, str)) else None,
                         deterministic=True)


def store_checker(conn: Any) -> Checker:
    """:func:`checker` for the schema version of the store open on ``conn`` (a sqlite3
    connection: ``PRAGMA user_version``)."""
    return checker(conn.execute("PRAGMA user_version").fetchone()[0])
