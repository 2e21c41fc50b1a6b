"""The export's common row shapes, parsed and tested in one call (pydantic-core, no Python per field).

salvage/live.py's loops judge a row's ``data`` by ``from_json`` and a test in Python of the
decoded object (rows.is_simple_item, models.is_plain_message: a few dozen dict lookups and
a timestamp regex per row). These validators do both inside pydantic-core's parser, for the
two shapes that are the bulk of a store, and return only what the loop compares with the
row's columns.

Guarantees (property tests in tests/maintenance/test_salvage_shapes.py hold them):

- ``simple_item(data)`` returns a dict only when ``from_json(data)`` is a dict that
  rows.is_simple_item accepts, whose "v", "seq" and "at" equal the returned dict's; for any
  other input it raises ValueError (TypeError for a value that is neither bytes nor str).
- ``plain_message(data)`` returns a dict only when ``from_json(data)`` is a dict that
  models.is_plain_message accepts, whose "id", "chatId" and "createdAt" equal the returned
  dict's, and whose "id" is printable ASCII without a quote or backslash (it needs no
  escaping in JSON); otherwise it raises as ``simple_item`` does.
- STORED_TIMESTAMP (the pattern of both stamps) accepts exactly the texts
  models.is_stored_timestamp accepts.

A refusal decides nothing: the loops then judge the row as before. Both validators see a
repeated key in every occurrence (each must pass) and keep the last, as ``from_json`` does.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic_core import SchemaValidator, core_schema as cs

from ...history import RECORD_FORMAT_VERSION
from ...models import CHAT_ROLES

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001-9999: date's range
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = ("(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"  # every month has days 1-28
              "|(?:0[13-9]|1[0-2])-(?:29|30)"  # every month but February has 29 and 30
              "|(?:0[13578]|1[02])-31)")
STORED_TIMESTAMP = (f"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
                    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z$")
"""``YYYY-MM-DDTHH:MM:SS.ffffffZ`` of a real date (0001-9999, leap years as ``datetime``'s
proleptic Gregorian calendar) and time of day (no hour 24, no leap second): the stored form."""

_PLAIN_TEXT = r"^[ !#-\[\]-~]*$"
"""Printable ASCII without quote and backslash (as live.py's _PLAIN_TEXT)."""


def _text(pattern: str | None = None) -> Any:
    return cs.str_schema(strict=True, pattern=pattern)


def _required(schema: Any) -> Any:
    return cs.typed_dict_field(schema, required=True)


def _optional(schema: Any) -> Any:
    return cs.typed_dict_field(schema, required=False)


def _object(fields: dict[str, Any]) -> Any:
    """A JSON object of exactly these keys (the required ones present), nothing else."""
    return cs.typed_dict_schema(fields, extra_behavior="forbid", strict=True)


_ROLE = cs.literal_schema(sorted(CHAT_ROLES))
_STAMP = _text(STORED_TIMESTAMP)

_ITEM = _object({
    "v": _required(cs.int_schema(strict=True, ge=RECORD_FORMAT_VERSION, le=RECORD_FORMAT_VERSION)),
    "type": _required(cs.literal_schema(["item"])),
    "seq": _required(cs.int_schema(strict=True)),
    "at": _required(_STAMP),
    "message": _required(_object({
        "role": _required(_ROLE),
        "content": _required(cs.nullable_schema(_text())),
        "toolCalls": _optional(cs.list_schema(cs.dict_schema(cs.str_schema(strict=True), cs.any_schema(), strict=True),
                                              strict=True)),
        "toolCallId": _optional(_text()),
        "name": _optional(_text()),
    })),
})

_MESSAGE = _object({
    "id": _required(_text(_PLAIN_TEXT)),
    "chatId": _required(_text()),
    "role": _required(_ROLE),
    "content": _required(_text()),
    "createdAt": _required(_STAMP),
})

# No string cache: every content string of a store is new (the cache's lookups cost ~10% of a call).
_CONFIG = cs.CoreConfig(cache_strings="none")

simple_item: Callable[[Any], dict[str, Any]] = SchemaValidator(_ITEM, _CONFIG).validate_json
"""The current-version history item rows.is_simple_item accepts, from its JSON text (see the module)."""

plain_message: Callable[[Any], dict[str, Any]] = SchemaValidator(_MESSAGE, _CONFIG).validate_json
"""The chat message models.is_plain_message accepts, its id needing no escaping (see the module)."""
