"""Wire models (pydantic v2): camelCase on the wire, snake_case accepted on input.

Guarantees:
- ``Model.model_validate_json(m.to_json()) == m`` for every model (JSON round trip is the
  identity; checked by a hypothesis property test).
- Timestamps are ISO 8601 strings normalised to UTC with microseconds and a ``Z``
  (``2026-01-02T03:04:05.000000Z``), so text order is time order. A timestamp without an
  offset is taken to be UTC.
- Unknown fields are refused (``extra="forbid"``): a typo is an error, never silently dropped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Container
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


def normalize_timestamp(value: str | datetime) -> str:
    """Return ``value`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` in UTC.

    Raises ValueError for a string that is not ISO 8601.
    """
    if isinstance(value, datetime):
        moment = value
    else:
        moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        moment = moment.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"timestamp {value!s} is out of range in UTC") from None
    # %Y does not zero-pad years before 1000; text order must stay time order.
    return f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.%fZ")


_second_text: tuple[int, int, str] = (0, 0, "")  # [start, end) of the cached second in ns, its text
_MILLIS = tuple(f".{i:03d}" for i in range(1000))  # the fraction's first three digits, with the point
_MICROS = tuple(f"{i:03d}Z" for i in range(1000))  # its last three, with the Z
_time_ns = time.time_ns


def utc_now() -> str:
    """The current time as a normalised timestamp (what ``normalize_timestamp`` of now gives).

    Written from ``time.time_ns()`` with the text up to the seconds kept per second (every
    history append stamps the time; datetime formatting costs several times more), and the
    microseconds taken from the offset into that second (small-int arithmetic) as two
    three-digit parts from tables (a quarter fewer instructions than ``%06d`` formatting).
    """
    return stamp_text(_time_ns())


def stamp_text(now: int) -> str:
    """``utc_now()``'s text for the clock reading ``now`` (a ``time.time_ns()``): a store that keeps
    the reading writes this when the entry is read, the same text a stamp taken then would have
    been (utc_now is this of ``time.time_ns()``)."""
    global _second_text
    start, end, text = _second_text
    if not start <= now < end:
        seconds = now // 1_000_000_000
        start = seconds * 1_000_000_000
        t = time.gmtime(seconds)
        text = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
        _second_text = (start, start + 1_000_000_000, text)
    micros = (now - start) // 1000
    return text + _MILLIS[micros // 1000] + _MICROS[micros % 1000]


_STORED_TIME = re.compile(r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z")
"""The stored form after its date: a real time of day (what fromisoformat accepts: no hour 24,
no leap second), microseconds, ``Z``."""
_STORED_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def is_stored_timestamp(value: Any) -> bool:
    """Whether ``value`` is already a normalised timestamp (``normalize_timestamp(value) ==
    value``): exactly ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` and a real date and time.

    Equal to ``datetime.fromisoformat`` accepting a text of that exact form (a property test
    holds the two equal): the time of day is checked by a pattern, the date by
    ``date.fromisoformat``, once per distinct date (the stamps of a store share few dates,
    while each stamp is unique)."""
    return (type(value) is str and len(value) == 27 and _STORED_TIME.fullmatch(value, 10) is not None
            and _stored_date(value[:10]))


@lru_cache(maxsize=4096)
def _stored_date(text: str) -> bool:
    if _STORED_DATE.fullmatch(text) is None:
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone UTF-16 surrogate, which is no character: UTF-8, SQLite and
    every model API refuse it (ASCII text is decided in one pass, without encoding)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str every surrogate code point is a lone one


def replace_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate of its strings (dict keys too, through dicts and lists)
    replaced by U+FFFD, so UTF-8 can carry it; a string without one is returned as it is. The one
    copy of this rule (the loop's record, the trace recorder and the sidecar's output use it)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if has_lone_surrogate(value) else value
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_lone_surrogates(item) for item in value]
    return value


def _check_timestamp(value: str) -> str:
    # Fast path for the stored form (every read goes through here): keep it as it is.
    # Other text of the same length (an ISO week date, a comma before the fraction) is
    # normalised like any other input.
    if is_stored_timestamp(value):
        return value
    return normalize_timestamp(value)


Timestamp = Annotated[str, AfterValidator(_check_timestamp)]


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, snake_case input, no unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
    )

    def to_wire(self) -> dict[str, Any]:
        """The model as a camelCase JSON-ready dict, unset optionals left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        """The model as compact camelCase JSON, unset optionals left out."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class AgentSession(WireModel):
    """One multi-step run of a user in a chat (seed: Runtime Spec, AgentSession)."""

    session_id: str
    user_id: str
    chat_id: str
    current_stage: str
    is_active: bool
    created_at: Timestamp
    updated_at: Timestamp
    next_stage: str | None = None
    scenario: str | None = None
    stage_data: dict[str, Any] | None = None
    project_id: str | None = None
    id: str | None = None


TraceOutcome = Literal["ok", "error", "budget_exhausted", "cancelled"]
SpanKind = Literal["llm", "tool", "approval"]


class HarnessTrace(WireModel):
    """The metadata of one run of the loop; pairs with N TraceSpans."""

    trace_id: str
    session_id: str
    chat_id: str
    user_id: str
    started_at: Timestamp
    ended_at: Timestamp | None = None
    outcome: TraceOutcome | None = None


class TraceSpan(WireModel):
    """One unit of work: ``llm.request``, a tool name, or ``approval.wait``."""

    span_id: str
    name: str
    start_at: Timestamp
    end_at: Timestamp | None = None
    parent_id: str | None = None
    attrs: dict[str, Any] | None = None
    kind: SpanKind | None = None


class TraceEvent(WireModel):
    """A point-in-time annotation inside a span."""

    event_id: str
    span_id: str
    name: str
    at: Timestamp
    attrs: dict[str, Any] | None = None


ChatRole = Literal["user", "assistant", "tool", "system"]


class ChatMessage(WireModel):
    """A message of the user-visible chat (what the UI shows, what search finds)."""

    id: str
    chat_id: str
    role: ChatRole
    content: str
    created_at: Timestamp
    tool_calls: list[dict[str, Any]] | None = None
    tool_result: Any | None = None


CHAT_ROLES = frozenset(get_args(ChatRole))


def is_one_of(value: Any, allowed: Container[Any]) -> bool:
    """``value in allowed`` for a value decoded from JSON: False, not TypeError, when it is a
    list or an object (unhashable; a set or dict of allowed values cannot hold it)."""
    try:
        return value in allowed
    except TypeError:
        return False


def is_plain_message(obj: Any) -> bool:
    """A fast, conservative test for the commonest stored chat message: True only when
    ``obj`` (a decoded JSON object) has exactly the keys id, chatId, role, content and
    createdAt, every one a string, a known role and a timestamp already in stored form.

    Guarantee: every object it accepts validates as a ChatMessage unchanged (a property test
    checks this). False decides nothing: validate such an object in full.
    """
    # Exactly five keys, each of the five present (a missing one reads as None, not a str).
    if type(obj) is not dict or len(obj) != 5:
        return False
    # (A role that is a list or an object is no role, and unhashable: tested as text first.)
    return (type(obj.get("id")) is str and type(obj.get("chatId")) is str and type(role := obj.get("role")) is str
            and role in CHAT_ROLES and type(obj.get("content")) is str and is_stored_timestamp(obj.get("createdAt")))


class LLMMessage(WireModel):
    """A message as the model sees it: text or a list of content parts, plus tool calls."""

    role: ChatRole
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class ToolCall(WireModel):
    """One tool call in the provider-neutral shape ``{id, name, arguments}``.

    ``id`` is the wire's call id (OpenAI ``tool_calls[].id``, Responses ``call_id``, Anthropic
    ``tool_use.id``; Gemini sends none, so its adapter generates one unique within the
    response). ``arguments`` is always a decoded JSON object. ``LLMMessage.tool_calls`` holds
    these as their wire dicts (``ToolCall.to_wire()``), also in the history record.
    """

    id: str
    name: str
    arguments: dict[str, Any] = {}
