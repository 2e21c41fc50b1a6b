"""The export's hot loops for the two big tables of a sound store: history and messages.

output.write_live's general loop has SQLite render each line's head (key and columns as
JSON) and fetches the identity and indexed columns beside it: ten columns per history row.
These loops fetch each stored column once, as SQLite keeps it (history: record_id, seq, v,
type, at, data, crc, rowid), and build the head in Python, for the rows whose head needs no
escaping: every text value in it printable ASCII without a quote or backslash (a value is
then spelled the same by every JSON encoder: between quotes, as it is), every integer
column an integer. Any other row (and one whose data is not JSON text without raw tab or
line break) is handed to ``careful(rowid)``, the general loop for that one row, so each row
gives exactly the line, verdicts and counts the general loop gives it (a property test holds
the two equal byte for byte).

Per row, the checksum is row_checker's (the same check; a text key column fetched as
``str`` encodes to exactly the bytes it was decoded from) and validity is rows.LIVE_VALID's,
decided without it only when the row is the common shape whose validity is certain:
history, a current-version ``item`` whose columns agree with its data and that
rows.is_simple_item accepts; messages, the columns agreeing and models.is_plain_message.
That shape is first tried by one call into pydantic-core (:mod:`.shapes`: parse and test
together, no decoded object tested in Python); a row it refuses goes through ``from_json``
and the tests above, as before, so the two ways give the same line (a property test).

The caller sets the connection's text factory to ``str`` (a text column that is not UTF-8
then raises sqlite3.OperationalError, and the caller reads the rest with the general loop).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from ...history import RECORD_FORMAT_VERSION
from ...models import is_plain_message
from ...storage.checksum import row_checker
from .rows import LIVE_VALID, is_simple_item
from .shapes import plain_message, simple_item

_PLAIN_TEXT = re.compile(r"[ !#-\[\]-~]*").fullmatch
"""Printable ASCII without quote and backslash: JSON text that needs no escaping."""

Ends = dict[tuple[bool, bool], bytes]


class Place:
    """Where a loop is in its rowid range: the last rowid written, the range's end, rows so far."""

    def __init__(self, after: int | None, last: int | None) -> None:
        self.after, self.last, self.count = after, last, 0


def _where(schema: str, table: str, at: Place) -> str:
    bounds = [f"rowid > {int(at.after)}"] if at.after is not None else []
    bounds += [f"rowid <= {int(at.last)}"] if at.last is not None else []
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    return f" FROM {schema}.{table}{where} ORDER BY rowid"


def _quoted(value: Any) -> bytes | None:
    """``value`` as a JSON string when it needs no escaping, else None."""
    if type(value) is str and _PLAIN_TEXT(value) is not None:
        return b'"%s"' % value.encode()
    return None


def _plain(value: Any) -> bool:
    return type(value) is str and _PLAIN_TEXT(value) is not None


def history_rows(conn: Any, schema: str, write: Callable[[bytes], Any], counts: list[int], at: Place,
                 version: int, ends: Ends, careful: Callable[[int], None], progress: Callable[[int], None]) -> None:
    """Write history rows after ``at.after`` (up to ``at.last``), updating ``at`` and ``counts``."""
    verify, valid_row, current = row_checker("history", version), LIVE_VALID["history"], RECORD_FORMAT_VERSION
    simple = simple_item
    sql = "SELECT record_id, seq, v, type, at, CAST(data AS BLOB), crc, rowid" + _where(schema, "history", at)
    last_id: Any = _NOTHING
    quoted = key_head = item_line = None
    valid_ends = (ends[False, True], ends[True, True])
    after, rows, careful_rows, good, bad = at.after, 0, 0, 0, 0
    try:
        for record_id, seq, v, kind, stamp, data, crc, rowid in conn.execute(sql):
            if record_id != last_id:  # (values that compare equal give the same key_head: None unless str)
                last_id, quoted = record_id, _quoted(record_id)
                key_head = item_line = None
                if quoted is not None:
                    key_head = b'{"table":"history","key":[' + quoted + b","
                    # The common row's line with the record's key (and the current v) in place.
                    item_line = _item_line(quoted, current)
            try:
                got = simple(data)
            except (ValueError, TypeError):  # not that shape (or not JSON, not UTF-8, NULL): judged below
                got = None
            if (got is not None and item_line is not None and got["seq"] == seq and got["at"] == stamp
                    and type(seq) is int and kind == "item" and type(v) is int and v == current and type(crc) is int
                    and data.find(b"\n") < 0 and data.find(b"\t") < 0 and data.find(b"\r") < 0):
                common, raw = True, None  # the commonest row, decided without from_json (shapes.simple_item)
            else:
                try:
                    raw = from_json(data, cache_strings="keys")
                except (ValueError, TypeError):  # not JSON, not UTF-8, or NULL: the careful path
                    raw = _NOTHING
                common = (key_head is not None and type(raw) is dict and kind == "item" and type(v) is int
                          and v == current and type(seq) is int and type(crc) is int and raw.get("seq") == seq
                          and raw.get("at") == stamp and is_simple_item(raw) and data.find(b"\n") < 0
                          and data.find(b"\t") < 0 and data.find(b"\r") < 0)
            if common:
                # The common row: valid (is_simple_item, and its columns agree), ``at`` in stored form.
                ok = verify(record_id, seq, data, crc)
                write(item_line % (seq, seq, stamp.encode(), crc, data.replace(b"\\", b"\\\\").replace(b'"', b'\\"'),
                                   valid_ends[ok]))
                good += ok
            elif (key_head is not None and raw is not _NOTHING and type(seq) is int and type(v) is int
                  and type(crc) is int and _plain(kind) and _plain(stamp) and data.find(b"\n") < 0
                  and data.find(b"\t") < 0 and data.find(b"\r") < 0):
                ok = verify(record_id, seq, data, crc)
                valid = valid_row(raw, data, (seq, v, kind, stamp))
                write(b'%s%d],"columns":{"record_id":%s,"seq":%d,"v":%d,"type":"%s","at":"%s","crc":%d},"data":"%s%s'
                      % (key_head, seq, quoted, seq, v, kind.encode(), stamp.encode(), crc,
                         data.replace(b"\\", b"\\\\").replace(b'"', b'\\"'), ends[ok, valid]))
                good += ok
                bad += not valid
            else:
                careful(rowid)
                careful_rows += 1
            rows += 1
            after = rowid
            if rows % 10000 == 0:
                progress(at.count + rows)
    finally:
        _add(counts, at, after, rows, rows - careful_rows, good, bad)


def _item_line(quoted: bytes, version: int) -> bytes:
    """The common history line as a ``%`` template: seq, seq, at, crc, escaped data, end
    (``quoted``: the record id as a JSON string; a ``%`` in it doubled)."""
    key = quoted.replace(b"%", b"%%")
    return (b'{"table":"history","key":[%s,%%d],"columns":{"record_id":%s,"seq":%%d,"v":%d,"type":"item",'
            b'"at":"%%s","crc":%%d},"data":"%%s%%s' % (key, key, version))


def message_rows(conn: Any, schema: str, write: Callable[[bytes], Any], counts: list[int], at: Place,
                 version: int, ends: Ends, careful: Callable[[int], None], progress: Callable[[int], None]) -> None:
    """Write messages rows after ``at.after`` (up to ``at.last``), updating ``at`` and ``counts``."""
    verify, valid_row, plain = row_checker("messages", version), LIVE_VALID["messages"], plain_message
    sql = "SELECT id, chat_id, created_at, CAST(data AS BLOB), crc, rowid" + _where(schema, "messages", at)
    last_chat: Any = _NOTHING
    chat = line = None
    after, rows, careful_rows, good, bad = at.after, 0, 0, 0, 0
    try:
        for key, chat_id, created, data, crc, rowid in conn.execute(sql):
            if chat_id != last_chat:  # (as history_rows: equal values, the same chat and line)
                last_chat, chat = chat_id, _quoted(chat_id)
                line = None if chat is None else _message_line(chat)  # the chat's lines, chat_id in place
            try:
                got = plain(data)
            except (ValueError, TypeError):  # not that shape (or not JSON, not UTF-8, NULL): judged below
                got = None
            if (got is not None and chat is not None and got["id"] == key and got["chatId"] == chat_id
                    and got["createdAt"] == created and type(crc) is int and data.find(b"\n") < 0
                    and data.find(b"\t") < 0 and data.find(b"\r") < 0):
                # The commonest row, decided without from_json (shapes.plain_message; its id is plain
                # text, so ``key``, equal to it, is too): the common row below.
                raw, plain_key, common = None, True, True
            else:
                try:
                    raw = from_json(data, cache_strings="keys")
                except (ValueError, TypeError):
                    raw = _NOTHING
                plain_key = type(key) is str and _PLAIN_TEXT(key) is not None
                common = (chat is not None and plain_key and type(raw) is dict and type(crc) is int
                          and raw.get("id") == key and raw.get("chatId") == chat_id
                          and raw.get("createdAt") == created and is_plain_message(raw) and data.find(b"\n") < 0
                          and data.find(b"\t") < 0 and data.find(b"\r") < 0)
            if common:
                # The common row: valid (is_plain_message, and its columns agree), created_at in stored form.
                valid = True
            elif (chat is not None and plain_key and raw is not _NOTHING and type(crc) is int
                  and _plain(created) and data.find(b"\n") < 0 and data.find(b"\t") < 0 and data.find(b"\r") < 0):
                valid = valid_row(raw, data, (key, chat_id, created))
                bad += not valid
            else:
                careful(rowid)
                careful_rows += 1
                valid = None
            if valid is not None:
                ok = verify(key, data, crc)
                name = key.encode()
                write(line % (name, name, created.encode(), crc, data.replace(b"\\", b"\\\\").replace(b'"', b'\\"'),
                              ends[ok, valid]))
                good += ok
            rows += 1
            after = rowid
            if rows % 10000 == 0:
                progress(at.count + rows)
    finally:
        _add(counts, at, after, rows, rows - careful_rows, good, bad)


def _message_line(chat: bytes) -> bytes:
    """A messages line as a ``%`` template: id, id, created_at, crc, escaped data, end
    (``chat``: the chat id as a JSON string; a ``%`` in it doubled)."""
    return (b'{"table":"messages","key":["%%s"],"columns":{"id":"%%s","chat_id":%s,"created_at":"%%s","crc":%%d},'
            b'"data":"%%s%%s' % chat.replace(b"%", b"%%"))


def _add(counts: list[int], at: Place, after: int | None, rows: int, written: int, verified: int,
         invalid: int) -> None:
    """A loop's counts, added to the table's tally and its Place once, when the loop ends
    (also when a read fails: the caller goes on from ``at.after``)."""
    counts[0] += written
    counts[3] += written
    counts[4] += verified
    counts[5] += invalid
    at.after = after
    at.count += rows


_NOTHING = object()

LOOPS = {"history": history_rows, "messages": message_rows}
"""The tables with a loop of their own (the rest: output.write_live's general loop)."""
