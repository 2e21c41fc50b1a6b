"""SqliteStorage's insert rows for a batch of plain items, built in one pass.

:func:`plain_rows` is ``history_rows(record_id, prepare_append(record_id, entries, next_seq))``
together with the returned dicts, for the entry form most callers append (a plain item given as
``{"type": "item", "message": {"role": ..., "content": <str>}}``, perhaps with an ``at``): the
same rows (record id, seq, v, type, at, canonical JSON text, checksum) and the same dicts, for
every input (a property test in tests/storage/test_sqlite_append.py holds them equal, errors
included; its rows leave out ``v`` and ``type``, which :data:`INSERT_PLAIN` writes as constants).
It decides nothing it is not sure of: any other entry, or text that is not valid Unicode, makes
it return None, and the caller takes the careful path, which raises the usual errors. What it
saves against that path (measured in BENCHMARKS.md, "The append path, fourth pass" and "fifth
pass"):

- ASCII text that holds none of the 34 characters JSON escapes (U+0000-U+001F, ``"`` and
  ``\\``) is its own JSON string body, so its row is built as text directly, the content between
  the quotes as it is, and the UTF-8 bytes for the checksum are one ``encode`` of that text (a
  copy, for ASCII). Each content is tested as it is reached for what real text that needs
  escaping mostly holds (``str.isascii``, which costs nothing, then a newline and a quote: a
  memchr each); the other 32 characters are looked for once, in the text of all the rows built
  that way joined, and the rows whose content holds one are built again, escaped.
- Any other text is escaped by pydantic's own JSON string serializer (the one
  ``model_dump_json`` runs for the field, so the bytes are the careful path's by construction,
  at about a third of the instructions of json's C encoder), which also refuses a lone
  surrogate, and the text bound for the insert is the decode of the row's bytes.
- the row's parts that do not change (the head, the at's and the role's parts) are made once
  per at and role, the checksum is taken over the row's UTF-8 bytes, and the row tuple and the
  returned dict are built in the same pass; the record id's and the seq's tag are hashed once
  per batch / digit count;
- an entry's ``at`` is checked once per distinct string object (a batch usually shares one).

:func:`insert_plain` then inserts the rows with one multi-row ``VALUES`` statement per 64 rows
instead of a step per row (the same rows on disk as ``executemany(INSERT_PLAIN, rows)``).
"""

from __future__ import annotations

import zlib
from itertools import chain
from typing import Any

from pydantic_core import SchemaSerializer, core_schema

from ..history import RECORD_FORMAT_VERSION
from ..models import CHAT_ROLES, is_stored_timestamp, utc_now
from .checksum import identity_bytes

Row = tuple[Any, int, str, str, int]
Rows = tuple[list[Row], list[dict[str, Any]]]

_PLAIN_ROW = f"(?, ?, {int(RECORD_FORMAT_VERSION)}, 'item', ?, ?, ?)"
INSERT_PLAIN = f"INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES {_PLAIN_ROW}"
"""The insert of :func:`plain_rows`' rows: ``v`` and ``type`` are the same for every plain item,
so they are written as constants of the statement, not bound per row (two binds fewer a row:
~64 k instructions a batch of 50). SQLite stores them as it stores the bound values (the
integer, the text 'item'), so the rows are the same byte for byte."""

MAX_ROWS_PER_INSERT = 64
"""The most rows one statement of :func:`insert_plain` inserts: 320 bound values, under the 999
of SQLite builds before 3.32 (SQLITE_MAX_VARIABLE_NUMBER)."""
_INSERTS = [INSERT_PLAIN[:INSERT_PLAIN.index("VALUES")] + "VALUES " + ", ".join([_PLAIN_ROW] * size)
            for size in range(MAX_ROWS_PER_INSERT + 1)]
"""INSERT_PLAIN with ``size`` rows of values, by size (index 0 unused): the statements
insert_plain runs (sqlite3 prepares each the first time it runs and keeps it in the
connection's statement cache)."""

_json_str = SchemaSerializer(core_schema.str_schema()).to_json
"""A str as a JSON string (UTF-8 bytes), as pydantic writes a str field in ``model_dump_json``;
raises on a lone surrogate. It escapes exactly U+0000-U+001F, ``"`` and ``\\`` and writes every
other code point as its UTF-8 bytes (tests/storage/test_sqlite_append.py checks each one)."""

_V = RECORD_FORMAT_VERSION
_HEAD = f'{{"v":{_V},"type":"item","seq":'
_HEAD_B = _HEAD.encode()
_ROLE_PART = {role: f',"message":{{"role":"{role}","content":'.encode() for role in CHAT_ROLES}
"""Each chat role's part of the text (a role is ASCII and needs no escaping)."""
_RARE_ESCAPED = "\\\t\r" + "".join(chr(c) for c in range(32) if chr(c) not in "\n\t\r")
"""The characters JSON escapes other than the newline and the quote :func:`plain_rows` tests each
content for: looked for once, in the batch's unescaped text joined."""
_NONE = object()


def plain_rows(record_id: Any, entries: list[Any], next_seq: int) -> Rows | None:
    """The insert rows ``(record_id, seq, at, data, crc)`` for :data:`INSERT_PLAIN` (history_rows'
    rows without ``v`` and ``type``: RECORD_FORMAT_VERSION and "item" for all of them) and the
    returned dicts of ``entries`` appended from ``next_seq``, or None when any entry is not a plain item given as
    a dict with exactly ``type`` and ``message`` (``role``, str ``content``) and perhaps ``at``,
    or holds text that is not valid Unicode (the careful path decides those, and raises).
    Raises nothing of its own."""
    crc32, dump, head, head_b, roles, v, item = zlib.crc32, _json_str, _HEAD, _HEAD_B, _ROLE_PART, _V, "item"
    start = crc32(identity_bytes((record_id,)))  # the record id's part of every row's checksum
    rows: list[Row] = []
    wires: list[dict[str, Any]] = []
    unescaped: list[str] = []  # the contents of the rows built unescaped
    seq = next_seq
    digits, bound = len(str(seq)), 10 ** len(str(seq))  # seq's digit count, and the seq that adds one
    start_seq = crc32(b"i%d:" % digits, start)  # ... and the seq's tag and length
    now: str | None = None
    last: Any = _NONE  # the last at taken (a str in stored form); at_part and mids: its texts
    at_part = b""
    mids: dict[str, str] = {}  # per role, the text between the seq and an unescaped content
    try:  # a missing key is a KeyError (only exact dicts are subscripted: no __missing__ runs)
        for entry in entries:
            # Only exact dicts and strs are looked at, so no test here runs a caller's code.
            if type(entry) is not dict:
                return None
            message, kind, size = entry["message"], entry["type"], len(entry)
            # kind is item: the interned "item" every literal is (the two tests after it decide the rest)
            if type(message) is not dict or len(message) != 2 or kind is not item and (type(kind) is not str or kind != item):
                return None
            if size == 3:
                at = entry["at"]
            elif size == 2:
                at = None
            else:
                return None
            if at is not last:
                if at is None or (type(at) is str and not at):  # prepare_append stamps ``at or now``
                    if now is None:
                        now = utc_now()
                    at = now
                elif not is_stored_timestamp(at):  # False for anything but a str in stored form
                    return None
                if at is not last:
                    last, at_part, mids = at, b',"at":"%s"' % at.encode(), {}
            role, content = message["role"], message["content"]
            if type(role) is not str or type(content) is not str:
                return None
            if seq >= bound:
                digits, bound = digits + 1, bound * 10
                start_seq = crc32(b"i%d:" % digits, start)
            if content.isascii() and "\n" not in content and '"' not in content:
                mid = mids.get(role)  # the text between the seq and the content
                if mid is None:
                    if role not in roles:  # not one of CHAT_ROLES
                        return None
                    mid = mids[role] = f',"at":"{at}","message":{{"role":"{role}","content":"'
                seq_text = str(seq)
                data = f'{head}{seq_text}{mid}{content}"}}}}'
                rows.append((record_id, seq, at, data, crc32(data.encode(), crc32(seq_text.encode(), start_seq))))
                unescaped.append(content)
            else:
                role_part = roles.get(role)  # None: not one of CHAT_ROLES
                if role_part is None:
                    return None
                seq_text_b = b"%d" % seq
                # pydantic's str serializer raises ValueError (PydanticSerializationError) on a lone
                # surrogate; otherwise it gives valid UTF-8, so the bytes and the text are the careful path's
                raw = b"".join((head_b, seq_text_b, at_part, role_part, dump(content), b"}}"))
                rows.append((record_id, seq, at, raw.decode(), crc32(raw, crc32(seq_text_b, start_seq))))
            wires.append({"v": v, "type": "item", "seq": seq, "at": at, "message": {"role": role, "content": content}})
            seq += 1
    except (KeyError, ValueError):  # not the plain form, or text that is not valid Unicode
        return None
    text = "".join(unescaped)
    found = [char for char in _RARE_ESCAPED if char in text]  # all 32 looked for in one text
    if found:
        _escape_again(record_id, rows, wires, found, start)
    return rows, wires


def _escape_again(record_id: Any, rows: list[Row], wires: list[dict[str, Any]], found: list[str], start: int) -> None:
    """Build again, escaped, each row of ``rows`` whose content holds one of ``found``: the rows
    built unescaped that needed escaping, and perhaps rows built escaped already (built the same
    again). Only ASCII text can need it here: nothing to refuse. ``start`` is the checksum of the
    record id's part."""
    for i, wire in enumerate(wires):
        content = wire["message"]["content"]
        for char in found:
            if char in content:
                seq, at = wire["seq"], wire["at"]
                seq_text = b"%d" % seq
                raw = b"".join((_HEAD_B, seq_text, b',"at":"%s"' % at.encode(), _ROLE_PART[wire["message"]["role"]],
                                _json_str(content), b"}}"))
                crc = zlib.crc32(raw, zlib.crc32(b"i%d:%s" % (len(seq_text), seq_text), start))
                rows[i] = (record_id, seq, at, raw.decode(), crc)
                break


def insert_plain(conn: Any, rows: list[Row]) -> None:
    """Insert :func:`plain_rows`' ``rows`` on ``conn`` (inside the caller's transaction), in
    their order, as INSERT_PLAIN would one by one: one multi-row ``VALUES`` statement for up to
    64 rows (more: 64 at a time, then the rest). A statement per batch instead of a step per
    row saves SQLite's per-row reset and step around the bind: a batch of 50, 88 -> 58 us of
    CPU; of 10, 19 -> 15 us; of 3 or 1, the same (bench/append_insert.py; BENCHMARKS.md, stop
    28). The rows, their values, types, order and rowids are executemany's (a test compares
    the two on disk)."""
    if len(rows) == 1:
        conn.execute(INSERT_PLAIN, rows[0])
        return
    for start in range(0, len(rows), MAX_ROWS_PER_INSERT):
        chunk = rows[start:start + MAX_ROWS_PER_INSERT]
        conn.execute(_INSERTS[len(chunk)], list(chain.from_iterable(chunk)))
