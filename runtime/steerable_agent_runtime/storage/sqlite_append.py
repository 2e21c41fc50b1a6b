"""SqliteStorage's insert rows for a batch of plain items, built in one pass.

:func:`plain_rows` is ``history_rows(record_id, prepare_append(record_id, entries, next_seq))``
together with the returned dicts, for the entry form most callers append (a plain item given as
``{"type": "item", "message": {"role": ..., "content": <str>}}``, perhaps with an ``at``): the
same rows (record id, seq, v, type, at, canonical JSON text, checksum) and the same dicts, for
every input (a property test in tests/storage/test_sqlite_append.py holds them equal, errors
included). It decides nothing it is not sure of: any other entry, or text that is not valid
Unicode, makes it return None, and the caller takes the careful path, which raises the usual
errors. What it saves against that path (measured in BENCHMARKS.md, "append, fourth pass"):

- each content string is escaped by pydantic's own JSON string serializer (the one
  ``model_dump_json`` runs for the field, so the bytes are the careful path's by construction),
  which also refuses a lone surrogate: no separate surrogate scan;
- the UTF-8 bytes the checksum covers are encoded once (no surrogate scan, then a second
  encode for the CRC), and the row tuple and the returned dict are built in the same pass (no
  PreparedEntry per entry);
- an entry's ``at`` is checked once per distinct string object (the entries of a batch usually
  share one).
"""

from __future__ import annotations

import zlib
from typing import Any

from pydantic_core import SchemaSerializer, core_schema

from ..history import RECORD_FORMAT_VERSION
from ..models import CHAT_ROLES, is_stored_timestamp, utc_now
from .checksum import identity_bytes

Row = tuple[Any, int, int, str, str, str, int]

_json_str = SchemaSerializer(core_schema.str_schema()).to_json
"""A str as a JSON string (UTF-8 bytes), as pydantic writes a str field in ``model_dump_json``;
raises on a lone surrogate."""

_V = RECORD_FORMAT_VERSION
_HEAD = f'{{"v":{_V},"type":"item","seq":'


def plain_rows(record_id: Any, entries: list[Any], next_seq: int) -> tuple[list[Row], list[dict[str, Any]]] | None:
    """The insert rows ``(record_id, seq, v, type, at, data, crc)`` and the returned dicts of
    ``entries`` appended from ``next_seq``, or None when any entry is not a plain item given as
    a dict with exactly ``type`` and ``message`` (``role``, str ``content``) and perhaps ``at``,
    or holds text that is not valid Unicode (the careful path decides those, and raises).
    Raises nothing of its own."""
    crc32, dump, head = zlib.crc32, _json_str, _HEAD
    start = crc32(identity_bytes((record_id,)))
    rows: list[Row] = []
    wires: list[dict[str, Any]] = []
    seq = next_seq
    now: str | None = None
    checked: Any = None  # the last at found in stored form (one string object; a batch shares one)
    digits, bound = len(str(seq)), 10 ** len(str(seq))  # seq's digit count, and the seq that adds one
    for entry in entries:
        # Only exact dicts and strs are looked at, so no test here can run a caller's code or raise.
        if type(entry) is not dict:
            return None
        message, kind, at = entry.get("message"), entry.get("type"), entry.get("at")
        if (type(message) is not dict or len(message) != 2 or type(kind) is not str or kind != "item"
                or len(entry) != 2 + ("at" in entry)):
            return None
        if at is None or (type(at) is str and not at):  # prepare_append stamps ``entry.get("at") or now``
            if now is None:
                now = utc_now()
            at = now
        elif at is not checked:
            if not is_stored_timestamp(at):  # False for anything but a str in stored form
                return None
            checked = at
        role, content = message.get("role"), message.get("content")
        if type(role) is not str or role not in CHAT_ROLES or type(content) is not str:
            return None
        try:
            text = dump(content).decode()
        except Exception:  # noqa: BLE001 - a lone surrogate: the careful path raises the error
            return None
        if seq >= bound:
            digits, bound = digits + 1, bound * 10
        data = f'{head}{seq},"at":"{at}","message":{{"role":"{role}","content":{text}}}}}'
        # role and at are ASCII, text valid Unicode: the strict encode is the careful path's bytes
        rows.append((record_id, seq, _V, "item", at, data, crc32(data.encode(), crc32(b"i%d:%d" % (digits, seq), start))))
        wires.append({"v": _V, "type": "item", "seq": seq, "at": at, "message": {"role": role, "content": content}})
        seq += 1
    return rows, wires
