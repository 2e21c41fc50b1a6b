"""The fail-closed fixtures: the runtime's read path raises exactly the RecordFormatError
each fixture's expected.json names, and the database is byte-identical afterwards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from steerable_agent_runtime import RecordFormatError, SqliteStorage, resume_transcript
from tests.helpers import digest_files, run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CASES = sorted(p.parent.name for p in FIXTURES.glob("*/expected.json")
               if "fail_closed" in json.loads(p.read_text()))


def test_the_fail_closed_cases_are_there():
    assert set(CASES) >= {"downgrade-v3", "unknown-type", "row-invalid", "undecodable-json"}


@pytest.mark.parametrize("case", CASES)
def test_fixture_raises_the_record_format_error_it_names(case, tmp_path):
    shutil.copy(FIXTURES / case / "sessions.db", tmp_path / "sessions.db")
    want = json.loads((FIXTURES / case / "expected.json").read_text())["fail_closed"]
    store = SqliteStorage(tmp_path / "sessions.db")
    run(store.close())
    before = digest_files(tmp_path)
    store = SqliteStorage(tmp_path / "sessions.db")
    for read in (lambda: store.list_history(want["record_id"]), lambda: resume_transcript(store, want["record_id"])):
        with pytest.raises(RecordFormatError) as err:
            run(read())
        assert str(err.value).startswith(want["message_starts"])
        assert (err.value.record_id, err.value.seq, err.value.version) == (want["record_id"], want["seq"], want["version"])
        assert err.value.hint
    run(store.close())
    assert digest_files(tmp_path) == before
