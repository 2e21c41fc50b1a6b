"""check's batched loop for sessions, traces, spans and events (rows.py ``_entity_batches``:
the checksum over a fetched batch, the shape tested by one pydantic-core validator call per
row, commonrows.COMMON) reports exactly what the general per-row check reports, on rows
damaged in every way that check looks at, cut into batches anywhere; and the validators
accept only what the shape tests accept, returning the columns' fields as parsed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import from_json

from steerable_agent_runtime.maintenance.check.commonrows import COMMON
from steerable_agent_runtime.maintenance.check.rows import _EntityRow, _entity_batches, scan_entities
from steerable_agent_runtime.maintenance.check.shapes import SHAPES
from steerable_agent_runtime.maintenance.codes import FindingLog
from steerable_agent_runtime.storage.checksum import IDENTITY, batch_checker, row_checker, row_crc
from steerable_agent_runtime.storage.schema import SCHEMA_VERSION, TABLES
from tests.helpers import event, session, span, trace
from tests.maintenance.test_check_commonrows import _batches, _findings

ENTITY_TABLES = ["sessions", "traces", "spans", "events"]
TEXT = st.text(max_size=4)
AT = "2026-01-01T00:00:00.000000Z"
NEAR = st.sampled_from([None, 0, 1, True, False, 1.0, 0.5, "true", "1", "ok", "error", "x", AT, [], {}])
"""Values one step from a field's (a boolean's JSON neighbours, an outcome's, text's)."""
ODD = st.one_of(NEAR, st.integers(-3, 3), TEXT, st.lists(st.integers(), max_size=2),
                st.dictionaries(TEXT, st.integers(), max_size=1))
"""What damage or an old build can leave where a field's value belongs."""
COLUMN_ODD = st.one_of(ODD.filter(lambda v: not isinstance(v, (list, dict))), st.binary(max_size=4))
"""And in a column (SQLite gives None, int, float, str or bytes)."""

_FIELDS = {
    "sessions": {"sessionId": "s1", "userId": "u1", "chatId": "c1", "currentStage": "PLANNING", "isActive": True,
                 "createdAt": AT, "updatedAt": AT},
    "traces": {"traceId": "t1", "sessionId": "s1", "chatId": "c1", "userId": "u1", "startedAt": AT, "outcome": "ok"},
    "spans": {"spanId": "p1", "name": "llm.request", "startAt": AT, "parentId": "p0", "attrs": {"model": "m"}},
    "events": {"eventId": "e1", "spanId": "p1", "name": "first_token", "at": AT},
}
"""A row of each table whose shape passes (and fields no column duplicates: attrs)."""


@st.composite
def entity_rows(draw, table: str) -> tuple:
    """A fetched row ``(data, crc, *selected)`` of ``table``, mostly common, often damaged."""
    obj = dict(_FIELDS[table])
    for field in obj:
        if type(obj[field]) is str and not draw(st.integers(0, 2)):
            obj[field] = draw(TEXT)  # other text: still the shape
    if draw(st.booleans()):
        for field in draw(st.lists(st.sampled_from([*obj, "extra"]), min_size=1, max_size=3, unique=True)):
            if draw(st.booleans()):
                obj.pop(field, None)
            else:
                obj[field] = draw(ODD)
    text = json.dumps(obj if draw(st.integers(0, 19)) else draw(ODD))
    if text.startswith("{") and not draw(st.integers(0, 5)):  # a key repeated at the end
        key = draw(st.sampled_from(sorted(_FIELDS[table])))
        text = text[:-1] + ("," if len(text) > 2 else "") + json.dumps(key) + ":" + json.dumps(draw(ODD)) + "}"
    data = text.encode()
    if not draw(st.integers(0, 19)):
        data = data[: draw(st.integers(0, len(data)))]  # cut: not JSON
    spec = TABLES[table]
    row = _EntityRow(spec, FindingLog(1), row_checker(table, SCHEMA_VERSION))
    parsed = json.loads(text) if text.startswith("{") else {}
    values = {column: parsed.get(field) if field else draw(TEXT) for column, field in spec.columns.items()}
    values = {column: value if not isinstance(value, (list, dict)) else None for column, value in values.items()}
    selected = [values[column] for column in row.selected]
    if not draw(st.integers(0, 2)):
        selected[draw(st.integers(0, len(selected) - 1))] = draw(COLUMN_ODD)  # a column that disagrees
    at = {column: index for index, column in enumerate(row.selected)}
    identity = [selected[at[column]] for column in IDENTITY[table]]
    crc = row_crc(table, identity, data) if draw(st.integers(0, 9)) else draw(st.integers(0, 2**32 - 1))
    return (data if draw(st.integers(0, 19)) else None, crc, *selected)


@st.composite
def tables_and_rows(draw) -> tuple[str, list[tuple]]:
    table = draw(st.sampled_from(ENTITY_TABLES))
    return table, draw(st.lists(entity_rows(table), min_size=1, max_size=30))


@settings(max_examples=400, deadline=None)
@given(tables_and_rows(), st.lists(st.integers(0, 9), max_size=5))
def test_the_batched_entity_loop_reports_what_the_general_check_reports(table_rows, cuts):
    table, rows = table_rows
    spec = TABLES[table]
    batched, general = FindingLog(100), FindingLog(100)
    row = _EntityRow(spec, batched, row_checker(table, SCHEMA_VERSION))
    identity = (row.first_at,) if row.single else (row.first_at, row.second_at)
    check = batch_checker(table, SCHEMA_VERSION, identity, 0, 1)
    assert _entity_batches(_batches(rows, cuts), check, row, COMMON[table], lambda n: None) == len(rows)
    slow = _EntityRow(spec, general, row_checker(table, SCHEMA_VERSION))
    for whole in rows:
        slow.check(whole)
    assert _findings(batched) == _findings(general)


@st.composite
def entity_texts(draw) -> tuple[str, bytes]:
    table = draw(st.sampled_from(ENTITY_TABLES))
    data = draw(entity_rows(table))[0]
    return table, data if data is not None else json.dumps(draw(ODD)).encode()


@settings(max_examples=400, deadline=None)
@given(entity_texts())
def test_each_validator_accepts_only_what_its_shape_test_accepts(table_text):
    table, data = table_text
    try:
        obj = COMMON[table](data)
    except ValueError:
        return
    parsed = from_json(data, cache_strings="keys")
    assert type(parsed) is dict and SHAPES[table](parsed) is None
    for field in filter(None, TABLES[table].columns.values()):
        assert (field in obj) is (field in parsed)
        assert type(obj.get(field)) is type(parsed.get(field)) and obj.get(field) == parsed.get(field)


@pytest.mark.parametrize("entity", [session("s1"), trace("t1"), span("p1"), span("p2", parent="p1"),
                                    event("e1", "p1")], ids=["session", "trace", "span", "child-span", "event"])
def test_the_validators_pass_the_rows_a_store_holds(entity):
    """The fast path is taken for what the runtime writes (the store's own JSON of a model)."""
    table = {"AgentSession": "sessions", "HarnessTrace": "traces", "TraceSpan": "spans",
             "TraceEvent": "events"}[type(entity).__name__]
    data = entity.model_dump_json(by_alias=True, exclude_none=True).encode()
    obj = COMMON[table](data)
    assert all(obj.get(f) == json.loads(data).get(f) for f in filter(None, TABLES[table].columns.values()))


@pytest.mark.parametrize("table", ENTITY_TABLES)
def test_a_store_of_plain_rows_passes_the_batched_loop_without_findings(tmp_path, table):
    """scan_entities takes the batched loop on a real table (its rows counted, none found wrong)."""
    import asyncio

    from steerable_agent_runtime.storage.sqlite import SqliteStorage

    async def fill() -> None:
        store = SqliteStorage(tmp_path / "s.db")
        try:
            for n in range(40):
                await store.upsert_session(session(f"s{n}"))
                await store.upsert_trace(trace(f"t{n}", sid=f"s{n}"))
                await store.add_span(f"t{n}", span(f"p{n}", parent=f"p{n - 1}" if n % 2 else None))
                await store.add_event(f"t{n}", event(f"e{n}", f"p{n}"))
        finally:
            await store.close()

    asyncio.run(fill())
    import sqlite3

    conn = sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True, isolation_level=None)
    log = FindingLog(10)
    assert scan_entities(conn, TABLES[table], log, lambda n: None, batched=True) == 40 and not log.counts
    conn.close()


_NEAR_VALUES = [None, 0, 1, True, False, 1.0, 0.5, "true", "1", "ok", "error", "x", AT, [], {}]
_GONE = object()


def _one_step_rows(table: str) -> list[tuple]:
    """The table's common row, then each field of it set to each near value or removed, each
    also as a repeated key; each with its columns as the data says, or one column changed."""
    spec, base = TABLES[table], _FIELDS[table]
    row = _EntityRow(spec, FindingLog(1), row_checker(table, SCHEMA_VERSION))
    texts = [json.dumps(base)]
    for field in [*base, "extra"]:
        for value in [*_NEAR_VALUES, _GONE]:
            changed = {k: v for k, v in base.items() if not (k == field and value is _GONE)}
            if value is not _GONE:
                changed[field] = value
                texts.append(json.dumps(base)[:-1] + f", {json.dumps(field)}: {json.dumps(value)}}}")
            texts.append(json.dumps(changed))
    rows = []
    for text in texts:
        parsed = json.loads(text)
        values = {column: parsed.get(field, None) if field else "t1" for column, field in spec.columns.items()}
        selected = [values[c] if not isinstance(values[c], (list, dict)) else None for c in row.selected]
        variants = [selected] + [[*selected[:i], other, *selected[i + 1:]]
                                 for i in range(len(selected)) for other in (None, 1, True, "x", b"x")]
        for columns in variants:
            data = text.encode()
            identity = [columns[row.selected.index(c)] for c in IDENTITY[table]]
            rows.append((data, row_crc(table, identity, data), *columns))
    return rows


@pytest.mark.parametrize("table", ENTITY_TABLES)
def test_one_step_from_a_common_row_the_loops_and_the_validator_agree(table):
    rows = _one_step_rows(table)
    assert len(rows) > 2000
    spec, batched, general = TABLES[table], FindingLog(100_000), FindingLog(100_000)
    row = _EntityRow(spec, batched, row_checker(table, SCHEMA_VERSION))
    identity = (row.first_at,) if row.single else (row.first_at, row.second_at)
    _entity_batches(_batches(rows, [128] * (len(rows) // 128)), batch_checker(table, SCHEMA_VERSION, identity, 0, 1),
                    row, COMMON[table], lambda n: None)
    slow = _EntityRow(spec, general, row_checker(table, SCHEMA_VERSION))
    for whole in rows:
        slow.check(whole)
    assert _findings(batched) == _findings(general)
    assert sum(general.counts.values()) > 500  # most of them are findings
    for data in dict.fromkeys(r[0] for r in rows):
        test_each_validator_accepts_only_what_its_shape_test_accepts.hypothesis.inner_test((table, data))
