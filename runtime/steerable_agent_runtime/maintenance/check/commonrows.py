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

They accept less than the inline tests (no float version): a refusal decides nothing, the loop then judges the row as before. Extra keys are ignored (as
the inline tests ignore them); a repeated key is validated in every occurrence and the last
one kept, as ``from_json`` keeps it.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic_core import SchemaValidator, core_schema as cs

from ...history import RECORD_FORMAT_VERSION
from ...models import CHAT_ROLES

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

# No string cache: the values of a store are new strings each row, and the keys are the schema's.
_CONFIG = cs.CoreConfig(cache_strings="none")

common_item: Callable[[Any], dict[str, Any]] = SchemaValidator(_ITEM, _CONFIG).validate_json
"""The current-version history item the plain-item test accepts, from its JSON (see the module)."""

common_message: Callable[[Any], dict[str, Any]] = SchemaValidator(_MESSAGE, _CONFIG).validate_json
"""The chat message the messages loop's inline test accepts, from its JSON (see the module)."""
