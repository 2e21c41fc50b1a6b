"""Salvage and keys: a row is verified only when its key is covered by the checksum; a key
moved by damage is never exported as verified nor rebuilt under the wrong chat; two verified
copies of one key that disagree are a reported collision, never resolved silently."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.salvage import salvage
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from tests.helpers import item, message, run, session, span, trace
from tests.storage.legacy import to_schema_v1

from .conftest import FIXTURES


def _store(db: Path) -> Path:
    store = SqliteStorage(db)
    for chat in ("chat-1", "chat-2"):
        run(store.upsert_session(session(f"s-{chat}", chat=chat)))
        run(store.append_message(message(f"m-{chat}", chat=chat)))
        run(store.append_history(chat, [item(f"{chat} says {i}") for i in range(3)]))
    run(store.upsert_trace(trace("t1", sid="s-chat-1", chat="chat-1")))
    run(store.upsert_trace(trace("t2", sid="s-chat-2", chat="chat-2")))
    run(store.add_span("t1", span("sp1")))
    run(store.close())
    return db


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _history(db: Path) -> list[tuple[str, int, str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT record_id, seq, json_extract(data, '$.message.content') FROM history"
                            " ORDER BY record_id, seq").fetchall()
    finally:
        conn.close()


def _edit(db: Path, sql: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_an_entry_moved_to_another_chat_is_unverified_and_never_rebuilt_there(tmp_path):
    db = _store(tmp_path / "s.db")
    # chat-1 seq 3 now claims to be chat-2 seq 3's place in chat-3: a changed key column, data untouched
    _edit(db, "UPDATE history SET record_id = 'chat-3' WHERE record_id = 'chat-1' AND seq = 3")
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    moved = [r for r in _lines(tmp_path / "out.jsonl") if r["table"] == "history" and r["key"] == ["chat-3", 3]]
    assert [(r["verified"], r["superseded"]) for r in moved] == [(False, False)]
    assert report.exit_code == 1
    assert report.tables["history"].unverified == 1
    assert [f.code for f in report.findings if f.table == "history"] == ["salvage-unverified-rows"]
    assert ("chat-3", 3) not in {(r, s) for r, s, _ in _history(tmp_path / "new.db")}
    assert [u.key for u in report.unplaced] == [["chat-3", 3]]
    assert check(tmp_path / "new.db").findings == []


def test_a_span_moved_to_another_trace_is_unverified(tmp_path):
    db = _store(tmp_path / "s.db")
    _edit(db, "UPDATE spans SET trace_id = 't2' WHERE span_id = 'sp1'")
    report = salvage(db, tmp_path / "out.jsonl")
    (line,) = [r for r in _lines(tmp_path / "out.jsonl") if r["table"] == "spans"]
    assert line["columns"]["trace_id"] == "t2" and not line["verified"]
    assert report.exit_code == 1


def test_the_rebuilt_store_has_current_checksums_and_checks_clean(tmp_path):
    db = _store(tmp_path / "s.db")
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.exit_code == 0 and report.keys_covered and report.schema_version == 2
    assert _history(tmp_path / "new.db") == _history(db)
    assert check(tmp_path / "new.db").findings == []


def test_a_v1_store_is_salvaged_with_its_rule_and_says_its_keys_are_not_covered(tmp_path):
    db = _store(tmp_path / "s.db")
    to_schema_v1(db)
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.schema_version == 1 and not report.keys_covered
    assert all(r["verified"] for r in _lines(tmp_path / "out.jsonl"))
    assert [(f.code, f.severity) for f in report.findings] == [("salvage-keys-not-covered", "warning")]
    assert "upgrades the schema" in report.findings[0].hint
    assert report.exit_code == 0  # nothing was lost; the warning says what cannot be known
    rebuilt = check(tmp_path / "new.db")  # the rebuild writes this build's schema and checksums
    assert rebuilt.findings == [] and rebuilt.schema_version == 2
    assert _history(tmp_path / "new.db") == _history(db)


def test_two_verified_copies_of_one_key_are_a_reported_collision_and_neither_is_rebuilt(tmp_path):
    work = tmp_path / "dup"
    shutil.copytree(FIXTURES / "seq-duplicate", work)  # history without its primary key, seq 2 twice
    db = work / "sessions.db"
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert [(c.table, c.key) for c in report.collisions] == [("history", ["chat-beta", 2])]
    assert report.collisions_total == 1
    codes = {f.code: f for f in report.findings}
    assert codes["salvage-key-collision"].severity == "error" and "chat-beta" in codes["salvage-key-collision"].message
    assert report.exit_code == 1
    copies = [r for r in _lines(tmp_path / "out.jsonl") if r["table"] == "history" and r["key"] == ["chat-beta", 2]]
    assert len(copies) == 2 and all(r["verified"] for r in copies)
    assert len({r["data"] for r in copies}) == 2
    assert ("chat-beta", 2) not in {(r, s) for r, s, _ in _history(tmp_path / "new.db")}
    assert any(u.key == ["chat-beta", 2] and "collision" in u.reason for u in report.unplaced)


def test_a_collision_found_by_the_page_reader_is_reported_too(tmp_path):
    work = tmp_path / "dup"
    shutil.copytree(FIXTURES / "seq-duplicate", work)
    db = work / "sessions.db"
    raw = bytearray(db.read_bytes())
    raw[:16] = b"\0" * 16  # no header: SQLite refuses it, the page reader walks every page
    db.write_bytes(bytes(raw))
    report = salvage(db, tmp_path / "out.jsonl", rebuild=tmp_path / "new.db")
    assert report.method == "page-reader"
    assert ("history", ["chat-beta", 2]) in [(c.table, c.key) for c in report.collisions]
    assert ("chat-beta", 2) not in {(r, s) for r, s, _ in _history(tmp_path / "new.db")}
