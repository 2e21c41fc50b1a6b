"""Cheap structural validation of stored entity JSON, for check's per-row hot path.

A pydantic model per row costs several microseconds; these checks test the fields the
runtime needs (presence, JSON type, enum membership) with plain dict lookups, so the full
check keeps its throughput target. Each validator returns None when the object has the
shape of its entity, else a short description of the first problem found.

They mirror models.py (the wire models) and history.py (the entry envelopes); a shape
that passes here is what the runtime's readers accept, up to timestamp syntax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from ...history import CompactionBoundary
from ...models import CHAT_ROLES, TraceOutcome, is_one_of

ROLES = CHAT_ROLES
TRIGGERS = frozenset(get_args(CompactionBoundary.model_fields["trigger"].annotation))
OUTCOMES = frozenset({None, *get_args(TraceOutcome)})
"""The models' closed sets, read from the models (a value added there is valid here too)."""

Validator = Callable[[dict[str, Any]], "str | None"]


def _strings(obj: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        if type(obj.get(name)) is not str:
            return f"{name} missing or not a string"
    return None


def session_shape(obj: dict[str, Any]) -> str | None:
    """AgentSession: ids, stage and timestamps are strings, isActive a boolean."""
    problem = _strings(obj, ("sessionId", "userId", "chatId", "currentStage", "createdAt", "updatedAt"))
    if problem is None and type(obj.get("isActive")) is not bool:
        return "isActive missing or not a boolean"
    return problem


def message_shape(obj: dict[str, Any]) -> str | None:
    """ChatMessage: id, chatId, content, createdAt strings; a known role."""
    problem = _strings(obj, ("id", "chatId", "content", "createdAt"))
    if problem is None and not is_one_of(obj.get("role"), ROLES):
        return f"role {obj.get('role')!r} is not one of {sorted(ROLES)}"
    return problem


def trace_shape(obj: dict[str, Any]) -> str | None:
    """HarnessTrace: ids and startedAt strings; a known outcome when present."""
    problem = _strings(obj, ("traceId", "sessionId", "chatId", "userId", "startedAt"))
    if problem is None and not is_one_of(obj.get("outcome"), OUTCOMES):
        return f"outcome {obj.get('outcome')!r} is not a trace outcome"
    return problem


def span_shape(obj: dict[str, Any]) -> str | None:
    """TraceSpan: spanId, name, startAt strings."""
    return _strings(obj, ("spanId", "name", "startAt"))


def event_shape(obj: dict[str, Any]) -> str | None:
    """TraceEvent: eventId, spanId, name, at strings."""
    return _strings(obj, ("eventId", "spanId", "name", "at"))


def llm_message_problem(msg: Any) -> str | None:
    """LLMMessage: an object with a known role and text, part-list or null content."""
    if type(msg) is not dict:
        return "message is not an object"
    if not is_one_of(msg.get("role"), ROLES):
        return f"message role {msg.get('role')!r} is not one of {sorted(ROLES)}"
    content = msg.get("content")
    if content is not None and type(content) is not str and type(content) is not list:
        return "message content is not text, a list of parts or null"
    return None


def _messages_problem(messages: Any, name: str) -> str | None:
    if type(messages) is not list:
        return f"{name} is not a list"
    for msg in messages:
        problem = llm_message_problem(msg)
        if problem is not None:
            return f"{name}: {problem}"
    return None


def entry_shape(obj: dict[str, Any]) -> str | None:
    """A history entry of a known type at a version this build reads (v and type checked by the caller)."""
    if type(obj.get("seq")) is not int or type(obj.get("at")) is not str:
        return "seq or at missing or of the wrong type"
    kind = obj["type"]
    if kind == "item":
        return llm_message_problem(obj.get("message"))
    if kind == "seed":
        return _messages_problem(obj.get("messages"), "messages")
    if not is_one_of(obj.get("trigger"), TRIGGERS):
        return f"trigger {obj.get('trigger')!r} is not one of {sorted(TRIGGERS)}"
    if type(obj.get("preTokens")) is not int or type(obj.get("postTokens")) is not int:
        return "preTokens or postTokens missing or not an integer"
    return _messages_problem(obj.get("replacement"), "replacement")


SHAPES: dict[str, Validator] = {
    "sessions": session_shape, "messages": message_shape, "traces": trace_shape,
    "spans": span_shape, "events": event_shape,
}
"""Validators of the non-history tables (history entries go through ``entry_shape``)."""
