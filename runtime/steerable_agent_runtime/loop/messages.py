"""The loop's own transcript messages, built without validating again what the loop just checked.

Every round the loop builds an assistant message (the reply's text and its calls' wire dicts)
and a tool message per call (the call's id and name, the result's content). Validating them
through ``LLMMessage(...)`` re-checks values whose types the loop has in hand; here each value's
exact type is checked (a few identity tests) and the message is put together as pydantic's
validator puts it together (``model_construct``'s steps, without its Python-level loop over the
fields). Guarantees (tests/loop/test_messages.py holds each form to the validating constructor):

- :func:`assistant_message` and :func:`tool_message` return what ``LLMMessage(role=..., ...)``
  returns for the same keyword arguments: equal ``__dict__`` (the fields in the model's order),
  the same ``model_fields_set``, no extras, no private state; so equality, ``to_wire()``,
  ``model_dump_json()``, copies and the record are those of the validated message;
- a value of any other type (a str subclass, an id that is not a str, a call dict with a key
  that is not a str) goes to the validating constructor, which converts it or raises exactly as
  before;
- :func:`calling_message` is ``assistant_message(content, [wire_call(c) for c in calls])``;
- :func:`wire_call` is ``call.to_wire()`` (a fresh dict; its arguments a fresh dict) for an exact
  ToolCall whose arguments are flat (ASCII keys, each value an exact str, int, bool or None: what
  JSON mode keeps as it is; it rewrites a key's lone surrogate); anything else is
  ``call.to_wire()`` itself.

If LLMMessage ever gets private attributes, a post-init hook or extras (what these steps do not
reproduce), :data:`CONSTRUCTIBLE` is False and every message is validated.
"""

from __future__ import annotations

from typing import Any

from ..history_append import dicts_with_str_keys
from ..models import LLMMessage, ToolCall

_new = object.__new__
_set = object.__setattr__

CONSTRUCTIBLE: bool = (not LLMMessage.__private_attributes__ and not LLMMessage.__pydantic_post_init__
                       and not LLMMessage.__pydantic_root_model__
                       and list(LLMMessage.model_fields) == ["role", "content", "tool_calls", "tool_call_id", "name"])
"""Whether LLMMessage is a plain model these steps build exactly (checked once, at import)."""

_TOOL_SET = frozenset(("role", "tool_call_id", "name", "content"))
_CALLING_SET = frozenset(("role", "content", "tool_calls"))
_TEXT_SET = frozenset(("role", "content"))
_FLAT = frozenset((str, int, bool, type(None)))


def tool_message(tool_call_id: Any, name: Any, content: Any) -> LLMMessage:
    """``LLMMessage(role="tool", tool_call_id=tool_call_id, name=name, content=content)``."""
    if CONSTRUCTIBLE and type(tool_call_id) is str and type(name) is str and type(content) is str:
        message = _new(LLMMessage)  # model_construct's steps (inline in each: this runs for every message)
        _set(message, "__dict__", {"role": "tool", "content": content, "tool_calls": None,
                                   "tool_call_id": tool_call_id, "name": name})
        _set(message, "__pydantic_fields_set__", set(_TOOL_SET))
        _set(message, "__pydantic_extra__", None)
        _set(message, "__pydantic_private__", None)
        return message
    return LLMMessage(role="tool", tool_call_id=tool_call_id, name=name, content=content)


def assistant_message(content: Any, tool_calls: Any = None) -> LLMMessage:
    """``LLMMessage(role="assistant", content=content, tool_calls=tool_calls)``, or without
    ``tool_calls`` (None: not passed) ``LLMMessage(role="assistant", content=content)``."""
    if CONSTRUCTIBLE and (content is None or type(content) is str) and (
            tool_calls is None or dicts_with_str_keys(tool_calls)):
        message = _new(LLMMessage)
        _set(message, "__dict__", {"role": "assistant", "content": content, "tool_calls": tool_calls,
                                   "tool_call_id": None, "name": None})
        _set(message, "__pydantic_fields_set__", set(_TEXT_SET if tool_calls is None else _CALLING_SET))
        _set(message, "__pydantic_extra__", None)
        _set(message, "__pydantic_private__", None)
        return message
    if tool_calls is None:
        return LLMMessage(role="assistant", content=content)
    return LLMMessage(role="assistant", content=content, tool_calls=tool_calls)


def wire_call(call: Any) -> dict[str, Any]:
    """``call.to_wire()`` (see the module docstring)."""
    wire = _flat_wire(call)
    return call.to_wire() if wire is None else wire


def _flat_wire(call: Any) -> dict[str, Any] | None:
    """wire_call's dict for an exact ToolCall with flat arguments (see the module docstring), else None."""
    if type(call) is ToolCall:
        fields = call.__dict__
        try:  # subscripts, not .get(): no method call per field
            call_id, name, arguments = fields["id"], fields["name"], fields["arguments"]
        except KeyError:  # (a model_construct'ed call without them)
            return None
        if type(call_id) is str and type(name) is str and type(arguments) is dict:
            for key, value in arguments.items():
                if type(key) is not str or not key.isascii() or type(value) not in _FLAT:
                    return None
            return {"id": call_id, "name": name, "arguments": dict(arguments)}
    return None


def calling_message(content: Any, calls: list[Any]) -> LLMMessage:
    """``assistant_message(content, [wire_call(c) for c in calls])``: a reply's message with its
    calls. Flat calls (see the module docstring) are written as wire_call writes them, and their
    dicts (keys "id", "name", "arguments") need no key check; anything else goes through
    wire_call and assistant_message."""
    message = flat_calling_message(content, calls)
    if message is not None:
        return message
    wire = [_flat_wire(call) for call in calls]
    if None in wire:
        return assistant_message(content, [wire_call(c) for c in calls])
    return assistant_message(content, wire)


def flat_calling_message(content: Any, calls: list[Any]) -> LLMMessage | None:
    """``calling_message(content, calls)`` when ``content`` is an exact str or None and every call
    is flat (and :data:`CONSTRUCTIBLE`): its tool_calls then are the dicts ``_flat_wire`` wrote
    (what history_append.built_snapshot may take without checking them again). None otherwise
    (nothing built: call calling_message)."""
    if not CONSTRUCTIBLE or (content is not None and type(content) is not str):
        return None
    wire: list[dict[str, Any]] = []
    for call in calls:
        flat = _flat_wire(call)
        if flat is None:
            return None
        wire.append(flat)
    message = _new(LLMMessage)  # assistant_message's steps: every dict's keys are the three strs above
    _set(message, "__dict__", {"role": "assistant", "content": content, "tool_calls": wire,
                               "tool_call_id": None, "name": None})
    _set(message, "__pydantic_fields_set__", set(_CALLING_SET))
    _set(message, "__pydantic_extra__", None)
    _set(message, "__pydantic_private__", None)
    return message
