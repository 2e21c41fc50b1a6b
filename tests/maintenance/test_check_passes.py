"""check's per-record and orphan passes against the statements they replaced (the oracle).

check answers seq contiguity by seeking from one record id to the next (a count over each
record's range of the key index, two seeks for its first and last seq; one GROUP BY count
when the walk cannot answer), and the orphan question of a child table with many rows per parent by
seeking from one distinct value to the next (records.py, orphans.py). These tests hold both
to the plain statements check ran before, on stores whose key columns hold what damage can
put there: NULL in a NOT NULL column, a number where text belongs, a fraction, text or bytes
where a seq belongs. Those are written with the columns' types and NOT NULL taken away for
the insert (``writable_schema``), then given back, so SQLite plans the reads against the real
schema (it assumes, for one, that a NOT NULL column holds no NULL).
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.check.orphans import ORPHANS, missing_parents
from steerable_agent_runtime.maintenance.check.records import _walk, check_contiguity
from steerable_agent_runtime.maintenance.codes import FindingLog
from steerable_agent_runtime.storage.schema import DDL, _statements

from .storemaker import ChatSpec, make_store


def _ddl(tables: set[str]) -> list[str]:
    """The real CREATE TABLE / CREATE INDEX statements of ``tables`` (no FTS, no triggers)."""
    keep = []
    for statement in _statements(DDL):
        m = re.match(r"\s*CREATE (?:TABLE IF NOT EXISTS (\w+)|INDEX IF NOT EXISTS \w+ ON (\w+))", statement)
        if m and (m.group(1) or m.group(2)) in tables:
            keep.append(statement)
    return keep


def _relaxed(sql: str) -> str:
    """A CREATE TABLE with the same columns in the same order, without types or NOT NULL."""
    return re.sub(r"\b(TEXT|INTEGER)\b|NOT NULL", "", sql)


def _store(path: Path, rows: dict[str, list[tuple]]) -> Path:
    """A file with the real schema of the tables in ``rows`` holding exactly ``rows`` (values
    kept as given: no affinity, no NOT NULL while inserting; duplicates of a key are dropped)."""
    conn = sqlite3.connect(path)
    for statement in _ddl(set(rows)):
        conn.execute(statement)
    real = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    conn.execute("PRAGMA writable_schema = ON")
    for name in rows:
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (_relaxed(real[name]), name))
    conn.commit()
    conn.close()
    conn = sqlite3.connect(path)
    for name, values in rows.items():
        width = len(conn.execute(f"SELECT * FROM {name} LIMIT 0").description)
        conn.executemany(f"INSERT OR IGNORE INTO {name} VALUES ({', '.join('?' * width)})",
                         [(*v, *[""] * (width - len(v))) for v in values])
    conn.execute("PRAGMA writable_schema = ON")
    for name in rows:
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (real[name], name))
    conn.commit()
    conn.close()
    return path


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


# --- the oracle: check's contiguity and orphan statements before this pass ---------------

def _old_contiguity(conn: sqlite3.Connection, log: FindingLog) -> None:
    if conn.execute("SELECT 1 FROM pragma_index_list('history') WHERE origin = 'pk'").fetchone():
        sql = "SELECT record_id FROM history GROUP BY record_id HAVING min(seq) != 1 OR max(seq) != count(*)"
    else:
        sql = ("SELECT record_id FROM history GROUP BY record_id"
               " HAVING count(*) != count(DISTINCT seq) OR min(seq) != 1 OR max(seq) != count(*)")
    for (record_id,) in conn.execute(sql).fetchall():
        seqs = [s for (s,) in conn.execute("SELECT seq FROM history WHERE record_id = ? ORDER BY seq", (record_id,))]
        expected, previous = 1, None
        for seq in (s for s in seqs if type(s) is int):
            if seq == previous:
                log.add("record-seq-duplicate", f"record {record_id!r}: two or more entries carry seq {seq}",
                        table="history", record_id=record_id, seq=seq)
            elif seq > expected:
                missing = f"seq {expected}" if seq == expected + 1 else f"seqs {expected}..{seq - 1}"
                log.add("record-seq-gap", f"record {record_id!r}: {missing} missing (next present: {seq})",
                        table="history", record_id=record_id, seq=expected)
            previous, expected = seq, max(expected, seq + 1)


def _old_missing(conn: sqlite3.Connection, table: str, column: str, parent: str, parent_key: str) -> list:
    """The groups the old statement returned; a NULL group's ``= NULL`` lookup found no row to report."""
    return [raw for (raw,) in conn.execute(
        f"SELECT CAST({column} AS BLOB) FROM {table} GROUP BY {column} HAVING NOT EXISTS"
        f" (SELECT 1 FROM {parent} p WHERE p.{parent_key} = {table}.{column})") if raw is not None]


def _listed(log: FindingLog) -> list[tuple]:
    return [(f.code, f.message, f.record_id, f.seq) for f in log.findings]


# --- contiguity --------------------------------------------------------------------------

_IDS = st.sampled_from(["a", "b", "c", "chat-\u00e9", "5", 5, 2.5, b"a", None])
_SEQS = st.one_of(st.integers(-1, 8), st.sampled_from([1.5, 2.0, 3.0, "x", "2", b"\x01", None, 2**62]))
_RECORD = st.one_of(st.integers(0, 7).map(lambda n: list(range(1, n + 1))),  # contiguous: the usual case
                    st.integers(1, 7).flatmap(lambda n: st.lists(st.integers(1, n + 2), min_size=1, max_size=n)),
                    st.lists(_SEQS, max_size=7))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_IDS, _RECORD, max_size=6))
def test_contiguity_reports_exactly_what_the_three_aggregate_statement_reported(records):
    """Every record's gaps and duplicates, whatever the key columns hold: a record whose gap
    another record's extra entries (a fraction, a NULL, text) would balance in a sum of counts
    is still found."""
    rows = [(rid, seq, 2, "item", "t", "{}", 0) for rid, seqs in records.items() for seq in seqs]
    with tempfile.TemporaryDirectory() as tmp:
        db = _store(Path(tmp) / "h.db", {"history": rows})
        with closing(_open(db)) as conn:
            old, new = FindingLog(1000), FindingLog(1000)
            _old_contiguity(conn, old)
            entries = check_contiguity(conn, new)
            assert _listed(new) == _listed(old) and new.counts == old.counts
            assert entries == conn.execute("SELECT count(*) FROM history").fetchone()[0]


@pytest.mark.parametrize("seqs,message", [
    ([1, 2, 4, 5], "record 'r': seq 3 missing (next present: 4)"),
    ([2, 3], "record 'r': seq 1 missing (next present: 2)"),
    ([1, 5], "record 'r': seqs 2..4 missing (next present: 5)"),
])
def test_a_gap_or_a_record_not_starting_at_1_is_found_beside_contiguous_records(tmp_path, seqs, message):
    rows = [("r", s) for s in seqs] + [(f"ok-{i}", s) for i in range(3) for s in range(1, 6)]
    db = _store(tmp_path / "h.db", {"history": [(*r, 2, "item", "t", "{}", 0) for r in rows]})
    with closing(_open(db)) as conn:
        log = FindingLog(20)
        assert check_contiguity(conn, log) == len(rows)
    assert [(f.code, f.message) for f in log.findings] == [("record-seq-gap", message)]


def test_a_record_whose_extra_entries_balance_another_records_gap_is_still_reported(tmp_path):
    """The count of a record's entries and its last seq disagree in both records; their sums agree."""
    for odd in (1.5, None, "x"):
        rows = [("a", 1), ("a", 2), ("a", odd), ("b", 1), ("b", 3)]
        db = _store(tmp_path / f"h-{odd}.db", {"history": [(*r, 2, "item", "t", "{}", 0) for r in rows]})
        with closing(_open(db)) as conn:
            log = FindingLog(20)
            check_contiguity(conn, log)
        assert [(f.code, f.message) for f in log.findings] == [
            ("record-seq-gap", "record 'b': seq 2 missing (next present: 3)")], odd


def test_many_short_records_past_the_walks_cap_are_checked_in_one_pass(tmp_path):
    """100 records of one or two entries: more than the walk visits (64 here), so the suspects
    come from the GROUP BY; the gap and the record not starting at 1 are still found."""
    rows = [(f"r{i:03d}", 1) for i in range(100)] + [("r050", 3), ("r070", 2)]
    rows.remove(("r070", 1))
    db = _store(tmp_path / "h.db", {"history": [(*r, 2, "item", "t", "{}", 0) for r in rows]})
    with closing(_open(db)) as conn:
        assert _walk(conn, len(rows)) is None
        log = FindingLog(20)
        assert check_contiguity(conn, log) == len(rows)
    assert [(f.code, f.message) for f in log.findings] == [
        ("record-seq-gap", "record 'r050': seq 2 missing (next present: 3)"),
        ("record-seq-gap", "record 'r070': seq 1 missing (next present: 2)")]


def test_a_table_that_lost_its_key_is_still_checked_for_duplicates(tmp_path):
    conn = sqlite3.connect(tmp_path / "h.db")
    conn.execute("CREATE TABLE history (record_id TEXT, seq INTEGER, v, type, at, data, crc)")
    conn.executemany("INSERT INTO history VALUES (?, ?, 2, 'item', 't', '{}', 0)",
                     [("a", 1), ("a", 2), ("a", 2), ("b", 1), ("b", 2)])
    conn.commit()
    log = FindingLog(20)
    assert check_contiguity(conn, log) is None  # not the key index's count: the caller counts
    assert [(f.code, f.message) for f in log.findings] == [
        ("record-seq-duplicate", "record 'a': two or more entries carry seq 2")]


# --- orphans -----------------------------------------------------------------------------

_REFS = st.sampled_from(["c1", "c2", "c3", "c\u00e9", "", "5", 5, 7.5, b"c1", b"\xff", None])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_REFS, max_size=30), st.lists(_REFS, max_size=5), st.sampled_from([1, 2, 3, 10**6]))
def test_seeking_distinct_parents_finds_exactly_the_groups_group_by_found(children, parents, cap):
    """``missing_parents`` with any cap (past it, or on a number in a text column, it falls
    back to the GROUP BY) returns the GROUP BY's values, bytes and order, NULL, numbers,
    invalid UTF-8 and blobs included."""
    with tempfile.TemporaryDirectory() as tmp:
        db = _store(Path(tmp) / "o.db", {
            "sessions": [(f"s{i}", "u", ref) for i, ref in enumerate(parents)],
            "messages": [(f"m{i}", ref, "t") for i, ref in enumerate(children)]})
        with closing(_open(db)) as conn:
            conn.text_factory = lambda b: b.decode("utf-8", "replace")  # as check reads (lenient)
            spec = next(o for o in ORPHANS if o.table == "messages")
            assert missing_parents(conn, spec, cap) == _old_missing(conn, "messages", "chat_id", "sessions", "chat_id")
            assert missing_parents(conn, spec, None) == _old_missing(conn, "messages", "chat_id", "sessions", "chat_id")


def test_quick_check_finds_orphans_on_a_store_with_many_rows_per_parent(tmp_path):
    """The orphan pass seeks (many messages per chat); the orphans are still found, each once."""
    db = make_store(tmp_path / "s.db", [ChatSpec(i, messages=60, entries=4, traces=2, spans=3) for i in range(3)])
    conn = sqlite3.connect(db)
    ids = [m for (m,) in conn.execute("SELECT id FROM messages ORDER BY rowid")]
    conn.execute("UPDATE messages SET chat_id = 'ghost' WHERE id IN (?, ?)", (ids[5], ids[70]))
    conn.execute("UPDATE messages SET chat_id = 'zz-last' WHERE id = ?", (ids[-1],))
    conn.execute("DELETE FROM sessions WHERE chat_id = 'chat-0001'")
    conn.commit()
    conn.close()
    report = check(db, quick=True, max_per_code=500)
    got = sorted(f.message for f in report.findings if f.code == "orphan-message")
    with closing(_open(db)) as conn:
        want = sorted(f"messages {m!r}: its chat {c!r} does not exist in sessions" for m, c in conn.execute(
            "SELECT id, chat_id FROM messages WHERE chat_id NOT IN (SELECT chat_id FROM sessions)"))
    assert len(want) == 62 and got == want  # chat-0001's 59 left, two 'ghost', one 'zz-last'
    assert report.counts["orphan-message"] == 62


# --- the quick job as a whole ------------------------------------------------------------

def test_quick_check_counts_rows_and_versions_as_the_full_check_does(tmp_path):
    db = make_store(tmp_path / "s.db", [ChatSpec(i, messages=20, entries=7) for i in range(4)])
    quick, full = check(db, quick=True), check(db)
    assert quick.counts == full.counts == {}
    assert quick.rows == full.rows and quick.rows["history"] == 28
    assert quick.record_versions == full.record_versions == {"2": 28}


def test_quick_check_reports_gaps_of_a_real_store(tmp_path):
    db = make_store(tmp_path / "s.db", [ChatSpec(i, entries=6) for i in range(3)])
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM history WHERE record_id = 'chat-0001' AND seq IN (1, 4)")
    conn.commit()
    conn.close()
    report = check(db, quick=True)
    assert report.counts == {"record-seq-gap": 2} and report.exit_code == 1
    assert [f.message for f in report.findings] == ["record 'chat-0001': seq 1 missing (next present: 2)",
                                                    "record 'chat-0001': seq 4 missing (next present: 5)"]
    assert report.rows["history"] == 16 and report.record_versions == {"2": 16}
