"""`steerable-maint traces --endpoint` against a real OTLP collector: rotel (a Rust binary
shipped in its PyPI package, a test-only dependency).

rotel is started on 127.0.0.1 as a child process. Its OTLP/HTTP receiver gets our JSON; its OTLP
exporter forwards what it decoded, as protobuf, to a receiver in this test (also on 127.0.0.1),
and its debug exporter prints every span it decoded on stdout. Both are read back: the spans that
went through the collector must equal, field for field, the spans of the same export written to
a file with ``--out``.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import rotel
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.maintenance.test_traces_cmd import _make_store, invoke
from tests.tracing.test_otlp import parse_strict

ROTEL = Path(rotel.__file__).with_name("rotel-agent")
START_SECONDS = 15.0
ARRIVE_SECONDS = 15.0


class ProtobufReceiver:
    """An OTLP/HTTP protobuf endpoint on 127.0.0.1 (port 0) that records every decoded request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                receiver.requests.append(message)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    def spans(self) -> dict[str, dict]:
        return _spans_by_id(self.requests)


@dataclass
class Rotel:
    """A running rotel child: its OTLP/HTTP receiver's base URL and its stdout (debug log) file."""

    proc: subprocess.Popen
    base: str
    stdout: Path
    stderr: Path
    receiver: ProtobufReceiver
    args: list[str] = field(default_factory=list)

    def debug_log(self) -> str:
        return self.stdout.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _start_rotel(tmp_path: Path, receiver: ProtobufReceiver, attempt: int) -> Rotel:
    http_port, grpc_port = _free_port(), _free_port()
    out, err = tmp_path / f"rotel-{attempt}.out", tmp_path / f"rotel-{attempt}.err"
    args = [str(ROTEL), "start",
            "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
            "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
            "--exporter", "otlp", "--otlp-exporter-protocol", "http",
            "--otlp-exporter-endpoint", receiver.base,
            "--batch-timeout", "20ms",
            "--debug-log", "traces", "--debug-log-verbosity", "detailed",
            "--pid-file", str(tmp_path / "rotel.pid"), "--log-file", str(tmp_path / "rotel.log")]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    started = time.monotonic()
    while time.monotonic() - started < START_SECONDS and proc.poll() is None:
        if _listening(http_port):
            return Rotel(proc, f"http://127.0.0.1:{http_port}", out, err, receiver, args)
        time.sleep(0.02)
    _stop(proc)
    raise RuntimeError(f"rotel did not listen on 127.0.0.1:{http_port} (exit {proc.returncode}): "
                       f"{out.read_text(errors='replace')}{err.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def collector(tmp_path) -> Iterator[Rotel]:
    receiver = ProtobufReceiver()
    receiver.thread.start()
    running = None
    try:
        for attempt in range(3):  # a free port may be taken by another process before rotel binds it
            try:
                running = _start_rotel(tmp_path, receiver, attempt)
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        yield running
    finally:
        if running is not None:
            _stop(running.proc)
        receiver.server.shutdown()
        receiver.server.server_close()


@pytest.fixture
def store(tmp_path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "db").mkdir()
    db = tmp_path / "db" / "sessions.db"
    return db, _make_store(db)


def _spans_by_id(requests: list[ExportTraceServiceRequest]) -> dict[str, dict]:
    """Every span of ``requests`` as a dict (proto field names), keyed by its hex span id, with
    its resource's and scope's names folded in (a collector may regroup resources)."""
    spans: dict[str, dict] = {}
    for request in requests:
        for rs in request.resource_spans:
            resource = {a.key: json_format.MessageToDict(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    as_dict = json_format.MessageToDict(span, preserving_proto_field_name=True)
                    as_dict["attributes"] = sorted(as_dict.get("attributes", []), key=lambda a: a["key"])
                    as_dict.update(resource=resource, scope=ss.scope.name)
                    key = span.span_id.hex()
                    assert key not in spans, f"span {key} delivered twice"
                    spans[key] = as_dict
    return spans


def _wait_for(receiver: ProtobufReceiver, count: int) -> dict[str, dict]:
    started = time.monotonic()
    while time.monotonic() - started < ARRIVE_SECONDS:
        spans = receiver.spans()
        if len(spans) >= count:
            return spans
        time.sleep(0.02)
    return receiver.spans()


def _file_export(db: Path, out: Path, *filters: str) -> dict[str, dict]:
    result = invoke("traces", db, *filters, "--out", out)
    assert result.exit_code == 0, result.output
    return _spans_by_id([parse_strict(json.loads(out.read_bytes()))])


@pytest.mark.parametrize("compression", [[], ["--gzip"]])
def test_every_span_reaches_a_real_collector_unchanged(store, collector, tmp_path, compression):
    db, ids = store
    expected = _file_export(db, tmp_path / "t.json")
    assert len(expected) == 12  # 3 traces: a root agent.run span + 3 recorded spans each

    result = invoke("traces", db, "--endpoint", collector.base, *compression, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(r["outcome"], r["http_status"], r["rejected_spans"]) for r in report["requests"]] == \
        [("success", 200, 0)]

    received = _wait_for(collector.receiver, len(expected))
    assert received == expected
    assert all(h["content-type"] == "application/x-protobuf" for h in collector.receiver.headers)
    debug = collector.debug_log()
    for trace_id in ids.values():
        assert f"Trace ID       : {trace_id}" in debug
    for span_id in expected:
        assert f"    ID             : {span_id}" in debug


def test_a_filtered_export_sends_only_the_matching_trace(store, collector, tmp_path):
    db, ids = store
    expected = _file_export(db, tmp_path / "t.json", "--session", "s2")
    assert len(expected) == 4
    result = invoke("traces", db, "--session", "s2", "--endpoint", collector.base)
    assert result.exit_code == 0, result.output
    assert "Sent 1 trace(s)" in result.stdout
    assert _wait_for(collector.receiver, len(expected)) == expected
    time.sleep(0.2)  # ten batch timeouts: anything else the collector had would have arrived
    assert set(collector.receiver.spans()) == set(expected)
    debug = collector.debug_log()
    assert ids["other"] in debug and ids["old"] not in debug and ids["recent"] not in debug


def test_a_collector_that_went_away_is_exit_3_and_nothing_is_sent_twice(store, collector):
    db, _ = store
    _stop(collector.proc)
    result = invoke("traces", db, "--endpoint", collector.base, "--deadline", "1")
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert "Traceback" not in result.output
    assert collector.receiver.requests == []
