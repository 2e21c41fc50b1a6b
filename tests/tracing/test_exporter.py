"""The stdlib OTLP/HTTP exporter against a real HTTP server on 127.0.0.1 (port 0)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from steerable_agent_runtime.errors import ExportError, UsageError
from steerable_agent_runtime.models import HarnessTrace, TraceSpan
from steerable_agent_runtime.tracing.otlp import TraceBundle, export_request
from steerable_agent_runtime.tracing.exporter import (
    OtlpHttpExporter,
    configured_gzip,
    parse_headers,
    parse_retry_after,
    traces_url,
)

OK = (200, {}, b"{}")
DROP = "drop"


class Collector:
    """A scripted OTLP/HTTP collector: answers requests with ``script`` in order (the last
    answer repeats) and records every request it received."""

    def __init__(self) -> None:
        self.script: list = [OK]
        self.requests: list[dict] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                collector.requests.append({"path": self.path, "headers": dict(self.headers.items()),
                                           "raw_headers": self.headers, "body": body})
                answer = collector.script.pop(0) if len(collector.script) > 1 else collector.script[0]
                if answer == DROP:
                    self.close_connection = True
                    return  # close without a response: the client sees the connection drop
                status, headers, payload = answer
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    def answer(self, *answers) -> Collector:
        self.script = list(answers)
        return self


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    c.thread.start()
    try:
        yield c
    finally:
        c.server.shutdown()
        c.server.server_close()


def _request() -> dict:
    trace = HarnessTrace(trace_id="ab" * 16, session_id="s", chat_id="c", user_id="u",
                         started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:00:02Z", outcome="ok")
    span = TraceSpan(span_id="cd" * 8, name="llm.request", start_at="2026-01-01T00:00:00Z",
                     end_at="2026-01-01T00:00:01Z", kind="llm")
    return export_request([TraceBundle(trace=trace, spans=[span])])


class Sleeps:
    """Records the waits the exporter asks for and really sleeps a capped, tiny time."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        time.sleep(min(seconds, 0.05))


def _exporter(collector: Collector, **kwargs) -> OtlpHttpExporter:
    kwargs.setdefault("env", {})
    kwargs.setdefault("deadline", 2.0)
    kwargs.setdefault("initial_backoff", 0.01)
    kwargs.setdefault("max_backoff", 0.05)
    kwargs.setdefault("timeout", 2.0)
    return OtlpHttpExporter(collector.base, **kwargs)


# answers --------------------------------------------------------------------------------
def test_200_is_one_post_of_the_json_to_v1_traces(collector):
    request = _request()
    result = _exporter(collector.answer(OK)).export(request)
    assert (result.outcome, result.http_status, result.attempts, result.spans) == ("success", 200, 1, 2)
    (sent,) = collector.requests
    assert sent["path"] == "/v1/traces"
    assert sent["raw_headers"].get_all("Content-Type") == ["application/json"]
    assert "Content-Encoding" not in sent["headers"]
    assert json.loads(sent["body"]) == request


def test_gzip_compresses_the_body_and_says_so(collector):
    request = _request()
    _exporter(collector, gzip=True).export(request)
    (sent,) = collector.requests
    assert sent["headers"]["Content-Encoding"] == "gzip"
    assert sent["raw_headers"].get_all("Content-Type") == ["application/json"]
    assert json.loads(gzip.decompress(sent["body"])) == request


def test_partial_success_is_reported_and_never_retried(collector):
    body = json.dumps({"partialSuccess": {"rejectedSpans": "1", "errorMessage": "span too old"}}).encode()
    result = _exporter(collector.answer((200, {}, body), OK)).export(_request())
    assert result.outcome == "partial_success"
    assert (result.rejected_spans, result.message, result.attempts) == (1, "span too old", 1)
    assert len(collector.requests) == 1


def test_a_partial_success_with_only_a_warning_is_a_success_with_the_message(collector):
    body = json.dumps({"partialSuccess": {"errorMessage": "deprecated field"}}).encode()
    result = _exporter(collector.answer((200, {}, body))).export(_request())
    assert (result.outcome, result.rejected_spans, result.message) == ("success", 0, "deprecated field")


@pytest.mark.parametrize("status", [400, 401, 404, 413, 500])
def test_other_errors_are_never_retried(collector, status):
    body = json.dumps({"code": 3, "message": "bad span name"}).encode()
    with pytest.raises(ExportError) as caught:
        _exporter(collector.answer((status, {}, body), OK)).export(_request())
    assert len(collector.requests) == 1
    assert caught.value.extra["http_status"] == status and caught.value.extra["attempts"] == 1
    assert f"HTTP {status}: bad span name" in str(caught.value)


def test_429_honours_retry_after_seconds(collector):
    sleeps = Sleeps()
    result = _exporter(collector.answer((429, {"Retry-After": "1"}, b""), OK), sleep=sleeps).export(_request())
    assert (result.outcome, result.attempts) == ("success", 2)
    assert sleeps.waits == [1.0]
    assert len(collector.requests) == 2


def test_503_retry_after_as_an_http_date(collector):
    sleeps = Sleeps()
    when = formatdate(time.time() + 120, usegmt=True)
    result = _exporter(collector.answer((503, {"Retry-After": when}, b""), OK), sleep=sleeps,
                       deadline=600).export(_request())
    assert result.attempts == 2
    (wait,) = sleeps.waits
    assert 115 <= wait <= 121


def test_503_without_retry_after_backs_off_exponentially_with_jitter(collector):
    sleeps = Sleeps()
    result = _exporter(collector.answer((503, {}, b""), (502, {}, b""), (504, {}, b""), OK), sleep=sleeps,
                       initial_backoff=0.01, max_backoff=1.0).export(_request())
    assert result.attempts == 4 and len(collector.requests) == 4
    for n, wait in enumerate(sleeps.waits, start=1):
        ceiling = 0.01 * 2 ** (n - 1)
        assert ceiling / 2 <= wait <= ceiling


def test_backoff_is_capped_at_max_backoff(collector):
    exporter = _exporter(collector, initial_backoff=1.0, max_backoff=3.0, rng=lambda: 1.0)
    assert [exporter._backoff(n) for n in (1, 2, 3, 4, 10)] == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_a_dropped_connection_is_retried(collector):
    result = _exporter(collector.answer(DROP, OK)).export(_request())
    assert (result.outcome, result.attempts) == ("success", 2)
    assert len(collector.requests) == 2


def test_retries_stop_at_the_deadline(collector):
    collector.answer((503, {}, b"overloaded"))
    started = time.monotonic()
    with pytest.raises(ExportError) as caught:
        _exporter(collector, deadline=0.15, initial_backoff=0.02, max_backoff=0.04).export(_request())
    assert time.monotonic() - started < 5.0  # deadline 0.15 s: it stops (a loose bound: shared machine)
    attempts, received = caught.value.extra["attempts"], len(collector.requests)
    assert attempts >= 2 and "gave up" in str(caught.value)
    if "HTTP 503: overloaded" in str(caught.value):
        assert received == attempts
    else:  # on a loaded machine the last attempt's timeout (what was left of the deadline) ran out
        # first: before its request reached the collector, or after, while waiting for the answer
        assert received in (attempts - 1, attempts)
        assert "connection failed" in str(caught.value) or "timed out" in str(caught.value)


@pytest.mark.parametrize("value", ["\u00b2", "\u00b9\u00b3"])
def test_a_retry_after_of_non_ascii_digits_is_unreadable_not_a_crash(collector, value):
    # http.client decodes headers as latin-1, where superscript digits are str.isdigit(); float()
    # refuses them, and the ValueError escaped the exporter (exit 4, "this is a bug").
    assert parse_retry_after(value, time.time()) is None
    sleeps = Sleeps()
    result = _exporter(collector.answer((503, {"Retry-After": value}, b""), OK), sleep=sleeps).export(_request())
    assert result.attempts == 2 and len(sleeps.waits) == 1  # the backoff's wait instead


def test_a_retry_after_beyond_the_deadline_gives_up_without_waiting(collector):
    sleeps = Sleeps()
    with pytest.raises(ExportError):
        _exporter(collector.answer((429, {"Retry-After": "30"}, b""), OK), sleep=sleeps,
                  deadline=1.0).export(_request())
    assert sleeps.waits == [] and len(collector.requests) == 1


def test_connection_refused_is_retried_until_the_deadline():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    exporter = OtlpHttpExporter(f"http://127.0.0.1:{port}", env={}, deadline=0.1,
                                initial_backoff=0.01, max_backoff=0.02)
    with pytest.raises(ExportError) as caught:
        exporter.export(_request())
    assert caught.value.extra["attempts"] >= 2
    assert "connection failed" in str(caught.value)


class Dripper:
    """A raw server on 127.0.0.1 that answers with ``head``, then sends ``drip`` one byte at a
    time, ``pause`` seconds apart: each byte well inside the exporter's socket timeout."""

    def __init__(self, head: bytes, drip: bytes, pause: float = 0.1) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.head, self.drip, self.pause = head, drip, pause
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(self.head)
                for byte in self.drip:
                    if self.stop.wait(self.pause):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.mark.parametrize("head, drip, accepted", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n", b"x" * 400, True),  # a body, byte by byte
    (b"HTTP/1.1 200 OK\r\n", b"X-Slow: y\r\n" * 40, False),  # the headers: no complete answer in time
    (b"", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", False),  # the status line
])
def test_a_collector_that_answers_a_byte_at_a_time_cannot_hold_the_export_past_its_deadline(head, drip, accepted):
    # The socket timeout bounds each read, not the answer: a peer (a broken proxy, a hostile
    # host) sending one byte every 0.1 s held export() for 40 s on a 1 s deadline, and a
    # sidecar's trace.export slot with it.
    dripper = Dripper(head, drip)
    try:
        exporter = OtlpHttpExporter(dripper.base, env={}, timeout=1.0, deadline=1.5, initial_backoff=0.01,
                                    max_backoff=0.02)
        started = time.monotonic()
        if accepted:  # the status and headers came in time: the collector took the spans (never re-sent)
            result = exporter.export(_request())
            assert (result.outcome, result.attempts) == ("success", 1)
        else:
            with pytest.raises(ExportError) as caught:
                exporter.export(_request())
            assert "timed out" in str(caught.value)
        assert time.monotonic() - started < 6.0  # deadline 1.5 s (loose: a shared machine)
    finally:
        dripper.close()


# configuration --------------------------------------------------------------------------
def test_env_base_endpoint_gets_v1_traces_appended(collector):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.base + "/otlp/"}
    OtlpHttpExporter(env=env).export(_request())
    assert collector.requests[0]["path"] == "/otlp/v1/traces"


def test_env_traces_endpoint_is_used_as_is_and_wins(collector):
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.base + "/ingest",
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    OtlpHttpExporter(env=env).export(_request())
    assert collector.requests[0]["path"] == "/ingest"


def test_env_headers_are_sent_but_cannot_replace_the_content_type(collector):
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=acme,authorization=Bearer%20abc,content-type=text/plain",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-tenant=traces-team"}
    _exporter(collector, env=env, headers={"X-Extra": "1"}).export(_request())
    sent = collector.requests[0]
    assert sent["headers"]["x-tenant"] == "traces-team"
    assert sent["headers"]["authorization"] == "Bearer abc"
    assert sent["headers"]["X-Extra"] == "1"
    assert sent["raw_headers"].get_all("Content-Type") == ["application/json"]


def test_v1_traces_goes_on_the_path_not_into_the_query(collector):
    # A base URL with a query (a tenant, a key a gateway routes on): /v1/traces belongs to
    # the path; appended to the end of the text it became part of the query and the POST
    # went to the collector's root path.
    OtlpHttpExporter(collector.base + "/otlp?tenant=a", env={}).export(_request())
    OtlpHttpExporter(env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.base + "?tenant=b"}).export(_request())
    assert [r["path"] for r in collector.requests] == ["/otlp/v1/traces?tenant=a", "/v1/traces?tenant=b"]
    assert traces_url("http://h:4318#frag", {}) == "http://h:4318/v1/traces#frag"
    assert traces_url("http://h:4318/v1/traces?x=1", {}) == "http://h:4318/v1/traces?x=1"


def test_endpoint_resolution_order():
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:2"}
    assert traces_url("http://e:3", env) == "http://e:3/v1/traces"
    assert traces_url("http://e:3/v1/traces", env) == "http://e:3/v1/traces"
    assert traces_url(None, env) == "http://t:1/x"
    assert traces_url(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:2"}) == "http://b:2/v1/traces"
    assert traces_url(None, {}) == "http://localhost:4318/v1/traces"


@pytest.mark.parametrize("url", ["localhost:4318", "ftp://h/x", "http://", "http://u:secret@h:4318", "http://h:99999",
                                 "http://h:port"])
def test_a_bad_endpoint_is_a_usage_error(url):
    with pytest.raises(UsageError):
        traces_url(url, {})


@pytest.mark.parametrize("url", [
    "http://me:hunter2@collector:4318/ x",  # a space
    "http://me:hunter2@collector:port",  # a port that is not a number
    "ftp://me:hunter2@collector",  # not http(s)
    "http://me:hunter2@collector:0",
    "http://me:hunter2@:4318",  # no host
    "me:hunter2@collector:4318",  # no scheme
    "http://me:hunter2@[::1:4318",  # an unclosed IPv6 bracket
    "http://me:hun/ter2@collector:4318",  # a password holding a slash
])
def test_a_malformed_endpoint_with_credentials_never_prints_the_password(url):
    # The URL is refused before it could be used, and the error goes to stderr, CI logs and
    # the sidecar's JSON-RPC error: the password in it must not.
    for env in ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": url}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url}):
        with pytest.raises(UsageError) as caught:
            traces_url(url if not env else None, env)
        text = f"{caught.value.message} {caught.value.hint}"
        assert "hunter2" not in text and "hun" not in text and "ter2" not in text, text


def test_header_parsing():
    assert parse_headers(" a = 1 , b=x%2Cy,, ") == {"a": "1", "b": "x,y"}
    with pytest.raises(UsageError, match="OTEL_EXPORTER_OTLP_HEADERS"):
        parse_headers("novalue")
    with pytest.raises(UsageError):
        OtlpHttpExporter("http://h", env={"OTEL_EXPORTER_OTLP_HEADERS": "=x"})


@pytest.mark.parametrize("headers, env", [
    ({"authorization": "Bearer sk-SECRET\n"}, {}),  # a token read from a file, newline and all
    ({"authorization": "Bearer sk-SECRET\r\nX-Evil: 1"}, {}),
    ({"authorization": "Bearer sk-SECRET\u2019"}, {}),  # not Latin-1: http.client cannot send it
    ({"bad name": "sk-SECRET"}, {}),
    (None, {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20sk-SECRET%0A"}),
    (None, {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20sk-SECRET%00"}),
    (None, {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer sk-SECRET"}),  # ':' for '='
    (None, {"OTEL_EXPORTER_OTLP_HEADERS": "x=1,=sk-SECRET"}),
])
def test_a_header_http_cannot_send_is_a_usage_error_that_never_prints_its_value(headers, env):
    # Such a header used to reach http.client, whose ValueError ("Invalid header value
    # b'Bearer sk-...\n'") escaped export() with the credential in it (exit 4 from the CLI).
    with pytest.raises(UsageError) as caught:
        OtlpHttpExporter("http://127.0.0.1:9", headers=headers, env=env)
    text = f"{caught.value.message} {caught.value.hint}"
    assert "SECRET" not in text, text
    assert (next(iter(env)) if env else "headers") in caught.value.message


def test_compression_from_env():
    assert configured_gzip(None, {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}) is True
    assert configured_gzip(None, {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none",
                                  "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}) is False
    assert configured_gzip(False, {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}) is False
    with pytest.raises(UsageError):
        configured_gzip(None, {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"})


def test_retry_after_parsing():
    now = time.time()
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(formatdate(now - 60, usegmt=True), now) == 0.0
    assert 29 <= parse_retry_after(formatdate(now + 30, usegmt=True), now) <= 31
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
