"""A role, entry type or trigger that is a JSON list or object (unhashable in Python) is bad
input, never a TypeError.

The fast paths test ``role in CHAT_ROLES`` (a frozenset); ``[] in frozenset()`` raises
TypeError. Appending such an entry is a RecordFormatError; reading a stored one fails closed
with RecordFormatError; check reports it as a finding and exits 1 (the store is unchanged).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from steerable_agent_runtime import RecordFormatError, SqliteStorage
from steerable_agent_runtime.history_append import prepare_append
from steerable_agent_runtime.storage.checksum import row_crc

from tests.cliproc import cli
from tests.helpers import message, run

BAD_ROLES = [["user"], {"role": "user"}]


@pytest.mark.parametrize("role", BAD_ROLES)
def test_appending_an_item_whose_role_is_not_text_is_a_record_format_error(role):
    for entry in ({"type": "item", "message": {"role": role, "content": "x"}},
                  {"type": "item", "at": "2026-01-01T00:00:00.000000Z", "message": {"role": role, "content": "x"}}):
        with pytest.raises(RecordFormatError):
            prepare_append("r", [entry], 1)


def _rewrite(db, table, key_column, key, data):
    conn = sqlite3.connect(db)
    with conn:
        if table == "history":
            crc = row_crc("history", (key, 1), data)
            conn.execute("UPDATE history SET data = ?, crc = ? WHERE record_id = ? AND seq = 1", (data, crc, key))
        else:
            crc = row_crc(table, (key,), data)
            conn.execute(f"UPDATE {table} SET data = ?, crc = ? WHERE {key_column} = ?", (data, crc, key))
    conn.close()


def _digest(db):
    return hashlib.sha256(db.read_bytes()).hexdigest()


def _role(entry, bad):
    entry["message"]["role"] = bad


def _type(entry, bad):
    entry["type"] = bad


def _trigger(entry, bad):
    entry.update(type="compaction_boundary", trigger=bad, preTokens=10, postTokens=5,
                 replacement=[entry.pop("message")])


@pytest.mark.parametrize("change", [_role, _type, _trigger])
@pytest.mark.parametrize("bad", BAD_ROLES)
def test_a_stored_entry_holding_a_list_or_object_where_text_belongs_fails_closed_and_check_reports_it(
        tmp_path, change, bad):
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    entry = run(store.append_history("c1", [{"type": "item", "message": {"role": "user", "content": "hi"}}]))[0]
    run(store.close())
    change(entry, bad)
    _rewrite(db, "history", "record_id", "c1", json.dumps(entry, separators=(",", ":")))
    store = SqliteStorage(db)
    with pytest.raises(RecordFormatError):
        run(store.list_history("c1"))
    run(store.close())
    before = _digest(db)
    ran = cli(["check", db])
    assert ran.code == 1, ran.describe()
    assert "Traceback" not in ran.err and "row-invalid" in ran.out, ran.describe()
    assert _digest(db) == before


@pytest.mark.parametrize("role", BAD_ROLES)
def test_a_stored_chat_message_whose_role_is_not_text_is_a_check_finding(tmp_path, role):
    db = tmp_path / "s.db"
    store = SqliteStorage(db)
    stored = message("m1", chat="c1")
    run(store.append_message(stored))
    run(store.close())
    wire = stored.to_wire() if hasattr(stored, "to_wire") else stored.model_dump(mode="json", by_alias=True)
    wire["role"] = role
    _rewrite(db, "messages", "id", "m1", json.dumps(wire, separators=(",", ":")))
    ran = cli(["check", db])
    assert ran.code == 1, ran.describe()
    assert "Traceback" not in ran.err and "row-invalid" in ran.out, ran.describe()
