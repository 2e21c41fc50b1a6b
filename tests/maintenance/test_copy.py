"""steerable-maint copy SRC.db --to URL|DEST.db, and check URL, against a real PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.maintenance.copy import copy_store
from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.storage.schema import TABLES
from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

from steerable_maint.cli import main
from tests.helpers import (
    boundary,
    digest_files,
    event,
    item,
    message,
    run,
    seed,
    session,
    span,
    trace,
)
from tests.pgcluster import PASSWORD, PW_USER


def make_source(path) -> None:
    store = SqliteStorage(path)
    for i in range(3):
        run(store.upsert_session(session(f"s{i}", chat=f"c{i}", minute=i)))
        run(store.append_message(message(f"m{i}", chat=f"c{i}", content=f"text ✓ {i} \x00 \u2028")))
    run(store.append_message(message("m0", chat="c0", content="replaced in place")))
    run(store.upsert_trace(trace("t1", sid="s0", chat="c0")))
    run(store.add_span("t1", span("sp1")))
    run(store.add_event("t1", event("e1", "sp1")))
    run(store.append_history("c0", [seed("hello"), *[item(f"entry {i}") for i in range(1200)], boundary("sum")]))
    run(store.append_history("c1", [item("other")]))
    run(store.close())


def sqlite_rows(path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {name: conn.execute(f"SELECT {', '.join(spec.all_columns[:-2])}, CAST(data AS BLOB), crc FROM {name}"
                                   f" ORDER BY {', '.join(spec.key)}").fetchall() for name, spec in TABLES.items()}
    finally:
        conn.close()


def server_rows(url: str) -> dict[str, list[tuple]]:
    store = SqlAlchemyStorage(url, create=False)

    async def read() -> dict[str, list[tuple]]:
        found: dict[str, list[tuple]] = {}
        for name, spec in TABLES.items():
            rows, after = [], None
            while True:
                page, after = await store.read_rows(name, after=after, limit=500)
                rows.extend(page)
                if after is None:
                    break
            keys = [spec.all_columns.index(k) for k in spec.key]
            found[name] = sorted(rows, key=lambda r: tuple(r[i] for i in keys))
        await store.close()
        return found
    return run(read())


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "sessions.db"
    make_source(path)
    return path


def test_copy_to_postgres_is_byte_identical_verified_and_idempotent(source, pg_url):
    before = digest_files(source.parent)
    result = invoke("copy", str(source), "--to", pg_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["copied"] == report["rows"] and report["rows"]["history"] == 1203 and report["findings"] == []
    assert server_rows(pg_url) == sqlite_rows(source)
    assert digest_files(source.parent) == before  # read-only: not a byte of the source changed
    again = json.loads(invoke("copy", str(source), "--to", pg_url, "--json").stdout)
    assert again["already"] == report["rows"] and sum(again["copied"].values()) == 0
    pg = SqlAlchemyStorage(pg_url)
    assert [m.content for m in run(pg.list_messages("c0"))] == ["replaced in place"]
    assert len(run(pg.list_history("c0"))) == 1202 and run(pg.history_checkpoint("c0")) == 1202
    assert [s.session_id for s in run(pg.search_sessions("replaced"))] == ["s0"]
    run(pg.close())
    checked = invoke("check", pg_url, "--json")
    assert checked.exit_code == 0 and json.loads(checked.stdout)["counts"] == {}


def test_dry_run_writes_nothing_and_reports_what_would_move(source, postgres, pg_url):
    result = invoke("copy", str(source), "--to", pg_url, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] and report["copied"] == report["rows"]
    assert postgres.psql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
                         pg_url.rsplit("/", 1)[1]) == "0"
    human = invoke("copy", str(source), "--to", pg_url, "--dry-run")
    assert "dry run: nothing changed" in human.stdout and "would copy" in human.stdout


def test_a_source_kept_open_by_a_running_app_is_copied_untouched(source, pg_url):
    app = subprocess.Popen([sys.executable, "-m", "tests.storage.children", "hold", str(source)],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout.readline().startswith("ready")
        before = digest_files(source.parent)
        assert copy_store(source, to=pg_url).copied["history"] == 1203
        assert digest_files(source.parent) == before
    finally:
        app.kill()
        app.wait()


def test_conflicting_and_damaged_rows_are_reported_never_overwritten(source, postgres, pg_url):
    store = SqlAlchemyStorage(pg_url)
    run(store.upsert_session(session("s1", chat="c1", minute=1, active=False)))  # same key, other bytes
    run(store.close())
    conn = sqlite3.connect(source)
    conn.execute("UPDATE messages SET data = replace(data, 'text', 'TEXT') WHERE id = 'm2'")  # crc now wrong
    conn.commit()
    conn.close()
    result = invoke("copy", str(source), "--to", pg_url, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    codes = sorted((f["code"], f["table"]) for f in report["findings"])
    assert codes == [("copy-conflict", "sessions"), ("copy-source-damaged", "messages")]
    assert report["skipped"]["sessions"] == 1 and report["copied"]["sessions"] == 2
    assert run(SqlAlchemyStorage(pg_url).get_session("s1")).is_active is False  # the destination's row kept
    db = pg_url.rsplit("/", 1)[1]
    assert postgres.psql("SELECT string_agg(id, ',' ORDER BY id) FROM messages", db) == "m0,m1"


def test_copy_to_another_sqlite_file_gives_a_store_sqlite_storage_opens(source, tmp_path):
    dest = tmp_path / "copy.db"
    result = invoke("copy", str(source), "--to", str(dest), "--json")
    assert result.exit_code == 0, result.output
    assert sqlite_rows(dest) == sqlite_rows(source)
    assert dest.stat().st_mode & 0o777 == 0o600
    store = SqliteStorage(dest)
    assert len(run(store.list_history("c0"))) == 1202
    assert [s.session_id for s in run(store.search_sessions("replaced"))] == ["s0"]
    held = invoke("copy", str(source), "--to", str(dest))  # the destination's lease is held
    assert held.exit_code == 3 and "lease" in held.output.lower()
    run(store.close())
    assert invoke("copy", str(source), "--to", str(source)).exit_code == 2


def test_unreachable_or_refused_destinations_are_one_error_without_the_password(source, postgres, pg_url):
    wrong = postgres.url(pg_url.rsplit("/", 1)[1], user=PW_USER, password="Wr0ng-" + PASSWORD)
    for url, words in ((wrong, "refused the credentials"),
                       (f"postgresql://u:{PASSWORD}@127.0.0.1:1/db", "cannot reach the database")):
        result = invoke("copy", str(source), "--to", url)
        assert result.exit_code == 3, result.output
        assert words in result.output and "Hint:" in result.output
        assert PASSWORD not in result.output
        checked = invoke("check", url)
        assert checked.exit_code == 3 and PASSWORD not in checked.output


def test_check_url_finds_row_damage_gaps_and_orphans(pg_url, postgres):
    store = SqlAlchemyStorage(pg_url)
    run(store.upsert_session(session("s1")))
    run(store.upsert_trace(trace("t1", sid="gone")))
    run(store.append_history("c1", [item(str(i)) for i in range(12)]))
    run(store.close())
    db = pg_url.rsplit("/", 1)[1]
    bad = '{"v":2,"type":"item","seq":4,"at":"2026-01-01T00:00:00.000000Z","message":{"role":"user"}}'
    postgres.psql("UPDATE history SET data = replace(data, '\"2\"', '\"X\"') WHERE seq = 3;"
                  f" UPDATE history SET data = '{bad}', crc = {row_crc('history', ('c1', 4), bad)} WHERE seq = 4;"
                  " DELETE FROM history WHERE seq = 8", db)
    result = invoke("check", pg_url, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    # seq 3: bytes changed under their CRC; seq 4: a valid CRC but its at disagrees with the column
    assert report["counts"] == {"orphan-trace": 1, "record-seq-gap": 1, "row-checksum-mismatch": 1,
                                "row-column-mismatch": 1}
    assert report["path"] == pg_url and report["rows"]["history"] == 11
    human = invoke("check", pg_url)
    assert "record-seq-gap" in human.stdout and "postgresql rows" in human.stdout
