"""TraceRecorder: ids, spans, outcomes, head sampling, redaction, both storages."""

from __future__ import annotations

import asyncio
import random
import re
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable_agent_runtime.tracing import recorder as tracing
from steerable_agent_runtime.errors import DataIntegrityError, UsageError
from steerable_agent_runtime.models import AgentSession
from steerable_agent_runtime.storage.memory import InMemoryStorage
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_agent_runtime.tracing import (
    REDACTED,
    TraceRecorder,
    is_sampled,
    is_secret_key,
    new_span_id,
    new_trace_id,
    redact,
    rejection_threshold,
)

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
SPAN_ID = re.compile(r"^[0-9a-f]{16}$")
SESSION = AgentSession(session_id="s1", user_id="u1", chat_id="c1", current_stage="plan", is_active=True,
                       created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z")


def _id_with_randomness(randomness: int, high: int = 0xABCDEF) -> str:
    """A trace id whose low 56 bits are ``randomness`` and whose top bits are ``high``."""
    return f"{(high << 56) | randomness:032x}"


class BudgetExhausted(Exception):
    pass


# ids ------------------------------------------------------------------------------------
def test_new_ids_are_lowercase_hex_of_the_right_length():
    for _ in range(200):
        assert TRACE_ID.match(new_trace_id())
        assert SPAN_ID.match(new_span_id())


def test_an_all_zero_random_draw_is_drawn_again(monkeypatch):
    draws = iter(["0" * 32, "0" * 32, "00000000000000000000000000000001"])
    monkeypatch.setattr(tracing.secrets, "token_hex", lambda n: next(draws))
    assert new_trace_id() == "00000000000000000000000000000001"


# sampling -------------------------------------------------------------------------------
def test_rejection_threshold_follows_the_56_bit_rule():
    assert rejection_threshold(1.0) == 0
    assert rejection_threshold(0.0) == 2**56
    assert rejection_threshold(0.5) == 2**55
    assert rejection_threshold(0.25) == 3 * 2**54


def test_sampling_keeps_exactly_the_ids_at_or_above_the_threshold():
    threshold = 2**55
    assert not is_sampled(_id_with_randomness(threshold - 1), 0.5)
    assert is_sampled(_id_with_randomness(threshold), 0.5)
    assert is_sampled(_id_with_randomness(2**56 - 1), 0.5)
    assert not is_sampled(_id_with_randomness(2**56 - 1), 0.0)
    assert is_sampled(_id_with_randomness(0), 1.0)


@given(st.integers(0, 2**56 - 1), st.integers(0, 2**72 - 1), st.integers(0, 2**72 - 1),
       st.floats(0, 1))
def test_sampling_depends_only_on_the_low_56_bits(randomness, high_a, high_b, rate):
    decision = is_sampled(_id_with_randomness(randomness, high_a), rate)
    assert decision == is_sampled(_id_with_randomness(randomness, high_b), rate)
    assert decision == is_sampled(_id_with_randomness(randomness, high_a), rate)


@given(st.integers(1, 2**128 - 1), st.floats(0, 1), st.floats(0, 1))
def test_sampling_is_monotone_in_the_rate(value, rate_a, rate_b):
    low, high = sorted((rate_a, rate_b))
    trace_id = f"{value:032x}"
    if is_sampled(trace_id, low):
        assert is_sampled(trace_id, high)


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5, 0.9])
def test_sampling_ratio_over_many_ids_matches_the_rate(rate):
    rng = random.Random(1234)
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(20_000)]
    kept = sum(is_sampled(trace_id, rate) for trace_id in ids) / len(ids)
    assert abs(kept - rate) < 0.02


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan")])
def test_a_rate_outside_zero_to_one_is_a_usage_error(rate):
    with pytest.raises(UsageError):
        TraceRecorder(InMemoryStorage(), sample_rate=rate)


@pytest.mark.parametrize("trace_id", ["0x" + "1" * 30, "1_2", " " + "1" * 31, "g" * 32])
def test_sampling_refuses_what_is_not_a_hex_trace_id(trace_id):
    with pytest.raises(UsageError):
        is_sampled(trace_id, 0.5)


@pytest.mark.parametrize("trace_id", ["0" * 32, "A" * 32, "a" * 31, "trace-1"])
def test_a_given_trace_id_must_be_a_valid_otlp_id(trace_id):
    async def scenario():
        async with TraceRecorder(InMemoryStorage()).run(SESSION, trace_id=trace_id):
            pass

    with pytest.raises(UsageError):
        asyncio.run(scenario())


def test_recorder_sampling_decision_is_the_rule_applied_to_the_trace_id():
    async def scenario():
        store = InMemoryStorage()
        recorder = TraceRecorder(store, sample_rate=0.5)
        kept_id, dropped_id = _id_with_randomness(2**55 + 7), _id_with_randomness(2**55 - 7)
        for trace_id in (kept_id, dropped_id):
            async with recorder.run(SESSION, trace_id=trace_id) as run:
                async with run.tool("read_file") as tool:
                    await tool.event("read")
        return store, kept_id, dropped_id

    store, kept_id, dropped_id = asyncio.run(scenario())
    stored = asyncio.run(store.list_traces())
    assert [t.trace_id for t in stored] == [kept_id]
    assert asyncio.run(store.list_spans(dropped_id)) == []
    assert asyncio.run(store.list_events(dropped_id)) == []
    assert len(asyncio.run(store.list_spans(kept_id))) == 1


# redaction ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [
    "password", "PASSWORD", "db_password", "userPassword", "passwd", "secret", "client_secret",
    "clientSecret", "token", "access_token", "refreshToken", "api_key", "apiKey", "API_KEY",
    "x-api-key", "X-Api-Key", "Authorization", "proxy-authorization", "credential",
    "aws_credentials", "Cookie", "set-cookie", "private_key", "auth",
])
def test_secret_keys_are_recognised_in_any_case_and_separator_style(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", [
    "accesstoken", "ACCESSTOKEN", "authtoken", "refreshtoken", "idtoken", "apitoken", "x-authtoken",
    "githubtoken", "sessiontoken",
])
def test_a_token_key_written_as_one_word_is_a_secret(key):
    # Flat case (ngrok's authtoken, an env-style ACCESSTOKEN) is a separator style too: it
    # was caught for password, apikey and secret (substrings) but not for token.
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["maxtoken", "maxtokens", "prompttokens", "completiontokens", "tokencount",
                                 "totaltokens", "accesstoken_count"])
def test_token_counts_written_as_one_word_are_not_secrets(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize("key", [
    "max_tokens", "maxTokens", "prompt_tokens", "completion_tokens", "token_count", "tokens",
    "model", "path", "author", "llm.attempt", "status", "key", "tool_name",
])
def test_ordinary_keys_and_token_counts_are_not_secrets(key):
    assert not is_secret_key(key)


def test_redaction_reaches_any_depth_and_leaves_the_input_untouched():
    attrs = {
        "model": "m",
        "max_tokens": 100,
        "request": {"headers": {"Authorization": "Bearer abc", "Accept": "json"},
                    "body": [{"messages": [{"role": "user", "api_key": "sk-1"}]}]},
        "Password": {"nested": "whole value goes"},
        "note": "Bearer abc.def",
    }
    original = repr(attrs)
    clean = redact(attrs)
    assert repr(attrs) == original
    assert clean["model"] == "m" and clean["max_tokens"] == 100
    assert clean["request"]["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert clean["request"]["body"][0]["messages"][0] == {"role": "user", "api_key": REDACTED}
    assert clean["Password"] == REDACTED
    assert clean["note"] == REDACTED
    assert "sk-1" not in repr(clean) and "abc" not in repr(clean)


def test_recorded_span_and_event_attrs_are_redacted():
    async def scenario():
        store = InMemoryStorage()
        async with TraceRecorder(store).run(SESSION) as run:
            async with run.llm_request({"provider": {"apiKey": "sk-live"}}) as llm:
                llm.set_attrs({"response": {"token": "t-1", "usage": {"prompt_tokens": 3}}})
                await llm.event("retry", {"headers": [{"authorization": "Basic xyz"}]})
        return store, run.trace_id

    store, trace_id = asyncio.run(scenario())
    (span,) = asyncio.run(store.list_spans(trace_id))
    (event,) = asyncio.run(store.list_events(trace_id))
    assert span.attrs["provider"] == {"apiKey": REDACTED}
    assert span.attrs["response"] == {"token": REDACTED, "usage": {"prompt_tokens": 3}}
    assert event.attrs == {"headers": [{"authorization": REDACTED}]}


@pytest.mark.parametrize("text", [
    "tool 'fetch' raised RuntimeError: 401 from upstream; sent Authorization: Bearer sk-live-SECRET123",
    "request headers were {'Authorization': 'Bearer sk-live-SECRET123'}",
    "proxy refused: Proxy-Authorization: Basic dXNlcjpzay1saXZlLVNFQ1JFVDEyMw==",
])
def test_a_credential_inside_a_longer_text_is_redacted(text):
    # An error message that quotes a header (what a failing tool's ToolResult.error and so the
    # tool span's tool.error often hold) carries the credential as much as a value that is one.
    clean = redact({"tool.error": text})["tool.error"]
    assert "SECRET123" not in clean and "dXNlcjpzay1saXZlLVNFQ1JFVDEyMw" not in clean
    assert REDACTED in clean and clean.split(":")[0] == text.split(":")[0]  # the rest of the message stays


@pytest.mark.parametrize("text", ["the basic usage of the tool", "a Basic plan", "the token was valid"])
def test_ordinary_text_that_mentions_basic_is_kept(text):
    assert redact({"note": text}) == {"note": text}


# outcomes -------------------------------------------------------------------------------
def _run_and_collect(body, store=None):
    """Run ``body(run)`` under a recorder; return (store, trace id, exception raised)."""
    store = store or InMemoryStorage()

    async def scenario():
        handle = None
        try:
            async with TraceRecorder(store).run(SESSION) as run:
                handle = run
                await body(run)
        except BaseException as exc:  # noqa: BLE001 - the test inspects what escaped
            return handle.trace_id, exc
        return handle.trace_id, None

    trace_id, exc = asyncio.run(scenario())
    return store, trace_id, exc


async def _noop(run):
    return None


async def _raises(run):
    async with run.tool("shell") as tool:
        await tool.event("started")
        raise RuntimeError("tool exploded")


async def _budget(run):
    run.set_outcome("budget_exhausted")
    raise BudgetExhausted()


async def _ok_then_raise(run):
    run.set_outcome("ok")
    raise ValueError("late failure")


async def _cancelled(run):
    raise asyncio.CancelledError()


@pytest.mark.parametrize("body, outcome, exc_type", [
    (_noop, "ok", None),
    (_raises, "error", RuntimeError),
    (_budget, "budget_exhausted", BudgetExhausted),
    (_ok_then_raise, "error", ValueError),
    (_cancelled, "cancelled", asyncio.CancelledError),
])
def test_trace_ends_with_its_outcome_whether_the_run_returns_or_raises(body, outcome, exc_type):
    store, trace_id, exc = _run_and_collect(body)
    trace = asyncio.run(store.get_trace(trace_id))
    assert trace.outcome == outcome
    assert trace.ended_at is not None and trace.ended_at >= trace.started_at
    assert type(exc) is exc_type if exc_type else exc is None


def test_a_run_that_raises_reraises_the_same_exception_and_closes_its_spans():
    store, trace_id, exc = _run_and_collect(_raises)
    assert isinstance(exc, RuntimeError) and str(exc) == "tool exploded"
    (span,) = asyncio.run(store.list_spans(trace_id))
    assert span.name == "shell" and span.kind == "tool"
    assert span.end_at is not None and span.end_at >= span.start_at
    assert span.attrs == {"error.type": "RuntimeError"}


# span model -----------------------------------------------------------------------------
async def _full_round(run):
    for attempt in (1, 2):
        async with run.llm_request({"llm.model": "m"}, attempt=attempt) as llm:
            await llm.event("first_token", {"latency_ms": 12})
    async with run.tool("read_file", {"path": "README.md"}) as tool:
        async with tool.approval({"approval.mode": "ask"}) as wait:
            await wait.event("granted")


def _assert_full_round(store, trace_id):
    spans = asyncio.run(store.list_spans(trace_id))
    by_name = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
        assert SPAN_ID.match(span.span_id) and span.end_at is not None
    llm = by_name["llm.request"]
    assert [s.attrs["llm.attempt"] for s in llm] == [1, 2] and {s.kind for s in llm} == {"llm"}
    (tool,) = by_name["read_file"]
    (wait,) = by_name["approval.wait"]
    assert tool.kind == "tool" and tool.parent_id is None and tool.attrs == {"path": "README.md"}
    assert wait.kind == "approval" and wait.parent_id == tool.span_id
    events = asyncio.run(store.list_events(trace_id))
    assert sorted(e.name for e in events) == ["first_token", "first_token", "granted"]
    assert {e.span_id for e in events if e.name == "granted"} == {wait.span_id}
    trace = asyncio.run(store.get_trace(trace_id))
    assert TRACE_ID.match(trace.trace_id) and trace.outcome == "ok"
    assert (trace.session_id, trace.chat_id, trace.user_id) == ("s1", "c1", "u1")


def test_llm_attempts_tools_and_approvals_are_recorded_with_parentage():
    store, trace_id, exc = _run_and_collect(_full_round)
    assert exc is None
    _assert_full_round(store, trace_id)


def test_trace_round_trips_through_sqlite_storage_and_survives_reopen(tmp_path):
    path = tmp_path / "sessions.db"
    store = SqliteStorage(path)
    try:
        _, trace_id, exc = _run_and_collect(_full_round, store)
        assert exc is None
        _assert_full_round(store, trace_id)
        memory_view = (asyncio.run(store.get_trace(trace_id)), asyncio.run(store.list_spans(trace_id)))
    finally:
        asyncio.run(store.close())
    reopened = SqliteStorage(path)
    try:
        _assert_full_round(reopened, trace_id)
        again = (asyncio.run(reopened.get_trace(trace_id)), asyncio.run(reopened.list_spans(trace_id)))
        assert again == memory_view
    finally:
        asyncio.run(reopened.close())


@pytest.mark.parametrize("table", ["traces", "spans", "events"])
def test_a_tampered_trace_row_fails_its_checksum_on_read(tmp_path, table):
    path = tmp_path / "sessions.db"
    store = SqliteStorage(path)
    try:
        _, trace_id, _ = _run_and_collect(_full_round, store)
    finally:
        asyncio.run(store.close())
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {table} SET data = replace(data, '\"', '\" ') WHERE trace_id = ?", (trace_id,))
    conn.commit()
    conn.close()
    reopened = SqliteStorage(path)
    read = {"traces": reopened.get_trace, "spans": reopened.list_spans, "events": reopened.list_events}[table]
    try:
        with pytest.raises(DataIntegrityError):
            asyncio.run(read(trace_id))
    finally:
        asyncio.run(reopened.close())


def test_a_clock_that_steps_back_never_yields_an_end_before_the_start():
    times = iter(["2026-01-01T00:00:05Z", "2026-01-01T00:00:04Z", "2026-01-01T00:00:03Z",
                  "2026-01-01T00:00:02Z"])

    async def scenario():
        store = InMemoryStorage()
        async with TraceRecorder(store, clock=lambda: next(times)).run(SESSION) as run:
            async with run.tool("t"):
                pass
        return store, run.trace_id

    store, trace_id = asyncio.run(scenario())
    (span,) = asyncio.run(store.list_spans(trace_id))
    trace = asyncio.run(store.get_trace(trace_id))
    assert span.end_at == span.start_at == "2026-01-01T00:00:04.000000Z"
    assert trace.ended_at == trace.started_at == "2026-01-01T00:00:05.000000Z"


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_a_lone_surrogate_in_a_span_or_event_is_stored_as_u_fffd(tmp_path, storage):
    # A file name decoded with surrogateescape (an OSError's message, so a failing tool's
    # tool.error) or a tool name or call id the model sent as a "\ud800" escape: no store can
    # encode it, so storing it as is failed the traced turn (an untraced one completes) and left
    # the span open. The recorder stores U+FFFD in its place, as the loop does for the record.
    store = SqliteStorage(tmp_path / "sessions.db") if storage == "sqlite" else InMemoryStorage()
    bad = b"\xff".decode("utf-8", "surrogateescape")

    async def body(run):
        async with run.tool(f"read{bad}", {"path": f"/tmp/{bad}", f"k{bad}": [bad]}) as tool:
            tool.set_attrs({"tool.error": f"tool raised FileNotFoundError: no file {bad}"})
            await tool.event(f"ev{bad}", {"where": bad})

    try:
        _, trace_id, exc = _run_and_collect(body, store)
        assert exc is None
        (span,) = asyncio.run(store.list_spans(trace_id))
        (event,) = asyncio.run(store.list_events(trace_id))
        assert span.end_at is not None and span.name == "read\ufffd"
        assert span.attrs["path"] == "/tmp/\ufffd" and span.attrs["k\ufffd"] == ["\ufffd"]
        assert span.attrs["tool.error"].endswith("no file \ufffd")
        assert (event.name, event.attrs) == ("ev\ufffd", {"where": "\ufffd"})
    finally:
        if storage == "sqlite":
            asyncio.run(store.close())
