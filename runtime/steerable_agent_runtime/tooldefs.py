"""What a tool definition must be for every provider to take it, checked once, at registration.

``ToolRouter.describe()`` goes into every request, so anything wrong in it fails every request
of a run (or, worse, silently drops part of the schema). :func:`argument_model` and
:func:`parameters_schema` build the argument model and its JSON schema from a handler's
parameters and raise :class:`ToolDefinitionError` (a UsageError) naming the tool and the part
instead:

- the name: :data:`TOOL_NAME`, what all four wires accept (OpenAI and Anthropic take
  ``^[a-zA-Z0-9_-]{1,64}$``; Gemini's FunctionDeclaration.name must also start with a letter or
  an underscore);
- the description: text, no lone surrogate (the request body is UTF-8);
- each default: JSON once pydantic encodes it (a date, an enum member, a set encode; ``object()``,
  undecodable bytes, NaN and the infinities, a lone surrogate do not) — pydantic itself would warn
  and drop a default it cannot encode, leaving a schema that no longer says what the handler does;
- each parameter's type: one pydantic can describe as JSON schema (not a callable, a socket, an
  enum of arbitrary objects), the parameter named;
- each parameter's name as the model sends it (the parameter's, or its ``Field(alias=...)``):
  :data:`PROPERTY_KEY`, what Anthropic takes as an ``input_schema`` property key (a non-ASCII
  identifier, 65+ characters or an alias like ``filter[id]`` fails every request with a 400), and
  no two parameters sent under one name (the schema would hold one, the handler never get the other);
- the whole definition: strict JSON (``allow_nan=False``) that encodes as UTF-8, the first bad
  value named by its path (``parameters.properties.x.description``).
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, PydanticUserError, create_model
from pydantic.json_schema import PydanticJsonSchemaWarning

from .errors import ToolDefinitionError
from .models import has_lone_surrogate

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""Tool names every provider accepts: 1-64 of ``A-Za-z0-9_-``, starting with a letter or ``_``."""

PROPERTY_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""Parameter names (schema property keys) Anthropic accepts: 1-64 of ``A-Za-z0-9_.-``."""

NAME_HINT = "use 1-64 letters, digits, '_' or '-', starting with a letter or '_' (pass name='...')"
PROPERTY_HINT = "rename the parameter (or give it Field(alias=...)) to 1-64 letters, digits, '_', '.' or '-'"
DEFAULT_HINT = "give the parameter a JSON default (None, a bool, a number, text, or a list or dict of them)"
TYPE_HINT = "annotate it with a type pydantic can describe as JSON (str, int, float, bool, list, dict, a BaseModel)"
TEXT_HINT = "write the text without lone surrogates (decode file names with errors='replace')"
_SCHEMA_ERRORS = (PydanticUserError, pydantic_core.SchemaError, pydantic_core.PydanticSerializationError)


def check_name(name: Any) -> str:
    """``name`` when every provider accepts it; ToolDefinitionError otherwise."""
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ToolDefinitionError(f"tool name {name!r} is not 1-64 letters, digits, '_' or '-' starting with a"
                                  " letter or '_' (the providers refuse it)", hint=NAME_HINT)
    return name


def check_description(tool: str, description: Any) -> str:
    """``description`` when it is text a request can carry; ToolDefinitionError otherwise."""
    if not isinstance(description, str):
        raise ToolDefinitionError(f"tool {tool!r}: description must be text, got {type(description).__name__}",
                                  hint="pass description='...' (or give the function a docstring)")
    if has_lone_surrogate(description):
        raise ToolDefinitionError(f"tool {tool!r}: description holds a lone surrogate (not UTF-8)", hint=TEXT_HINT)
    return description


def argument_model(tool: str, fields: dict[str, tuple[Any, Any]]) -> type[BaseModel]:
    """The argument model of ``fields`` (name -> (hint, default)); each default checked first.

    Raises ToolDefinitionError naming the parameter whose default is not JSON or whose type
    pydantic cannot build a schema for.
    """
    for name, (_, default) in fields.items():
        if default is not ...:
            _check_default(tool, name, default)
    try:
        return _model(tool, fields)
    except _SCHEMA_ERRORS as exc:
        raise _type_error(tool, fields, exc) from None


def parameters_schema(tool: str, model: type[BaseModel], fields: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    """The JSON schema of ``model`` as a tool's ``parameters`` (titles dropped), checked to be
    strict JSON. Raises ToolDefinitionError (see the module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PydanticJsonSchemaWarning)  # a default pydantic would drop
            schema = model.model_json_schema()
    except PydanticJsonSchemaWarning as exc:
        raise ToolDefinitionError(f"tool {tool!r}: a default in its parameters is not JSON ({exc})",
                                  hint=DEFAULT_HINT) from None
    except _SCHEMA_ERRORS as exc:
        raise _type_error(tool, fields, exc) from None
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    _check_properties(tool, model, schema["properties"])
    check_definition(tool, {"parameters": schema})
    return schema


def _check_properties(tool: str, model: type[BaseModel], properties: dict[str, Any]) -> None:
    """ToolDefinitionError for a parameter sent under a name a provider refuses, or under another's."""
    sent: dict[str, str] = {}
    for name, info in model.model_fields.items():
        key = info.validation_alias if isinstance(info.validation_alias, str) else info.alias or name
        if key in sent:
            raise ToolDefinitionError(f"tool {tool!r}: parameters {sent[key]!r} and {name!r} are both sent as {key!r}",
                                      hint="give each parameter its own name (or alias)")
        sent[key] = name
    for key in properties:
        if not PROPERTY_KEY.fullmatch(key):
            name = sent.get(key, key)
            shown = f"parameter {name!r}" + (f" (sent as {key!r})" if name != key else "")
            raise ToolDefinitionError(f"tool {tool!r}: {shown}: the name is not 1-64 letters, digits, '_', '.' or '-'"
                                      " (Anthropic refuses such a schema property)", hint=PROPERTY_HINT)


def check_definition(tool: str, definition: Any) -> None:
    """ToolDefinitionError naming the first value of ``definition`` that is not strict JSON."""
    bad = first_non_json(definition, "")
    if bad is not None:
        path, why = bad
        hint = TEXT_HINT if "surrogate" in why else DEFAULT_HINT
        raise ToolDefinitionError(f"tool {tool!r}: {path}: {why}", hint=hint)


def first_non_json(value: Any, path: str) -> tuple[str, str] | None:
    """(path, reason) of the first value under ``value`` a strict JSON encoder refuses, or None."""
    if isinstance(value, str):
        return (path or "value", "holds a lone surrogate (not UTF-8)") if has_lone_surrogate(value) else None
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "value", f"{value!r} is not JSON")
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or has_lone_surrogate(key):
                return where.encode("utf-8", "backslashreplace").decode(), "a key that is not JSON text"
            bad = first_non_json(item, where)
            if bad is not None:
                return bad
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            bad = first_non_json(item, f"{path}.{index}" if path else str(index))
            if bad is not None:
                return bad
        return None
    return path or "value", f"a {type(value).__name__} is not JSON"


def _check_default(tool: str, name: str, default: Any) -> None:
    try:
        encoded = pydantic_core.to_jsonable_python(default)
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise ToolDefinitionError(f"tool {tool!r}: parameter {name!r}: default {_short(default)} is not JSON"
                                  f" ({_first_line(exc)})", hint=DEFAULT_HINT) from None
    bad = first_non_json(encoded, "")
    if bad is not None:
        where, why = bad
        what = ("holds a lone surrogate (not UTF-8)" if "surrogate" in why else "is not JSON") if where == "value" \
            else f"at {where}: {why}"
        raise ToolDefinitionError(f"tool {tool!r}: parameter {name!r}: default {_short(default)} {what}",
                                  hint=TEXT_HINT if "surrogate" in why else DEFAULT_HINT)


def _model(tool: str, fields: dict[str, tuple[Any, Any]]) -> type[BaseModel]:
    with warnings.catch_warnings():  # a name shadowing BaseModel's is refused by the caller
        warnings.simplefilter("ignore")
        return create_model(f"{tool}_arguments", __config__=ConfigDict(extra="forbid"), **fields)  # type: ignore[call-overload]


def _type_error(tool: str, fields: dict[str, tuple[Any, Any]], exc: Exception) -> ToolDefinitionError:
    """The error naming the parameter whose type has no JSON schema (each one tried alone)."""
    for name, spec in fields.items():
        try:
            _model(tool, {name: spec}).model_json_schema()
        except (*_SCHEMA_ERRORS, PydanticJsonSchemaWarning) as alone:
            return ToolDefinitionError(f"tool {tool!r}: parameter {name!r}: its type {_short(spec[0])} has no JSON"
                                       f" schema ({_first_line(alone)})", hint=TYPE_HINT)
    return ToolDefinitionError(f"tool {tool!r}: its parameters have no JSON schema ({_first_line(exc)})",
                               hint=TYPE_HINT)


def _short(value: Any) -> str:
    text = repr(value)  # repr escapes a lone surrogate: the message stays valid text
    return text if len(text) <= 80 else text[:77] + "..."


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    line = (lines[0] if lines else type(exc).__name__).encode("utf-8", "backslashreplace").decode("utf-8")
    return line if len(line) <= 200 else line[:197] + "..."
