"""check's common row shapes, parsed and tested in one call (pydantic-core, no Python per field).

rows.py's loops judge a row's ``data`` by ``from_json`` and a test in Python of the decoded
object (the plain-item and plain-message tests). These validators do the parse and most of
that test inside pydantic-core, for the two shapes that are the bulk of a store; the loop
then compares only the returned fields with the row's columns.

Guarantees (property tests in tests/maintenance/test_check_commonrows.py hold them):

- ``common_item(data)`` returns a dict only when ``from_json(data)`` is a dict that the
  plain-item test of rows.py accepts (given columns that equal its "v", "type", "seq" and
  "at"): "v" the integer RECORD_FORMAT_VERSION, "type" "item", "seq" an integer, "at" text,
  "message" an object with a chat role and text, list or null content; and its "seq" and
  "at" are the returned dict's. For any other input it raises ValueError (TypeError for a value that is
  neither bytes nor str).
- ``common_message(data)`` returns a dict only when ``from_json(data)`` is a dict the
  messages loop's inline test accepts (given columns equal to its fields): "id", "chatId",
  "createdAt" and "content" text, "role" a chat role; those three are the returned dict's.
- ``COMMON[table](data)``, for sessions, traces, spans and events, returns a dict only when
  ``from_json(data)`` is a dict whose shape passes (shapes.py: SHAPES[table] returns None);
  every field a column of the table duplicates (TableSpec.columns) is the returned dict's
  when it is the parsed dict's, with the same value and type, and absent when it is absent.

They accept less than the inline tests (no float version): a refusal decides nothing, the loop then judges the row as before. Extra keys are ignored (as
the inline tests ignore them); a repeated key is validated in every occurrence and the last
one kept, as ``from_json`` keeps it.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic_core import SchemaValidator, core_schema as cs

from ...history import RECORD_FORMAT_VERSION
from ...models import CHAT_ROLES
from ...storage.schema import TABLES
from .shapes import OUTCOMES

_TEXT = cs.str_schema(strict=True)
_ROLE = cs.literal_schema(sorted(CHAT_ROLES))
_CONTENT = cs.nullable_schema(cs.union_schema([_TEXT, cs.list_schema(cs.any_schema(), strict=True)],
                                              mode="left_to_right"))
"""An LLM message's content as the plain-item test takes it: text (tried first: most rows), a
list of parts (its items not looked at, as that test does not look at them), or null (a
tool-call-only assistant turn: the runtime writes it so)."""


def _required(schema: Any) -> Any:
    return cs.typed_dict_field(schema, required=True)


def _object(fields: dict[str, Any]) -> Any:
    """A JSON object with these keys (and any others, ignored)."""
    return cs.typed_dict_schema(fields, extra_behavior="ignore", strict=True)


_ITEM = _object({
    "v": _required(cs.int_schema(strict=True, ge=RECORD_FORMAT_VERSION, le=RECORD_FORMAT_VERSION)),
    "type": _required(cs.literal_schema(["item"])),
    "seq": _required(cs.int_schema(strict=True)),
    "at": _required(_TEXT),
    "message": _required(_object({"role": _required(_ROLE), "content": _required(_CONTENT)})),
})

_MESSAGE = _object({
    "id": _required(_TEXT),
    "chatId": _required(_TEXT),
    "createdAt": _required(_TEXT),
    "role": _required(_ROLE),
    "content": _required(_TEXT),
})


def _entity(table: str, fields: dict[str, Any], optional: dict[str, Any] | None = None) -> Any:
    """An object of ``table`` whose shape passes: ``fields`` (required) and ``optional`` (when
    present), typed as shapes.py tests them, plus each other field a column duplicates, of
    any JSON type, kept when present."""
    optional = {name: cs.any_schema() for name in TABLES[table].columns.values()
                if name and name not in fields} | (optional or {})
    return _object({**{name: _required(schema) for name, schema in fields.items()},
                    **{name: cs.typed_dict_field(schema, required=False) for name, schema in optional.items()}})


_ENTITIES = {
    "sessions": _entity("sessions", {**dict.fromkeys(("sessionId", "userId", "chatId", "currentStage", "createdAt",
                                                      "updatedAt"), _TEXT), "isActive": cs.bool_schema(strict=True)}),
    "traces": _entity("traces", dict.fromkeys(("traceId", "sessionId", "chatId", "userId", "startedAt"), _TEXT),
                      {"outcome": cs.nullable_schema(cs.literal_schema(sorted(o for o in OUTCOMES if o is not None)))}),
    "spans": _entity("spans", dict.fromkeys(("spanId", "name", "startAt"), _TEXT)),
    "events": _entity("events", dict.fromkeys(("eventId", "spanId", "name", "at"), _TEXT)),
}
"""shapes.py's tests as schemas (outcome: absent, null or a known outcome)."""

# No string cache: the values of a store are new strings each row, and the keys are the schema's.
_CONFIG = cs.CoreConfig(cache_strings="none")

common_item: Callable[[Any], dict[str, Any]] = SchemaValidator(_ITEM, _CONFIG).validate_json
"""The current-version history item the plain-item test accepts, from its JSON (see the module)."""

common_message: Callable[[Any], dict[str, Any]] = SchemaValidator(_MESSAGE, _CONFIG).validate_json
"""The chat message the messages loop's inline test accepts, from its JSON (see the module)."""

COMMON: dict[str, Callable[[Any], dict[str, Any]]] = {
    table: SchemaValidator(schema, _CONFIG).validate_json for table, schema in _ENTITIES.items()}
"""Per table (sessions, traces, spans, events): the row whose shape passes, from its JSON (see the module)."""
