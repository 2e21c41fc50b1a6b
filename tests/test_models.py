"""Wire models: camelCase out, snake_case in, JSON round trip is the identity."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from steerable_agent_runtime import AgentSession, ChatMessage, HarnessTrace, LLMMessage, TraceEvent, TraceSpan
from steerable_agent_runtime.history import CompactionBoundary, HistoryItem, HistorySeed
from steerable_agent_runtime.models import is_plain_message, is_stored_timestamp, normalize_timestamp

timestamps = st.datetimes(timezones=st.sampled_from([timezone.utc, None])).map(lambda d: d.isoformat())
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), st.text(max_size=20),
                         st.floats(allow_nan=False, allow_infinity=False))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                 st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=8)
json_dicts = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
opt = lambda s: st.one_of(st.none(), s)  # noqa: E731
text = st.text(max_size=30)


def builds(model, **fields):
    """Like st.builds, but by field name only (st.builds also fills the camelCase aliases)."""
    return st.fixed_dictionaries(fields).map(lambda kw: model(**kw))


llm_messages = builds(LLMMessage, role=st.sampled_from(["user", "assistant", "tool", "system"]),
                         content=opt(st.one_of(text, st.lists(json_dicts, max_size=2))),
                         tool_calls=opt(st.lists(json_dicts, max_size=2)), tool_call_id=opt(text), name=opt(text))

MODELS = {
    "AgentSession": builds(AgentSession, session_id=text, user_id=text, chat_id=text, current_stage=text,
                              is_active=st.booleans(), created_at=timestamps, updated_at=timestamps,
                              next_stage=opt(text), scenario=opt(text), stage_data=opt(json_dicts),
                              project_id=opt(text), id=opt(text)),
    "HarnessTrace": builds(HarnessTrace, trace_id=text, session_id=text, chat_id=text, user_id=text,
                              started_at=timestamps, ended_at=opt(timestamps),
                              outcome=opt(st.sampled_from(["ok", "error", "budget_exhausted", "cancelled"]))),
    "TraceSpan": builds(TraceSpan, span_id=text, name=text, start_at=timestamps, end_at=opt(timestamps),
                           parent_id=opt(text), attrs=opt(json_dicts), kind=opt(st.sampled_from(["llm", "tool", "approval"]))),
    "TraceEvent": builds(TraceEvent, event_id=text, span_id=text, name=text, at=timestamps, attrs=opt(json_dicts)),
    "ChatMessage": builds(ChatMessage, id=text, chat_id=text, role=st.sampled_from(["user", "assistant", "tool", "system"]),
                             content=text, created_at=timestamps, tool_calls=opt(st.lists(json_dicts, max_size=2)),
                             tool_result=opt(json_dicts)),
    "LLMMessage": llm_messages,
    "HistoryItem": builds(HistoryItem, v=st.just(2), type=st.just("item"), seq=st.integers(1, 10**9),
                             at=timestamps, message=llm_messages),
    "CompactionBoundary": builds(CompactionBoundary, v=st.just(2), type=st.just("compaction_boundary"),
                                    seq=st.integers(1, 10**9), at=timestamps,
                                    trigger=st.sampled_from(["pressure", "overflow", "micro", "manual"]),
                                    pre_tokens=st.integers(0, 10**7), post_tokens=st.integers(0, 10**7),
                                    replacement=st.lists(llm_messages, max_size=3)),
    "HistorySeed": builds(HistorySeed, v=st.just(2), type=st.just("seed"), seq=st.integers(1, 10**9), at=timestamps,
                             messages=st.lists(llm_messages, max_size=3)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_json_round_trip_is_identity(name):
    @given(MODELS[name])
    def check(model):
        wire = model.to_json()
        again = type(model).model_validate_json(wire)
        assert again == model
        assert again.to_json() == wire

    check()


def test_wire_is_camel_case_and_input_accepts_snake_case():
    snake = AgentSession(session_id="s", user_id="u", chat_id="c", current_stage="P", is_active=True,
                         created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z", next_stage="Q")
    wire = snake.to_wire()
    assert set(wire) == {"sessionId", "userId", "chatId", "currentStage", "isActive", "createdAt", "updatedAt", "nextStage"}
    assert AgentSession.model_validate(wire) == snake


def test_timestamps_are_normalised_to_utc_z():
    assert normalize_timestamp("2026-03-04T05:06:07+02:00") == "2026-03-04T03:06:07.000000Z"
    assert normalize_timestamp("2026-03-04T05:06:07.5") == "2026-03-04T05:06:07.500000Z"
    earlier, later = normalize_timestamp("2026-03-04T10:00:00+05:00"), normalize_timestamp("2026-03-04T06:00:00Z")
    assert earlier < later


@pytest.mark.parametrize("given,stored", [
    ("2026-W01-1T00:00:00.000000Z", "2025-12-29T00:00:00.000000Z"),  # ISO week date, same length as the stored form
    ("2026-01-01T00:00:00,500000Z", "2026-01-01T00:00:00.500000Z"),  # comma before the fraction
    ("2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z"),
])
def test_timestamps_shaped_like_the_stored_form_are_still_normalised(given, stored):
    msg = ChatMessage(id="m", chat_id="c", role="user", content="x", created_at=given)
    assert msg.created_at == stored == normalize_timestamp(given)
    assert is_stored_timestamp(stored) and is_stored_timestamp(given) == (given == stored)


@given(st.one_of(st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\Z"),
                 st.text(min_size=27, max_size=27), timestamps))
def test_is_stored_timestamp_means_normalising_changes_nothing(value):
    if is_stored_timestamp(value):
        assert normalize_timestamp(value) == value


def _stored_by_fromisoformat(value):
    """The definition is_stored_timestamp must equal: the exact form, and datetime.fromisoformat accepts it."""
    if not isinstance(value, str) or re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z", value) is None:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


_STAMP_DIGITS = st.sampled_from("0123456789")


@st.composite
def _near_stamps(draw):
    """Texts of the stored form with any digits (months 13-99, day 31 of April, hour 24, second
    60, year 0000, 29 February of any year), some with one character replaced or one cut or added."""
    digits = [draw(_STAMP_DIGITS) for _ in range(20)]
    for place, first in ((4, "01"), (6, "0123"), (8, "012"), (10, "0123456"), (12, "0123456")):
        if draw(st.booleans()):
            digits[place] = draw(st.sampled_from(first))
    d = "".join(digits)
    text = f"{d[0:4]}-{d[4:6]}-{d[6:8]}T{d[8:10]}:{d[10:12]}:{d[12:14]}.{d[14:20]}Z"
    change = draw(st.integers(0, 3))
    if change == 1:
        at = draw(st.integers(0, 26))
        text = text[:at] + draw(st.characters()) + text[at + 1:]
    elif change == 2:
        text = text[:-1] if draw(st.booleans()) else text + draw(st.characters())
    return text


@given(st.one_of(_near_stamps(), st.text(min_size=27, max_size=27), timestamps, st.integers(), st.none()))
@settings(max_examples=2000)
def test_is_stored_timestamp_equals_fromisoformat_on_the_stored_form(value):
    assert is_stored_timestamp(value) == _stored_by_fromisoformat(value)


@pytest.mark.parametrize("value,stored", [
    ("2024-02-29T23:59:59.999999Z", True), ("2023-02-29T00:00:00.000000Z", False), ("2026-04-31T00:00:00.000000Z", False),
    ("2026-01-01T24:00:00.000000Z", False), ("2026-01-01T23:59:60.000000Z", False), ("0000-01-01T00:00:00.000000Z", False),
    ("0001-01-01T00:00:00.000000Z", True), ("2026-13-01T00:00:00.000000Z", False), ("2026-01-01T00:00:00.000000z", False),
    ("2026-01-01 00:00:00.000000Z", False), ("2026-01-01T00:00:00.000000Z\n", False), ("２０２６-01-01T00:00:00.000000Z", False),
])
def test_is_stored_timestamp_cases(value, stored):
    assert is_stored_timestamp(value) is stored


@pytest.mark.parametrize("bad,field", [
    ({"userId": "u", "chatId": "c", "currentStage": "P", "isActive": True, "createdAt": "2026-01-01T00:00:00Z",
      "updatedAt": "2026-01-01T00:00:00Z"}, "sessionId"),
    ({"sessionId": "s", "userId": "u", "chatId": "c", "currentStage": "P", "isActive": True,
      "createdAt": "yesterday", "updatedAt": "2026-01-01T00:00:00Z"}, "createdAt"),
    ({"sessionId": "s", "userId": "u", "chatId": "c", "currentStage": "P", "isActive": True,
      "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z", "colour": "red"}, "colour"),
])
def test_invalid_models_name_the_field(bad, field):
    with pytest.raises(ValidationError) as err:
        AgentSession.model_validate(bad)
    assert field in str(err.value)


def test_trace_outcome_and_span_kind_are_closed_sets():
    with pytest.raises(ValidationError, match="outcome"):
        HarnessTrace(trace_id="t", session_id="s", chat_id="c", user_id="u", started_at="2026-01-01T00:00:00Z",
                     outcome="crashed")
    with pytest.raises(ValidationError, match="kind"):
        TraceSpan(span_id="x", name="n", start_at="2026-01-01T00:00:00Z", kind="db")


_near_timestamps = st.one_of(st.just("2026-01-01T00:00:00.000000Z"), st.just("2026-W01-1T00:00:00.000000Z"),
                             st.just("2026-01-01T00:00:00Z"), timestamps)
_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=5), _near_timestamps,
                    st.sampled_from(["user", "assistant", "tool", "system", "robot"]), st.lists(st.text(), max_size=2))
_messages = st.one_of(
    st.dictionaries(st.sampled_from(["id", "chatId", "role", "content", "createdAt", "toolCalls", "chat_id"]),
                    _values, max_size=6),
    st.fixed_dictionaries({"id": st.text(), "chatId": st.text(), "role": st.sampled_from(["user", "tool", "x"]),
                           "content": st.text(), "createdAt": _near_timestamps}))


@given(_messages)
def test_is_plain_message_accepts_only_messages_that_validate_unchanged(obj):
    if is_plain_message(obj):
        assert ChatMessage.model_validate(obj).to_wire() == obj
        assert ChatMessage.model_validate_json(json.dumps(obj)).to_wire() == obj


def test_messages_the_runtime_writes_are_plain():
    msg = ChatMessage(id="m", chat_id="c", role="assistant", content="hi ✓", created_at="2026-01-01T00:00:00Z")
    assert is_plain_message(json.loads(msg.to_json()))
    assert not is_plain_message(json.loads(msg.model_copy(update={"tool_calls": [{}]}).to_json()))


def test_utc_now_is_the_stored_form_of_the_clock_across_seconds(monkeypatch):
    from datetime import datetime, timedelta

    from steerable_agent_runtime import models

    for ns in (1_764_600_000_999_999_000, 1_764_600_001_000_000_000, 1_764_600_001_000_001_999,
               1_764_600_000_000_000_000, 1_764_600_061_123_456_789,  # a second's last and first microsecond, back in time
               1_764_600_061_000_999_999, 1_764_600_061_001_000_000, 1_764_600_061_999_000_999):  # millisecond edges
        monkeypatch.setattr(models, "_time_ns", lambda ns=ns: ns)
        expected = normalize_timestamp(datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000))
        assert models.utc_now() == expected, ns
        assert is_stored_timestamp(models.utc_now())


@given(st.lists(st.integers(0, 4_102_444_800 * 10**9 - 1), min_size=1, max_size=8))
def test_utc_now_is_normalize_timestamp_of_the_clock_for_any_sequence_of_readings(readings):
    from datetime import datetime, timedelta

    from steerable_agent_runtime import models

    saved = models._time_ns
    try:
        for ns in readings:  # any order: the cached second is replaced whenever a reading leaves it
            models._time_ns = lambda ns=ns: ns
            expected = normalize_timestamp(datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000))
            assert models.utc_now() == expected, ns
    finally:
        models._time_ns = saved


@given(st.integers(0, 4_000_000_000 * 10**9), st.lists(st.sampled_from(
    [1, 999, 1_000, 1_001, 250_000, 999_999, 1_000_000, 1_000_001, 999_999_999, 10**9, -1, -1_000, -10**6, -10**9])
    | st.integers(-2 * 10**9, 2 * 10**9), min_size=1, max_size=20))
def test_utc_now_is_normalize_timestamp_of_readings_close_together(start, steps):
    """Readings microseconds apart (the cached millisecond and second reused, left, re-entered)."""
    from datetime import datetime, timedelta

    from steerable_agent_runtime import models

    saved = models._time_ns
    try:
        ns = start
        for step in steps:
            ns = max(0, ns + step)
            models._time_ns = lambda ns=ns: ns
            expected = normalize_timestamp(datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000))
            assert models.utc_now() == expected, ns
    finally:
        models._time_ns = saved
