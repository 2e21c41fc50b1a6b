"""A newer schema version that so far lives only in the -wal (its writer died before a
checkpoint) is refused by every write job, and neither the db nor the -wal changes."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from steerable_maint.cli import main
from tests.maintenance.storemaker import ChatSpec, file_bytes, make_store


def _newer_only_in_wal(store: Path, dest: Path) -> Path:
    """Copy ``store`` as a newer build left it: user_version 9 committed to the -wal only."""
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA user_version = 9")
    shutil.copyfile(store, dest)  # copied while the writer is alive: no checkpoint yet
    shutil.copyfile(f"{store}-wal", f"{dest}-wal")
    conn.close()
    return dest


@pytest.fixture
def pair(tmp_path):
    old = make_store(tmp_path / "template.db", [ChatSpec(0), ChatSpec(1)])
    newer = _newer_only_in_wal(old, tmp_path / "newer.db")
    assert int.from_bytes(newer.read_bytes()[60:64], "big") == 2  # the db header still says 2 (this build's)
    fine = make_store(tmp_path / "fine.db", [ChatSpec(2)])
    return newer, fine


@pytest.mark.parametrize("job", ["compact", "archive-source", "archive-target", "restore-source", "restore-target"])
def test_write_jobs_refuse_a_newer_schema_that_is_only_in_the_wal(pair, job):
    newer, fine = pair
    argv = {"compact": ["compact", str(newer), "--traces-older-than", "30d"],
            "archive-source": ["archive", str(newer), "--to", str(fine), "--older-than", "30d"],
            "archive-target": ["archive", str(fine), "--to", str(newer), "--older-than", "30d"],
            "restore-source": ["restore", str(newer), "--to", str(fine), "--chat", "chat-0000"],
            "restore-target": ["restore", str(fine), "--to", str(newer), "--chat", "chat-0002"]}[job]
    before = file_bytes(newer), file_bytes(fine)
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 3, result.output
    assert "schema version 9" in result.stderr and "Traceback" not in result.output
    assert (file_bytes(newer), file_bytes(fine)) == before


def test_the_private_copy_fallback_reads_the_wal_markers_and_changes_nothing(pair):
    # The fallback precheck_wal_markers takes when a read-only connection keeps answering
    # SQLITE_PROTOCOL (a stale -wal index right after the writer was killed).
    from steerable_agent_runtime.errors import SchemaTooNewError
    from steerable_agent_runtime.storage.access import _check_markers_on_copy

    newer, fine = pair
    before = file_bytes(newer)
    with pytest.raises(SchemaTooNewError):
        _check_markers_on_copy(newer)
    assert file_bytes(newer) == before
    _check_markers_on_copy(fine)  # a store of this build passes
