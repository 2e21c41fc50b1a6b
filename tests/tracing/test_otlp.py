"""The OTLP/HTTP JSON mapping, parsed strictly with opentelemetry-proto.

A plain ``json_format.Parse`` accepts hex ids (as base64 of the wrong length), string enums
and snake_case keys, so the tests convert hex ids to base64 before parsing and then check id
lengths, integer enums and camelCase keys themselves.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import math
import re
from datetime import datetime, timezone

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from steerable_agent_runtime.models import AgentSession, HarnessTrace, TraceEvent, TraceSpan
from steerable_agent_runtime.tracing.otlp import (
    SPAN_KIND_CLIENT,
    SPAN_KIND_INTERNAL,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    TraceBundle,
    any_value,
    bundle_spans,
    count_spans,
    encode_request,
    export_request,
    root_span_id,
    unix_nanos,
)
from steerable_agent_runtime.storage.memory import InMemoryStorage
from steerable_agent_runtime.tracing import TraceRecorder

ID_FIELDS = ("traceId", "spanId", "parentSpanId")
CAMEL = re.compile(r"^[a-z]+(?:[A-Z][a-z0-9]*)*$")
SESSION = AgentSession(session_id="s1", user_id="u1", chat_id="c1", current_stage="plan", is_active=True,
                       created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z")


# strict parsing helpers -----------------------------------------------------------------
def _hex_ids_to_base64(node):
    """A copy of the request with every hex id field re-encoded as base64 (proto3 JSON)."""
    if isinstance(node, dict):
        return {k: (base64.b64encode(bytes.fromhex(v)).decode() if k in ID_FIELDS else _hex_ids_to_base64(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids_to_base64(item) for item in node]
    return node


def _all_keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _all_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _all_keys(item)


def parse_strict(request: dict) -> ExportTraceServiceRequest:
    """Parse as opentelemetry-proto does, plus the checks a plain parse skips."""
    wire = json.loads(encode_request(request))
    assert all(CAMEL.match(key) for key in _all_keys(wire)), sorted(set(_all_keys(wire)))
    message = json_format.Parse(json.dumps(_hex_ids_to_base64(wire)), ExportTraceServiceRequest())
    for rs_json, rs in zip(wire["resourceSpans"], message.resource_spans):
        for ss_json, ss in zip(rs_json["scopeSpans"], rs.scope_spans):
            for span_json, span in zip(ss_json["spans"], ss.spans):
                _check_span(span_json, span)
    return message


def _check_span(span_json: dict, span) -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", span_json["traceId"]) and len(span.trace_id) == 16
    assert re.fullmatch(r"[0-9a-f]{16}", span_json["spanId"]) and len(span.span_id) == 8
    assert span.trace_id != bytes(16) and span.span_id != bytes(8)
    if "parentSpanId" in span_json:
        assert re.fullmatch(r"[0-9a-f]{16}", span_json["parentSpanId"]) and len(span.parent_span_id) == 8
    assert type(span_json["kind"]) is int and type(span_json["status"]["code"]) is int
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        assert isinstance(span_json[key], str) and span_json[key].isdigit()
    assert span.end_time_unix_nano >= span.start_time_unix_nano
    for event in span_json.get("events", []):
        assert isinstance(event["timeUnixNano"], str) and event["timeUnixNano"].isdigit()


def test_the_strict_checks_catch_what_a_plain_parse_lets_through():
    hex_id = "0af7651916cd43dd8448eb211c80319c"
    raw = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": hex_id, "spanId": "b7ad6b7169203331",
                                                         "name": "x", "kind": "SPAN_KIND_CLIENT"}]}]}]}
    parsed = json_format.Parse(json.dumps(raw), ExportTraceServiceRequest())
    assert len(parsed.resource_spans[0].scope_spans[0].spans[0].trace_id) == 24  # hex read as base64
    assert parsed.resource_spans[0].scope_spans[0].spans[0].kind == SPAN_KIND_CLIENT  # string enum accepted
    snake = {"resource_spans": []}
    json_format.Parse(json.dumps(snake), ExportTraceServiceRequest())  # snake_case accepted
    assert not CAMEL.match("resource_spans")


# fixtures -------------------------------------------------------------------------------
async def _record(store) -> str:
    recorder = TraceRecorder(store)
    try:
        async with recorder.run(SESSION) as run:
            async with run.llm_request({"llm.model": "m", "max_tokens": 256}, attempt=1) as llm:
                await llm.event("first_token", {"latency_ms": 12.5})
            async with run.tool("read_file", {"path": "README.md", "flags": [True, 2, "x"]}) as tool:
                async with tool.approval({"approval.mode": "ask"}) as wait:
                    await wait.event("granted", {"by": {"user": "u1"}})
                raise OSError("disk gone")
    except OSError:
        pass
    return run.trace_id


async def _bundle(store, trace_id) -> TraceBundle:
    return TraceBundle(trace=await store.get_trace(trace_id), spans=await store.list_spans(trace_id),
                       events=await store.list_events(trace_id))


@pytest.fixture
def recorded() -> TraceBundle:
    store = InMemoryStorage()
    trace_id = asyncio.run(_record(store))
    return asyncio.run(_bundle(store, trace_id))


# the mapping ----------------------------------------------------------------------------
def test_recorded_trace_maps_to_a_request_opentelemetry_proto_parses(recorded):
    request = export_request([recorded], service_name="agent-sidecar")
    message = parse_strict(request)
    (rs,) = message.resource_spans
    resource = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
    assert resource == {"service.name": "agent-sidecar"}
    (ss,) = rs.scope_spans
    assert ss.scope.name == "steerable_agent_runtime.tracing"
    assert [s.name for s in ss.spans] == ["agent.run", "llm.request", "read_file", "approval.wait"]
    assert count_spans(request) == 4


def test_ids_parentage_kinds_and_status(recorded):
    spans = {s["name"]: s for s in bundle_spans(recorded)}
    root, llm, tool, wait = (spans[n] for n in ("agent.run", "llm.request", "read_file", "approval.wait"))
    assert "parentSpanId" not in root
    assert root["spanId"] == root_span_id(recorded.trace.trace_id)
    assert llm["parentSpanId"] == tool["parentSpanId"] == root["spanId"]
    assert wait["parentSpanId"] == tool["spanId"]
    assert {s["traceId"] for s in spans.values()} == {recorded.trace.trace_id}
    assert (llm["kind"], tool["kind"], wait["kind"], root["kind"]) == (
        SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL, SPAN_KIND_INTERNAL, SPAN_KIND_INTERNAL)
    assert tool["status"] == {"code": STATUS_ERROR, "message": "OSError"}
    assert llm["status"] == {"code": STATUS_UNSET}
    assert root["status"]["code"] == STATUS_ERROR


def test_root_span_carries_run_identity_and_outcome(recorded):
    root = bundle_spans(recorded)[0]
    attrs = {kv["key"]: kv["value"] for kv in root["attributes"]}
    assert attrs["session.id"] == {"stringValue": "s1"}
    assert attrs["steerable.chat_id"] == {"stringValue": "c1"}
    assert attrs["user.id"] == {"stringValue": "u1"}
    assert attrs["steerable.outcome"] == {"stringValue": "error"}
    ok = recorded.model_copy(update={"trace": recorded.trace.model_copy(update={"outcome": "ok"})})
    assert bundle_spans(ok)[0]["status"] == {"code": STATUS_OK}


def test_events_are_attached_to_their_spans_with_typed_attributes(recorded):
    message = parse_strict(export_request([recorded]))
    spans = {s.name: s for s in message.resource_spans[0].scope_spans[0].spans}
    (first,) = spans["llm.request"].events
    assert first.name == "first_token" and first.attributes[0].value.double_value == 12.5
    (granted,) = spans["approval.wait"].events
    by = granted.attributes[0].value.kvlist_value.values[0]
    assert (by.key, by.value.string_value) == ("user", "u1")
    flags = {kv.key: kv.value for kv in spans["read_file"].attributes}["flags"].array_value.values
    assert (flags[0].bool_value, flags[1].int_value, flags[2].string_value) == (True, 2, "x")


def test_times_are_exact_decimal_nanoseconds():
    assert unix_nanos("1970-01-01T00:00:00Z") == "0"
    assert unix_nanos("2026-01-02T03:04:05.123456Z") == str(
        int(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()) * 10**9 + 123_456_000)
    assert unix_nanos("2026-01-02T04:04:05.000001+01:00") == unix_nanos("2026-01-02T03:04:05.000001Z")


@pytest.mark.parametrize("value, expected", [
    (True, {"boolValue": True}),
    (False, {"boolValue": False}),
    (0, {"intValue": "0"}),
    (2**63 - 1, {"intValue": str(2**63 - 1)}),
    (-(2**63), {"intValue": str(-(2**63))}),
    (2**63, {"stringValue": str(2**63)}),
    (1.5, {"doubleValue": 1.5}),
    (float("nan"), {"doubleValue": "NaN"}),
    (float("inf"), {"doubleValue": "Infinity"}),
    (float("-inf"), {"doubleValue": "-Infinity"}),
    ("s", {"stringValue": "s"}),
    (b"\x00\x01", {"bytesValue": "AAE="}),
    ([1, "a"], {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "a"}]}}),
    ({"k": False}, {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}),
])
def test_any_value_is_typed(value, expected):
    assert any_value(value) == expected


def test_every_any_value_kind_survives_a_strict_parse():
    attrs = {"b": True, "i": -7, "big": 2**64, "nan": float("nan"), "inf": float("inf"), "d": 0.25,
             "l": [1, [2, {"x": None}]], "m": {"deep": {"deeper": [False]}}, "none": None}
    trace = HarnessTrace(trace_id="ab" * 16, session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:01Z", outcome="ok")
    span = TraceSpan(span_id="cd" * 8, name="t", start_at="2026-01-01T00:00:00Z",
                     end_at="2026-01-01T00:00:01Z", attrs=attrs, kind="tool")
    message = parse_strict(export_request([TraceBundle(trace=trace, spans=[span])]))
    got = {kv.key: kv.value for kv in message.resource_spans[0].scope_spans[0].spans[1].attributes}
    assert got["b"].bool_value is True and got["i"].int_value == -7
    assert got["big"].string_value == str(2**64)
    assert math.isnan(got["nan"].double_value) and got["inf"].double_value == math.inf
    assert got["m"].kvlist_value.values[0].value.kvlist_value.values[0].key == "deeper"
    assert "none" not in got


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12)


@given(st.dictionaries(st.text(max_size=10), JSON_LIKE, max_size=6))
def test_any_attrs_map_to_a_request_that_parses_strictly(attrs):
    trace = HarnessTrace(trace_id="ab" * 16, session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:00Z")
    span = TraceSpan(span_id="cd" * 8, name="t", start_at="2026-01-01T00:00:00Z", attrs=attrs, kind="llm")
    event = TraceEvent(event_id="e", span_id="cd" * 8, name="ev", at="2026-01-01T00:00:01Z", attrs=attrs)
    message = parse_strict(export_request([TraceBundle(trace=trace, spans=[span], events=[event])]))
    llm = message.resource_spans[0].scope_spans[0].spans[1]
    expected = {k for k, v in attrs.items() if v is not None} | {"steerable.span.kind", "steerable.span.open"}
    assert {kv.key for kv in llm.attributes} == expected


def test_times_before_the_epoch_clamp_to_zero():
    assert unix_nanos("1969-12-31T23:59:59Z") == "0"


def test_times_past_the_fixed64_range_clamp_to_its_maximum():
    """Nanoseconds since 1970 overflow the unsigned 64-bit field in July 2554; a stored time
    after that (a clock set wrong, a fixture) must not make the collector refuse the request."""
    assert unix_nanos("9999-12-31T23:59:59.999999Z") == str(2**64 - 1)
    assert int(unix_nanos("2554-07-21T23:34:33Z")) < 2**64
    late = "3000-01-01T00:00:00Z"
    trace = HarnessTrace(trace_id="ab" * 16, session_id="s", chat_id="c", user_id="u", started_at=late)
    span = TraceSpan(span_id="cd" * 8, name="t", start_at=late, kind="llm")
    event = TraceEvent(event_id="e", span_id="cd" * 8, name="ev", at="9999-01-01T00:00:00Z")
    message = parse_strict(export_request([TraceBundle(trace=trace, spans=[span], events=[event])]))
    assert message.resource_spans[0].scope_spans[0].spans[1].events[0].time_unix_nano == 2**64 - 1


def test_invalid_stored_ids_get_stable_valid_ids_and_keep_the_original():
    trace = HarnessTrace(trace_id="trace-1", session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:00Z")
    parent = TraceSpan(span_id="tool-A", name="shell", start_at="2026-01-01T00:00:01Z", kind="tool")
    child = TraceSpan(span_id="wait-B", name="approval.wait", start_at="2026-01-01T00:00:02Z",
                      parent_id="tool-A", kind="approval")
    event = TraceEvent(event_id="e", span_id="gone", name="lost", at="2026-01-01T00:00:03Z")
    bundle = TraceBundle(trace=trace, spans=[parent, child], events=[event])
    first, second = export_request([bundle]), export_request([copy.deepcopy(bundle)])
    assert first == second
    parse_strict(first)
    root, shell, wait = first["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert wait["parentSpanId"] == shell["spanId"]
    assert {"key": "steerable.span_id", "value": {"stringValue": "tool-A"}} in shell["attributes"]
    assert {"key": "steerable.trace_id", "value": {"stringValue": "trace-1"}} in root["attributes"]
    assert [e["name"] for e in root["events"]] == ["lost"]  # orphan event kept on the root


def test_an_open_trace_and_open_span_end_at_the_latest_recorded_time():
    trace = HarnessTrace(trace_id="12" * 16, session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:00Z")
    span = TraceSpan(span_id="34" * 8, name="llm.request", start_at="2026-01-01T00:00:02Z", kind="llm")
    event = TraceEvent(event_id="e1", span_id="34" * 8, name="chunk", at="2026-01-01T00:00:07Z")
    root, llm = bundle_spans(TraceBundle(trace=trace, spans=[span], events=[event]))
    assert root["endTimeUnixNano"] == llm["endTimeUnixNano"] == unix_nanos("2026-01-01T00:00:07Z")
    assert {"key": "steerable.span.open", "value": {"boolValue": True}} in llm["attributes"]
    assert {"key": "steerable.trace.open", "value": {"boolValue": True}} in root["attributes"]
    assert "steerable.outcome" not in {kv["key"] for kv in root["attributes"]}


def test_encoded_request_is_strict_json():
    body = encode_request(export_request([]))
    assert json.loads(body) == {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "steerable-agent-runtime"}}]},
        "scopeSpans": [{"scope": {"name": "steerable_agent_runtime.tracing"}, "spans": []}]}]}
    with pytest.raises(ValueError):
        encode_request({"x": float("nan")})


def test_a_stored_end_before_its_start_never_gives_a_negative_duration():
    # The recorder never writes one (its clock is clamped), but rows another writer stored
    # through the StorageAdapter, or copied in, can hold one; a collector reads a negative
    # duration as a huge unsigned one (Jaeger: end - start in uint64).
    trace = HarnessTrace(trace_id="ab" * 16, session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:05Z", ended_at="2026-01-01T00:00:01Z", outcome="ok")
    span = TraceSpan(span_id="cd" * 8, name="t", start_at="2026-01-01T00:00:03Z",
                     end_at="2026-01-01T00:00:02.5Z", kind="tool")
    request = export_request([TraceBundle(trace=trace, spans=[span])])
    parse_strict(request)  # asserts end >= start for every span
    root, tool = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert root["endTimeUnixNano"] == root["startTimeUnixNano"] == unix_nanos("2026-01-01T00:00:05Z")
    assert tool["endTimeUnixNano"] == tool["startTimeUnixNano"] == unix_nanos("2026-01-01T00:00:03Z")
