"""Turn decoded records into salvage rows: which table, which key, verified, valid.

A record found on a page is matched to its table by the tree it was reached from, or (its
root or the schema lost) by its shape: the column count, which columns hold integers, and
a marker field in its ``data`` JSON. ``verified`` means the stored CRC-32 matches the
row's key columns and ``data`` bytes as read from the page (storage.checksum.row_crc; for a
store of schema version 1, whose checksums cover ``data`` alone, the rule of that version:
salvage's report then says its keys are not covered); ``valid`` (row_valid) means ``data``
validates against the current wire models (history: the current record version) and the
indexed columns agree with it. Nothing here raises on bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import from_json

from ...errors import RecordFormatError
from ...history import RECORD_FORMAT_VERSION, HistoryEntry, read_entry_text
from ...models import CHAT_ROLES, is_plain_message, is_stored_timestamp
from ...storage.checksum import IDENTITY, KEYED_SINCE, bytes_checker
from ...storage.schema import TABLES, TableSpec
from ...sqlitefile.record import is_text

MODELS: dict[str, type[BaseModel]] = {name: spec.model for name, spec in TABLES.items() if spec.model}
_ENTRY_JSON = TypeAdapter(HistoryEntry).validator.validate_json
INTEGER_COLUMNS = frozenset({"crc"}).union(*(spec.integers for spec in TABLES.values()))
NULLABLE_COLUMNS = frozenset().union(*(spec.nullable for spec in TABLES.values()))
MARKERS = {name: spec.marker for name, spec in TABLES.items()}
"""A field only the table's own JSON has among the tables of the same column count."""


@dataclass(frozen=True)
class Row:
    """One salvaged copy of a row: table, key, columns (besides data), raw data bytes, and
    whether its checksum matches (verified)."""

    table: str
    key: list[Any]
    columns: dict[str, Any]
    data: bytes | None
    verified: bool


def _fits(spec: TableSpec, fields: list[tuple[int, Any]]) -> bool:
    if len(fields) != len(spec.all_columns):
        return False
    for name, (serial, _value) in zip(spec.all_columns, fields):
        if name in INTEGER_COLUMNS:
            ok = 1 <= serial <= 9 and serial != 7
        else:
            ok = is_text(serial) or serial >= 12 or (serial == 0 and name in NULLABLE_COLUMNS)
        if not ok:
            return False
    return True


def match_table(fields: list[tuple[int, Any]]) -> str | None:
    """The table whose shape this record has; None if none or several fit."""
    fitting = [name for name, spec in TABLES.items() if _fits(spec, fields)]
    if len(fitting) > 1:
        data = fields[-2][1]
        fitting = [name for name in fitting if MARKERS[name] in data]
    return fitting[0] if len(fitting) == 1 else None


_IDENTITY_AT = {name: tuple(TABLES[name].all_columns.index(c) for c in cols) for name, cols in IDENTITY.items()}


_CHECK = {True: bytes_checker(KEYED_SINCE), False: bytes_checker(KEYED_SINCE - 1)}
"""The CRC check of a store whose checksums cover the key columns (True) or not."""


def to_row(table: str, fields: list[tuple[int, Any]], *, keyed: bool = True) -> Row | None:
    """Build the Row of a record known to belong to ``table``; None if its shape does not fit.
    ``keyed``: the store's checksums cover the key columns (schema version 2 and later); the
    checksum is computed over the raw column bytes, before any lenient decoding."""
    spec = TABLES[table]
    if not _fits(spec, fields):
        return None
    columns = {name: _column_value(value) for name, (_s, value) in zip(spec.all_columns, fields) if name != "data"}
    data = fields[-2][1]
    crc = columns.get("crc")
    if not isinstance(crc, int) or not isinstance(data, bytes):
        verified = False
    else:
        verified = _CHECK[keyed]([fields[i][1] for i in _IDENTITY_AT[table]], data, crc)
    return Row(table, [columns[k] for k in spec.key], columns, data, verified)


def _column_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


INDEXED: dict[str, tuple[tuple[str, str, Any], ...]] = {
    name: tuple((column, field, 1 if field == "v" else None) for column, field in spec.columns.items() if field)
    for name, spec in TABLES.items()}
"""Per table: (indexed column, the ``data`` field it duplicates, the field's value when it
is absent: a history entry without ``v`` is record version 1)."""
_FIELDS = {name: tuple(field for _c, field, _a in pairs) for name, pairs in INDEXED.items()}
_ABSENT = {name: tuple(absent for _c, _f, absent in pairs) for name, pairs in INDEXED.items()}


def row_valid(table: str, data: bytes | None, indexed: list[Any], *, key: str = "[]") -> bool:
    """Whether a row is valid: ``data`` is a JSON object whose fields equal the indexed
    columns (``indexed``: a list of their values in INDEXED order; a JSON boolean equals 1
    or 0, as SQLite stores it), and ``data`` validates against the current model (data_valid)."""
    if data is None:
        return False
    try:
        raw = from_json(data)
    except ValueError:  # not JSON, not UTF-8, or nested too deep
        return False
    return parsed_valid(table, raw, data, indexed, key=key)


def parsed_valid(table: str, raw: Any, data: bytes, indexed: list[Any], *, key: str = "[]") -> bool:
    """row_valid for a ``data`` already parsed (``raw`` is ``pydantic_core.from_json(data)``)."""
    if type(raw) is not dict or list(map(raw.get, _FIELDS[table], _ABSENT[table])) != indexed:
        return False
    plain = _PLAIN.get(table)
    if plain is not None and plain(raw):
        return True  # it validates (the guarantee of is_plain_*), without pydantic's cost
    return data_valid(table, data, key=key)


_MESSAGE_KEYS = frozenset({"role", "content", "toolCalls", "toolCallId", "name"})


def is_simple_item(entry: Any) -> bool:
    """A fast, conservative test for the other common history entry: an ``item`` whose
    message holds a tool call list or answers one (is_plain_item's test of the envelope:
    exactly v, type, seq, at and message, current v, integer seq, a timestamp in stored
    form), with a known role, text or null ``content`` (null: a tool-call-only assistant
    turn, as the runtime writes it), and besides those only ``toolCalls`` (a list of JSON
    objects), ``toolCallId`` and ``name`` (text), each spelled in camelCase.

    Guarantee: every entry it accepts validates (data_valid of its JSON is True; a property
    test checks this). False decides nothing: validate such an entry in full.
    """
    if type(entry) is not dict or len(entry) != 5:
        return False
    v, msg = entry.get("v"), entry.get("message")
    if not (type(v) is int and v == RECORD_FORMAT_VERSION and entry.get("type") == "item"
            and type(entry.get("seq")) is int and type(msg) is dict
            and (type(content := msg.get("content")) is str or (content is None and "content" in msg))):
        return False
    role = msg.get("role")
    if type(role) is not str or role not in CHAT_ROLES:  # (a list or an object is no role, and unhashable)
        return False
    # Role and content are there: with nothing else (the commonest item) there is nothing more to test.
    if len(msg) != 2:
        if not _MESSAGE_KEYS.issuperset(msg):
            return False
        calls = msg.get("toolCalls", _NO_CALLS)
        if calls is not _NO_CALLS and (type(calls) is not list or not all(type(call) is dict for call in calls)):
            return False
        if type(msg.get("toolCallId", "")) is not str or type(msg.get("name", "")) is not str:
            return False
    return is_stored_timestamp(entry.get("at"))


_NO_CALLS: list[Any] = []


_PLAIN = {"history": is_simple_item, "messages": is_plain_message}
"""Per table, a conservative test for its common row shapes (the bulk of a store;
is_simple_item accepts every entry history.is_plain_item accepts)."""


def _live_validator(table: str) -> Callable[[Any, bytes, Sequence[Any]], bool]:
    fields, absent, plain = _FIELDS[table], _ABSENT[table], _PLAIN.get(table)

    def valid(raw: Any, data: bytes, indexed: Sequence[Any]) -> bool:
        if type(raw) is not dict or tuple(map(raw.get, fields, absent)) != tuple(indexed):
            return False
        if plain is not None and plain(raw):
            return True
        return data_valid(table, data)

    return valid


LIVE_VALID = {name: _live_validator(name) for name in TABLES}
"""Per table, parsed_valid for the export's hot loop: ``valid(raw, data, indexed)`` (the
indexed column values as a sequence in INDEXED order) returns parsed_valid(table, raw,
data, list(indexed))."""


def indexed_values(table: str, columns: dict[str, Any]) -> list[Any]:
    """The indexed column values of ``columns`` in INDEXED order (for row_valid)."""
    return [columns.get(column) for column, _field, _absent in INDEXED[table]]


def data_valid(table: str, data: bytes | None, *, key: str = "[]") -> bool:
    """Whether ``data`` validates against the current model; for history, whether
    history.read_entry_text reads it (a current-version entry is first tried by direct JSON
    validation, which accepts exactly the entries read_entry_text accepts, faster).
    ``key`` (JSON text) names the record and seq in the error on the slow path."""
    if data is None:
        return False
    if table != "history":
        try:
            MODELS[table].__pydantic_validator__.validate_json(data)
        except ValidationError:
            return False
        return True
    if _current_entry(data):
        return True
    record_id, seq = (json.loads(key) + [None, None])[:2]
    try:
        read_entry_text(data, record_id=record_id, seq=seq)
    except RecordFormatError:
        return False
    return True


def _current_entry(data: bytes) -> bool:
    try:
        return _ENTRY_JSON(data).v == RECORD_FORMAT_VERSION
    except ValidationError:
        return False


def expected_columns(table: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The indexed column values ``data`` implies (columns mapped to "" are not in data)."""
    values = {column: raw.get(field, absent) for column, field, absent in INDEXED[table]}
    return {column: int(value) if isinstance(value, bool) else value for column, value in values.items()}
