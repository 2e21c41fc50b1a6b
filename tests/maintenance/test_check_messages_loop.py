"""check's own loop for ``messages`` (rows.py ``_scan_messages``) reports exactly what the general
per-row check reports, row by row, on rows damaged in every way its inline test looks at: the
checksum, the JSON, each of id / chatId / createdAt against its column, the column types, the
content and the role (unhashable too), a non-object, extra or missing fields."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable_agent_runtime.maintenance.check.rows import _EntityRow, _scan_messages, scan_entities
from steerable_agent_runtime.maintenance.codes import FindingLog
from steerable_agent_runtime.storage.checksum import row_checker, row_crc
from steerable_agent_runtime.storage.schema import SCHEMA_VERSION, TABLES

SPEC = TABLES["messages"]
TEXT = st.text(max_size=6)
JSON_ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                     TEXT, st.lists(st.integers(), max_size=2), st.dictionaries(TEXT, st.integers(), max_size=1))
"""What damage or an old build can leave in the data where text belongs."""
ODD = st.one_of(JSON_ODD, st.binary(max_size=4))
"""And in a column (bytes too)."""


@st.composite
def rows(draw) -> tuple:
    key, chat, at = draw(TEXT), draw(TEXT), draw(TEXT)
    obj = {"id": key, "chatId": chat, "role": draw(st.sampled_from(["user", "assistant", "tool", "system"])),
           "content": draw(TEXT), "createdAt": at}
    for field in draw(st.lists(st.sampled_from(sorted(obj)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del obj[field]
        else:
            obj[field] = draw(JSON_ODD)
    data = json.dumps(obj if draw(st.integers(0, 9)) else draw(JSON_ODD)).encode()
    if not draw(st.integers(0, 9)):
        data = data[: draw(st.integers(0, len(data)))]  # cut: not JSON
    columns = [key, chat, at]
    for index in draw(st.lists(st.integers(0, 2), max_size=2, unique=True)):
        columns[index] = draw(ODD)  # a column that disagrees with the data, or is not text
    crc = row_crc("messages", [columns[0]], data) if isinstance(columns[0], (str, bytes, int)) else 0
    crc = crc if draw(st.integers(0, 9)) else draw(st.integers(0, 2**32 - 1))
    data = data if draw(st.integers(0, 19)) else None
    return (data, crc, *columns)


def _findings(log: FindingLog) -> tuple:
    return log.counts, [f.model_dump() for f in log.findings]


@settings(max_examples=300, deadline=None)
@given(st.lists(rows(), max_size=30))
def test_the_messages_loop_reports_what_the_general_check_reports(batch):
    ok = row_checker("messages", SCHEMA_VERSION)
    fast, general = FindingLog(100), FindingLog(100)
    fast_row = _EntityRow(SPEC, fast, ok)
    assert fast_row.messages_loop and fast_row.selected == ["id", "chat_id", "created_at"]
    assert _scan_messages(iter(batch), fast_row, lambda n: None) == len(batch)
    slow_row = _EntityRow(SPEC, general, row_checker("messages", SCHEMA_VERSION))
    for whole in batch:
        slow_row.check(whole)
    assert _findings(fast) == _findings(general)


def test_a_store_of_plain_messages_passes_the_loop_without_findings(tmp_path):
    """The usual row takes the inline path and is counted (the property test above holds the
    findings; this one that the loop is the one scan_entities runs on a real table)."""
    import sqlite3

    from steerable_agent_runtime.storage.schema import DDL, _statements

    conn = sqlite3.connect(tmp_path / "m.db")
    for statement in _statements(DDL):
        if "messages" in statement and "fts" not in statement.lower() and "TRIGGER" not in statement:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    good = []
    for n in range(50):
        obj = {"id": f"m{n}", "chatId": "c", "role": "user", "content": f"hi {n}", "createdAt": "2026-01-01T00:00:00Z"}
        data = json.dumps(obj)
        good.append((obj["id"], "c", obj["createdAt"], data, row_crc("messages", [obj["id"]], data)))
    columns = [row[1] for row in conn.execute("PRAGMA table_info(messages)")]
    values = {name: index for index, name in enumerate(["id", "chat_id", "created_at", "data", "crc"])}
    conn.executemany(f"INSERT INTO messages ({', '.join(values)}) VALUES (?, ?, ?, ?, ?)", good)
    conn.execute("UPDATE messages SET data = replace(data, 'hi 7', 'hi 8') WHERE id = 'm7'")  # one damaged row
    conn.commit()
    assert set(values) <= set(columns)
    log = FindingLog(20)
    assert scan_entities(conn, SPEC, log, lambda n: None) == 50
    assert log.counts == {"row-checksum-mismatch": 1} and "'m7'" in log.findings[0].message
