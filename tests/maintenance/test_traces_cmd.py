"""`steerable-maint traces`: read-only export to a file or to a real OTLP/HTTP collector."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import stat
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from steerable_agent_runtime.maintenance.traces import batches, export_traces, since_cutoff
from steerable_agent_runtime.models import AgentSession, normalize_timestamp
from steerable_agent_runtime.tracing.otlp import TraceBundle
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_agent_runtime.tracing import TraceRecorder
from steerable_maint.cli import main
from tests.tracing.test_otlp import parse_strict
from tests.tracing.test_exporter import collector  # noqa: F401 - a pytest fixture, used by name

NOW = datetime.now(timezone.utc)


def _session(session_id: str, chat_id: str) -> AgentSession:
    return AgentSession(session_id=session_id, user_id="u1", chat_id=chat_id, current_stage="plan",
                        is_active=True, created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z")


async def _record(store, session: AgentSession, started: datetime) -> str:
    ticks = iter(normalize_timestamp(started + timedelta(seconds=n)) for n in range(100))
    recorder = TraceRecorder(store, clock=lambda: next(ticks))
    async with recorder.run(session) as run:
        async with run.llm_request({"llm.model": "m"}) as llm:
            await llm.event("first_token")
        async with run.tool("read_file", {"path": "a.txt"}) as tool:
            async with tool.approval():
                pass
    return run.trace_id


def _make_store(path: Path) -> dict[str, str]:
    """A store with three traces: s1/c1 (old), s1/c1 (recent), s2/c2 (recent)."""
    store = SqliteStorage(path)
    try:
        return {
            "old": asyncio.run(_record(store, _session("s1", "c1"), NOW - timedelta(days=30))),
            "recent": asyncio.run(_record(store, _session("s1", "c1"), NOW - timedelta(hours=1))),
            "other": asyncio.run(_record(store, _session("s2", "c2"), NOW - timedelta(hours=2))),
        }
    finally:
        asyncio.run(store.close())


@pytest.fixture
def store(tmp_path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "db").mkdir()
    db = tmp_path / "db" / "sessions.db"
    return db, _make_store(db)



def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _trace_ids(request: dict) -> set[str]:
    return {s["traceId"] for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}


def _fingerprints(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


# --out ----------------------------------------------------------------------------------
def test_out_writes_a_0600_otlp_file_that_parses_strictly(store, tmp_path):
    db, ids = store
    out = tmp_path / "export" / "traces.json"
    out.parent.mkdir()
    result = invoke("traces", db, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    request = json.loads(out.read_bytes())
    parse_strict(request)
    assert _trace_ids(request) == set(ids.values())
    assert (report["traces"], report["spans"], report["events"]) == (3, 9, 3)
    assert report["out_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(p.name for p in out.parent.iterdir()) == ["traces.json"]  # no temp file left


def test_out_human_output_names_the_file_and_counts(store, tmp_path):
    db, _ = store
    result = invoke("traces", db, "--out", tmp_path / "t.json")
    assert result.exit_code == 0
    assert "Exported 3 trace(s) (9 spans, 3 events)" in result.stdout
    assert str(tmp_path / "t.json") in result.stdout


def test_an_existing_out_file_is_refused_unless_forced(store, tmp_path):
    db, _ = store
    out = tmp_path / "t.json"
    out.write_text("keep me")
    refused = invoke("traces", db, "--out", out)
    assert refused.exit_code == 3
    assert refused.stderr.startswith("Error: ") and "Hint: " in refused.stderr and "--force" in refused.stderr
    assert out.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "t.json"]
    forced = invoke("traces", db, "--out", out, "--force")
    assert forced.exit_code == 0
    assert len(_trace_ids(json.loads(out.read_text()))) == 3
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.parametrize("args, expected", [
    (["--session", "s2"], {"other"}),
    (["--chat", "c1"], {"old", "recent"}),
    (["--since", "7d"], {"recent", "other"}),
    (["--chat", "c1", "--since", "1d"], {"recent"}),
    (["--session", "nobody"], set()),
])
def test_filters_select_the_matching_traces(store, tmp_path, args, expected):
    db, ids = store
    out = tmp_path / "t.json"
    result = invoke("traces", db, *args, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    assert _trace_ids(json.loads(out.read_text())) == {ids[name] for name in expected}
    assert json.loads(result.stdout)["traces"] == len(expected)


def test_the_export_changes_nothing_next_to_the_database(store, tmp_path):
    db, _ = store
    before = _fingerprints(db.parent)
    assert invoke("traces", db, "--out", tmp_path / "t.json").exit_code == 0
    assert _fingerprints(db.parent) == before


OWNER = textwrap.dedent("""
    import asyncio, sys
    from datetime import datetime, timezone
    from steerable_agent_runtime.storage.sqlite import SqliteStorage
    from tests.maintenance.test_traces_cmd import _record, _session
    store = SqliteStorage(sys.argv[1])
    trace_id = asyncio.run(_record(store, _session("live", "live-chat"), datetime.now(timezone.utc)))
    print(trace_id, flush=True)
    sys.stdin.readline()
    asyncio.run(store.close())
""")


def test_reads_committed_rows_in_the_wal_while_another_process_owns_the_store(tmp_path):
    db = tmp_path / "db" / "sessions.db"
    db.parent.mkdir()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(db)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    try:
        trace_id = owner.stdout.readline().strip()
        assert len(trace_id) == 32, owner.stderr
        wal = db.with_name("sessions.db-wal")
        assert wal.stat().st_size > 0
        before = _fingerprints(db.parent)
        out = tmp_path / "live.json"
        result = invoke("traces", db, "--chat", "live-chat", "--out", out)
        assert result.exit_code == 0, result.output
        assert _trace_ids(json.loads(out.read_text())) == {trace_id}
        assert _fingerprints(db.parent) == before
    finally:
        owner.communicate("\n", timeout=30)
    assert owner.returncode == 0


# --endpoint -----------------------------------------------------------------------------
def test_endpoint_posts_to_a_real_collector(store, collector):
    db, ids = store
    result = invoke("traces", db, "--endpoint", collector.base, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["endpoint"] == collector.base + "/v1/traces"
    assert [r["outcome"] for r in report["requests"]] == ["success"]
    (sent,) = collector.requests
    assert sent["path"] == "/v1/traces" and sent["headers"]["Content-Type"] == "application/json"
    parse_strict(json.loads(sent["body"]))
    assert _trace_ids(json.loads(sent["body"])) == set(ids.values())


def test_endpoint_human_output(store, collector):
    db, _ = store
    result = invoke("traces", db, "--endpoint", collector.base)
    assert result.exit_code == 0
    assert "Sent 3 trace(s)" in result.stdout and "accepted every span" in result.stdout


def test_rejected_spans_are_an_error_finding_and_exit_1(store, collector):
    db, _ = store
    body = json.dumps({"partialSuccess": {"rejectedSpans": 2, "errorMessage": "too old"}}).encode()
    collector.answer((200, {}, body))
    result = invoke("traces", db, "--endpoint", collector.base, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["rejected_spans"] == 2 and len(collector.requests) == 1
    assert [f["code"] for f in report["findings"]] == ["traces-spans-rejected"]


def test_a_collector_refusal_exits_3_with_error_and_hint(store, collector):
    db, _ = store
    collector.answer((401, {}, b'{"message": "no token"}'))
    result = invoke("traces", db, "--endpoint", collector.base)
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: ") and "HTTP 401: no token" in lines[0]
    assert lines[1].startswith("Hint: ") and "OTEL_EXPORTER_OTLP_HEADERS" in lines[1]
    assert "Traceback" not in result.output


def test_large_exports_are_batched_without_splitting_traces(store, collector):
    db, ids = store
    report = export_traces(db, endpoint=collector.base, batch_spans=5)
    assert len(report.requests) == len(collector.requests) == 3  # 4 OTLP spans per trace
    per_request = [_trace_ids(json.loads(r["body"])) for r in collector.requests]
    assert all(len(trace_ids) == 1 for trace_ids in per_request)
    assert set().union(*per_request) == set(ids.values())


def test_batches_respect_the_span_budget():
    def bundle(n_spans: int) -> TraceBundle:
        trace = {"trace_id": "a" * 32, "session_id": "s", "chat_id": "c", "user_id": "u",
                 "started_at": "2026-01-01T00:00:00Z"}
        spans = [{"span_id": f"{i + 1:016x}", "name": "t", "start_at": "2026-01-01T00:00:00Z"}
                 for i in range(n_spans)]
        return TraceBundle.model_validate({"trace": trace, "spans": spans})

    groups = list(batches([bundle(1), bundle(1), bundle(10), bundle(0)], max_spans=4))
    assert [[len(b.spans) for b in g] for g in groups] == [[1, 1], [10], [0]]


# refusals -------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["--out", "x.json", "--endpoint", "http://h"], ["--out", "x.json", "--since", "soon"]])
def test_usage_errors_exit_2(store, extra):
    db, _ = store
    result = invoke("traces", db, *extra)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and "Hint: " in result.stderr


@pytest.mark.parametrize("headers", ["authorization=Bearer%20sk-SECRET%0A", "Authorization: Bearer sk-SECRET"])
def test_a_malformed_otel_header_exits_2_without_printing_it(store, monkeypatch, headers):
    db, _ = store
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", headers)
    result = invoke("traces", db, "--endpoint", "http://127.0.0.1:9", "--deadline", "0.1")
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("Error: OTEL_EXPORTER_OTLP_HEADERS: ") and "SECRET" not in result.stderr


def test_the_store_itself_is_never_an_output(store):
    db, _ = store
    before = _fingerprints(db.parent)
    result = invoke("traces", db, "--out", db, "--force")
    assert result.exit_code == 2
    assert _fingerprints(db.parent) == before


def test_an_out_directory_that_does_not_exist_exits_3(store, tmp_path):
    db, _ = store
    result = invoke("traces", db, "--out", tmp_path / "missing" / "t.json")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: cannot write") and "Hint: " in result.stderr


def test_not_a_store_exits_3(tmp_path):
    bogus = tmp_path / "notes.db"
    bogus.write_text("not sqlite at all, just some text long enough to look like a file" * 10)
    result = invoke("traces", bogus, "--out", tmp_path / "t.json")
    assert result.exit_code == 3 and result.stderr.startswith("Error: ")
    assert not (tmp_path / "t.json").exists()


def test_a_row_with_a_bad_checksum_fails_closed(store, tmp_path):
    db, ids = store
    conn = sqlite3.connect(db)
    conn.execute("UPDATE spans SET data = replace(data, 'read_file', 'read_fiLe') WHERE trace_id = ?",
                 (ids["recent"],))
    conn.commit()
    conn.close()
    result = invoke("traces", db, "--out", tmp_path / "t.json", "--json")
    assert result.exit_code == 3
    assert "spans" in result.stderr and "checksum" in result.stderr
    assert not (tmp_path / "t.json").exists()


def test_since_accepts_a_duration_or_a_timestamp():
    now = datetime(2026, 3, 10, tzinfo=timezone.utc)
    assert since_cutoff("7d", now) == "2026-03-03T00:00:00.000000Z"
    assert since_cutoff("2026-03-01T12:00:00+01:00", now) == "2026-03-01T11:00:00.000000Z"
    assert since_cutoff(None, now) is None
