"""SqliteStorage's insert rows for a batch of plain items, built in one pass.

:func:`plain_rows` is ``history_rows(record_id, prepare_append(record_id, entries, next_seq))``
together with the returned dicts, for the entry form most callers append (a plain item given as
``{"type": "item", "message": {"role": ..., "content": <str>}}``, perhaps with an ``at``): the
same rows (record id, seq, v, type, at, canonical JSON text, checksum) and the same dicts, for
every input (a property test in tests/storage/test_sqlite_append.py holds them equal, errors
included). It decides nothing it is not sure of: any other entry, or text that is not valid
Unicode, makes it return None, and the caller takes the careful path, which raises the usual
errors. What it saves against that path (measured in BENCHMARKS.md, "The append path, fourth
pass"):

- each content string is escaped by pydantic's own JSON string serializer (the one
  ``model_dump_json`` runs for the field, so the bytes are the careful path's by construction,
  at about a third of the instructions of json's C encoder), which also refuses a lone
  surrogate: no separate surrogate scan;
- the row's UTF-8 bytes are joined once from constant parts (the role's and the timestamp's
  parts made once, not per entry), the checksum is taken over those bytes and the text bound
  for the insert is their decode: no second encode for the CRC, no PreparedEntry per entry;
  the row tuple and the returned dict are built in the same pass;
- an entry's ``at`` is checked once per distinct string object (a batch usually shares one).
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
_HEAD = f'{{"v":{_V},"type":"item","seq":'.encode()
_ROLE_PART = {role: f',"message":{{"role":"{role}","content":'.encode() for role in CHAT_ROLES}
"""Each chat role's part of the text (a role is ASCII and needs no escaping)."""
_NONE = object()


def plain_rows(record_id: Any, entries: list[Any], next_seq: int) -> tuple[list[Row], list[dict[str, Any]]] | None:
    """The insert rows ``(record_id, seq, v, type, at, data, crc)`` and the returned dicts of
    ``entries`` appended from ``next_seq``, or None when any entry is not a plain item given as
    a dict with exactly ``type`` and ``message`` (``role``, str ``content``) and perhaps ``at``,
    or holds text that is not valid Unicode (the careful path decides those, and raises).
    Raises nothing of its own."""
    crc32, dump, head, roles = zlib.crc32, _json_str, _HEAD, _ROLE_PART
    start = crc32(identity_bytes((record_id,)))  # the record id's part of every row's checksum
    rows: list[Row] = []
    wires: list[dict[str, Any]] = []
    seq = next_seq
    digits, bound = len(str(seq)), 10 ** len(str(seq))  # seq's digit count, and the seq that adds one
    start_seq = crc32(b"i%d:" % digits, start)  # ... and the seq's tag and length
    now: str | None = None
    last: Any = _NONE  # the last at taken (a str in stored form), whose text is at_part
    at_part = b""
    try:  # a missing key is a KeyError (only exact dicts are subscripted: no __missing__ runs)
        for entry in entries:
            # Only exact dicts and strs are looked at, so no test here runs a caller's code.
            if type(entry) is not dict:
                return None
            message, kind, size = entry["message"], entry["type"], len(entry)
            if type(message) is not dict or len(message) != 2 or type(kind) is not str or kind != "item":
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
                    last, at_part = at, b',"at":"%s"' % at.encode()
            role, content = message["role"], message["content"]
            if type(role) is not str or type(content) is not str:
                return None
            role_part = roles.get(role)  # None: not one of CHAT_ROLES
            if role_part is None:
                return None
            if seq >= bound:
                digits, bound = digits + 1, bound * 10
                start_seq = crc32(b"i%d:" % digits, start)
            seq_text = b"%d" % seq
            # pydantic's str serializer raises ValueError (PydanticSerializationError) on a lone
            # surrogate; otherwise it gives valid UTF-8, so the bytes and the text are the careful path's
            raw = b"".join((head, seq_text, at_part, role_part, dump(content), b"}}"))
            rows.append((record_id, seq, _V, "item", at, raw.decode(), crc32(raw, crc32(seq_text, start_seq))))
            wires.append({"v": _V, "type": "item", "seq": seq, "at": at, "message": {"role": role, "content": content}})
            seq += 1
    except (KeyError, ValueError):  # not the plain form, or text that is not valid Unicode
        return None
    return rows, wires
