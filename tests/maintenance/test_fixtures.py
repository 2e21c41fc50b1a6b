"""The checked-in fixtures are what fixtures/make_fixtures.py writes, and check reports what each expects."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from steerable_agent_runtime.maintenance.check import check
from steerable_agent_runtime.maintenance.readonly import open_readonly

from .conftest import CASES, FIXTURES, expected, snapshot


def _load_script():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def logical(db: Path) -> dict:
    """Schema objects, markers and every row of every table, ordered: the store's logical content."""
    with open_readonly(db, allow_newer_schema=True) as conn:
        master = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"
                              " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
        tables = [n for t, n, _, _ in master if t == "table"]
        content = {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in tables}
        return {"master": master, "markers": (conn.user_version, conn.application_id), "rows": content}


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("regenerated")
    made = asyncio.run(_load_script().make_all(out))
    assert sorted(made) == CASES
    return out


def test_fixture_set_covers_every_case_of_the_issue():
    assert set(CASES) >= {"healthy", "legacy-v1", "mixed-v1-v2", "downgrade-v3", "schema-too-new",
                          "undecodable-json", "checksum-mismatch", "column-mismatch", "seq-gap", "seq-duplicate",
                          "unknown-type", "orphans", "integrity-error", "wal-pending", "row-invalid",
                          "schema-old-missing-table"}


@pytest.mark.parametrize("case", CASES)
def test_regenerated_fixture_is_logically_identical_to_the_checked_in_one(regenerated, case):
    assert logical(regenerated / case / "sessions.db") == logical(FIXTURES / case / "sessions.db")
    assert json.loads((regenerated / case / "expected.json").read_text()) == expected(case)


@pytest.mark.parametrize("case", CASES)
def test_check_reports_what_the_fixture_expects(case):
    before = snapshot(FIXTURES / case)
    report = check(FIXTURES / case / "sessions.db")
    want = expected(case)
    assert report.exit_code == want["exit_code"]
    assert report.counts == want["counts"]
    assert report.rows == want["rows"]
    assert report.record_versions == want["record_versions"]
    assert [d.record_id for d in report.downgrades] == want["downgrades"]
    assert snapshot(FIXTURES / case) == before


def test_wal_pending_fixture_holds_commits_only_in_its_wal():
    db = FIXTURES / "wal-pending" / "sessions.db"
    assert (db.parent / "sessions.db-wal").stat().st_size > 0
    assert not (db.parent / "sessions.db-shm").exists()
    import sqlite3
    main_only = sqlite3.connect(f"{db.resolve().as_uri()}?immutable=1", uri=True)  # ignores the -wal
    try:
        assert main_only.execute("SELECT count(*) FROM sessions WHERE chat_id = 'chat-gamma'").fetchone()[0] == 0
    finally:
        main_only.close()
    assert check(db).rows["sessions"] == expected("wal-pending")["rows"]["sessions"] == 3
