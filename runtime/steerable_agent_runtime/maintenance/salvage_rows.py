"""Turn decoded records into salvage rows: which table, which key, verified, valid.

A record found on a page is matched to its table by the tree it was reached from, or (its
root or the schema lost) by its shape: the column count, which columns hold integers, and
a marker field in its ``data`` JSON. ``verified`` means the stored CRC-32 matches the
``data`` bytes (storage.schema.row_checksum); ``valid`` means ``data`` validates against
the current wire models (history: the current record version) and the indexed columns
agree with it. Nothing here raises on bad input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..errors import RecordFormatError
from ..history import RECORD_FORMAT_VERSION, HistoryEntry, read_entry_text
from ..models import AgentSession, ChatMessage, HarnessTrace, TraceEvent, TraceSpan
from ..storage.schema import TABLES, TableSpec, row_checksum
from .record_codec import is_text

MODELS: dict[str, type[BaseModel]] = {
    "sessions": AgentSession, "messages": ChatMessage, "traces": HarnessTrace,
    "spans": TraceSpan, "events": TraceEvent,
}
_ENTRY: TypeAdapter[Any] = TypeAdapter(HistoryEntry)
INTEGER_COLUMNS = frozenset({"is_active", "seq", "v", "crc"})
NULLABLE_COLUMNS = frozenset({"parent_id"})
MARKERS = {
    "sessions": b'"currentStage"', "messages": b'"role"', "traces": b'"traceId"',
    "spans": b'"startAt"', "events": b'"eventId"', "history": b'"type"',
}
"""A field only the table's own JSON has among the tables of the same column count."""


@dataclass(frozen=True)
class Row:
    """One salvaged copy of a row: table, key, columns (besides data), raw data bytes, whether
    its checksum matches (verified) and whether its indexed columns agree with its data."""

    table: str
    key: list[Any]
    columns: dict[str, Any]
    data: bytes | None
    verified: bool
    agree: bool


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


def to_row(table: str, fields: list[tuple[int, Any]]) -> Row | None:
    """Build the Row of a record known to belong to ``table``; None if its shape does not fit."""
    spec = TABLES[table]
    if not _fits(spec, fields):
        return None
    columns = {name: _column_value(value) for name, (_s, value) in zip(spec.all_columns, fields) if name != "data"}
    data = fields[-2][1]
    crc = columns.get("crc")
    verified = isinstance(crc, int) and row_checksum(data) == crc
    return Row(table, [columns[k] for k in spec.key], columns, data, verified, _agrees(table, columns, data))


def _agrees(table: str, columns: dict[str, Any], data: bytes) -> bool:
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(raw, dict) and columns_agree(table, columns, raw)


def _column_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def data_valid(table: str, data: bytes | None, *, key: str = "[]") -> bool:
    """Whether ``data`` validates against the current model; for history, whether
    history.read_entry_text reads it (a current-version entry is first tried by direct JSON
    validation, which accepts exactly the entries read_entry_text accepts, faster).
    ``key`` (JSON text) names the record and seq in the error on the slow path."""
    if data is None:
        return False
    if table != "history":
        try:
            MODELS[table].model_validate_json(data)
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
        return _ENTRY.validate_json(data).v == RECORD_FORMAT_VERSION
    except ValidationError:
        return False


def expected_columns(table: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The indexed column values ``data`` implies (columns mapped to "" are not in data)."""
    out: dict[str, Any] = {}
    for column, field in TABLES[table].columns.items():
        if not field:
            continue
        value = raw.get(field, 1 if field == "v" else None)
        out[column] = int(value) if isinstance(value, bool) else value
    return out


def columns_agree(table: str, columns: dict[str, Any], raw: dict[str, Any]) -> bool:
    """Whether every indexed column equals the field of ``data`` it duplicates."""
    return all(columns.get(col) == value for col, value in expected_columns(table, raw).items())
