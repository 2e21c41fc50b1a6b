"""A stored lone surrogate (issue 16 item 5): a text value holding an unpaired UTF-16 surrogate,
written by another SQLite client either as the raw bytes ``ed a0 80`` in a TEXT column (not
valid UTF-8) or as the JSON escape ``"\\ud800"`` in a row's data (valid UTF-8, an invalid
character once decoded). Every read command gives exit 0 or 1 with its report (stdout valid
UTF-8, ``--json`` valid JSON), or exit 3 with one Error line and one Hint line: never a
traceback, never exit 4. The store is never changed.

The stores are built with stdlib sqlite3 from the healthy fixture; each changed row gets the
checksum of its new bytes (so it is not reported as silent corruption, as another client
that computed it would leave it). The commands run in their own child processes."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from steerable_agent_runtime.storage.checksum import IDENTITY, row_crc
from tests.cliproc import assert_refused, forked_many

HEALTHY = Path(__file__).resolve().parents[2] / "fixtures" / "healthy" / "sessions.db"
RAW = b"\xed\xa0\x80"  # U+D800 as CESU-8 / "surrogatepass" bytes: not valid UTF-8
ESCAPED = b"\\ud800"  # the JSON escape of U+D800 (ASCII)

STORES = {
    # name: (table, column, where, what goes in)
    "message-content-json": ("messages", "data", "id = 'm-alpha-1'", ESCAPED),
    "message-content-raw": ("messages", "data", "id = 'm-alpha-1'", RAW),
    "history-content-json": ("history", "data", "record_id = 'chat-alpha' AND seq = 1", ESCAPED),
    "history-content-raw": ("history", "data", "record_id = 'chat-alpha' AND seq = 1", RAW),
    "span-name-json": ("spans", "data", "span_id = 'sp-llm-1'", ESCAPED),
    "span-name-raw": ("spans", "data", "span_id = 'sp-llm-1'", RAW),
    "message-chat-raw": ("messages", "chat_id", "id = 'm-alpha-1'", RAW),
    "history-record-raw": ("history", "record_id", "record_id = 'chat-alpha' AND seq = 2", RAW),
    "session-user-raw": ("sessions", "user_id", "session_id = 's-alpha-1'", RAW),
}

COMMANDS = {
    "check": ["check", "{db}"],
    "check-json": ["check", "{db}", "--json"],
    "inspect": ["inspect", "{db}"],
    "inspect-json": ["inspect", "{db}", "--json"],
    "history": ["history", "{db}", "chat-alpha"],
    "history-json": ["history", "{db}", "chat-alpha", "--json"],
    "history-resume": ["history", "{db}", "chat-alpha", "--resume"],
    "search": ["search", "{db}", "invoice"],
    "search-json": ["search", "{db}", "invoice", "--json"],
    "archive": ["archive", "{db}", "--to", "{dir}/archive.db", "--older-than", "1d", "--include-active"],
    "archive-dry-run": ["archive", "{db}", "--to", "{dir}/archive.db", "--older-than", "1d", "--dry-run"],
    "traces": ["traces", "{db}", "--out", "{dir}/traces.json"],
    "salvage": ["salvage", "{db}", "--out", "{dir}/rows.jsonl"],
}


def build(db: Path, table: str, column: str, where: str, inserted: bytes) -> None:
    """Copy the healthy fixture to ``db`` and put ``inserted`` into one value: inside the
    first text of a JSON ``data`` (the content, or a span's name), or at the end of a column."""
    shutil.copyfile(HEALTHY, db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.text_factory = bytes
    names = [row[1].decode() for row in conn.execute(f"PRAGMA table_info({table})")]
    rowid, *values = conn.execute(f"SELECT rowid, * FROM {table} WHERE {where}").fetchone()
    row = dict(zip(names, values))
    old = row[column]
    if column == "data":
        marker = next(m for m in (b'"content":"', b'"name":"') if m in old)
        at = old.index(marker) + len(marker)
        row[column] = old[:at] + inserted + old[at:]
    else:
        row[column] = old + inserted
    crc = row_crc(table, [row[k] for k in IDENTITY[table]], row["data"])
    conn.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT), crc = ? WHERE rowid = ?", (row[column], crc, rowid))
    stored = conn.execute(f"SELECT CAST({column} AS BLOB) FROM {table} WHERE rowid = ?", (rowid,)).fetchone()[0]
    assert inserted in stored  # the value holds exactly the bytes meant
    conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("surrogates")
    cases, stores = {}, {}
    for store, spec in STORES.items():
        for name, argv in COMMANDS.items():
            folder = root / f"{store}-{name}"
            folder.mkdir()
            db = folder / "sessions.db"
            build(db, *spec)
            stores[(store, name)] = (db, digest(db))
            cases[(store, name)] = [a.format(db=db, dir=folder) for a in argv]
    results = forked_many({f"{s}/{n}": argv for (s, n), argv in cases.items()}, timeout=120)
    return {key: (results[f"{key[0]}/{key[1]}"], *stores[key]) for key in cases}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("store", list(STORES))
def test_a_stored_lone_surrogate_is_a_report_or_one_error_line(ran, store, command):
    result, db, before = ran[(store, command)]
    assert result.code is not None, result.describe()
    assert result.code in (0, 1, 3), result.describe()
    assert "Traceback" not in result.err and "internal error" not in result.err, result.describe()
    if result.code == 3:
        assert_refused(result, 3)
    else:
        text = result.stdout.decode("utf-8")  # valid UTF-8: an unencodable character is escaped
        if command.endswith("-json"):
            json.loads(text)
    if command != "archive" or result.code != 0:
        assert digest(db) == before, result.describe()


def test_the_escaped_value_is_shown_as_stored(ran):
    # The history entry holds U+D800: the human view and the JSON report both show it as \ud800.
    human, _db, _ = ran[("history-content-json", "history")]
    assert human.code == 0 and "\\ud800" in human.out, human.describe()
    report, _db, _ = ran[("history-content-json", "history-json")]
    entry = json.loads(report.out)["entries"][0]["entry"]
    assert entry["messages"][0]["content"].startswith("\ud800"), report.describe()


def test_a_key_that_is_not_utf8_stops_archive_before_it_moves_anything(ran):
    for store in ("message-chat-raw", "history-record-raw"):
        result, db, before = ran[(store, "archive")]
        assert_refused(result, 3)
        assert "not valid UTF-8" in result.err and digest(db) == before


def test_traces_says_the_span_does_not_parse_not_that_its_bytes_are_corrupt(ran):
    # The raw bytes still meet their checksum (traces checks the stored bytes, not their decoding).
    for store in ("span-name-raw", "span-name-json"):
        result, _db, _ = ran[(store, "traces")]
        assert_refused(result, 3)
        assert "does not parse" in result.err and "checksum" not in result.err, result.describe()
