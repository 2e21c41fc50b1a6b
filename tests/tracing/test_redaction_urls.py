"""Redaction of credentials that travel inside URLs: a password in the userinfo, a secret query
parameter (``?key=``, ``&api_key=``, ``access_token=``), in an attr value or inside a longer text
such as an error message quoting a connection URL or a request URL."""

from __future__ import annotations

import asyncio
import sqlite3
import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from steerable_agent_runtime.llm import GoogleGenAIProvider, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.models import AgentSession
from steerable_agent_runtime.storage.sqlite import SqliteStorage
from steerable_agent_runtime.tools import ToolRouter, tool
from steerable_agent_runtime.tracing import REDACTED, TraceRecorder, is_secret_key, redact

from tests.loop.kit import USER, completion, run_loop
from tests.replay_server import ReplayServer, Reply

SESSION = AgentSession(session_id="s1", user_id="u1", chat_id="c1", current_stage="plan", is_active=True,
                       created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z")


def _text(value: str) -> str:
    return redact({"tool.error": value})["tool.error"]


# userinfo -------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "expected"), [
    ("https://user:s3cret@host/path", f"https://user:{REDACTED}@host/path"),
    ("postgresql://app:pw@db:5432/x", f"postgresql://app:{REDACTED}@db:5432/x"),
    ("redis://:pw@host", f"redis://:{REDACTED}@host"),
    ("mysql+pymysql://root:p%40ss@127.0.0.1/app", f"mysql+pymysql://root:{REDACTED}@127.0.0.1/app"),
    ("postgresql://app:p@ss@db/x", f"postgresql://app:{REDACTED}@db/x"),  # an unencoded @: up to the last one
    ("amqp://guest:guest@[::1]:5672/", f"amqp://guest:{REDACTED}@[::1]:5672/"),
])
def test_a_password_in_a_url_userinfo_is_redacted_and_the_rest_kept(url, expected):
    assert redact(url) == expected
    assert redact({"db.url": url}) == {"db.url": expected}


@pytest.mark.parametrize(("text", "expected"), [
    ("could not connect to postgresql://app:hunter2@db.internal:5432/app: connection refused",
     f"could not connect to postgresql://app:{REDACTED}@db.internal:5432/app: connection refused"),
    ("{'broker': 'amqp://guest:hunter2@rabbit:5672/', 'retries': 3}",
     f"{{'broker': 'amqp://guest:{REDACTED}@rabbit:5672/', 'retries': 3}}"),
    ("primary redis://:hunter2@a:6379 and replica redis://:hunter3@b:6379 both down",
     f"primary redis://:{REDACTED}@a:6379 and replica redis://:{REDACTED}@b:6379 both down"),
])
def test_a_password_in_a_url_inside_a_longer_text_is_redacted(text, expected):
    assert _text(text) == expected


# query parameters -----------------------------------------------------------------------
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"


@pytest.mark.parametrize(("text", "expected"), [
    (f"{GEMINI}?key=AIzaSyA-SECRET", f"{GEMINI}?key={REDACTED}"),
    (f"400 Client Error: Bad Request for url: {GEMINI}?alt=sse&key=AIzaSyA-SECRET",
     f"400 Client Error: Bad Request for url: {GEMINI}?alt=sse&key={REDACTED}"),
    ("HTTPSConnectionPool(host='generativelanguage.googleapis.com', port=443): Max retries exceeded with url: "
     "/v1beta/models/gemini-pro:generateContent?key=AIzaSyA-SECRET (Caused by NewConnectionError(...))",
     "HTTPSConnectionPool(host='generativelanguage.googleapis.com', port=443): Max retries exceeded with url: "
     f"/v1beta/models/gemini-pro:generateContent?key={REDACTED} (Caused by NewConnectionError(...))"),
    ("https://api.example.com/v1/items?page=2&api_key=SECRET&sort=asc",
     f"https://api.example.com/v1/items?page=2&api_key={REDACTED}&sort=asc"),
    ("wss://stream.example.com/ws?access_token=SECRET", f"wss://stream.example.com/ws?access_token={REDACTED}"),
    ("https://x.example/feed?token=SECRET#top", f"https://x.example/feed?token={REDACTED}#top"),
    ("https://b.s3.amazonaws.com/o?X-Amz-Expires=60&X-Amz-Signature=SECRET",
     f"https://b.s3.amazonaws.com/o?X-Amz-Expires=60&X-Amz-Signature={REDACTED}"),
    ("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=SECRET",
     f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={REDACTED}"),
    ("<a href=\"https://x.example/a?alt=sse&amp;key=SECRET\">retry</a>",
     f"<a href=\"https://x.example/a?alt=sse&amp;key={REDACTED}\">retry</a>"),  # an HTML error page
    ("fetch failed (https://x.example/a?key=SECRET).", f"fetch failed (https://x.example/a?key={REDACTED})."),
    ('{"url": "https://x.example/a?apiKey=SECRET"}', f'{{"url": "https://x.example/a?apiKey={REDACTED}"}}'),
    # a form body or a key/value connection string quoted in an error: the name decides, no "?" needed
    ("token endpoint said: access_token=SECRET&token_type=bearer&expires_in=3600",
     f"token endpoint said: access_token={REDACTED}&token_type=bearer&expires_in=3600"),
    ("connection to 'host=db user=app password=SECRET dbname=x' failed",
     f"connection to 'host=db user=app password={REDACTED} dbname=x' failed"),
    # both at once
    ("https://u:SECRET@h.example/p?key=SECRET", f"https://u:{REDACTED}@h.example/p?key={REDACTED}"),
])
def test_a_secret_query_parameter_is_redacted_and_the_rest_of_the_url_kept(text, expected):
    assert _text(text) == expected
    assert "SECRET" not in _text(text)


@pytest.mark.parametrize("text", [
    "http://localhost:8080/v1/chat?page=2&max_tokens=100&key_id=k1&monkey=1",
    "https://example.com/search?q=password&token_type=bearer&tokens=5",
    "ssh://git@github.com/o/r.git and https://git@example.com/r",  # a user without a password
    "mail bob@example.com at http://[::1]:8080/x/a@b and https://host:8443/path@v2",
    "the primary key=id column; key=value pairs; a keyring=gnome",
    "https://u:@host/empty-password",
    "see https://example.com/a?key= (empty)",
])
def test_urls_and_text_without_a_credential_are_kept(text):
    assert _text(text) == text


def test_the_query_rule_uses_is_secret_key_plus_key_and_sig():
    # the names a query string may carry a credential under: every secret key name, and the two
    # short ones (Gemini's and Google Maps' ``key``, an Azure SAS ``sig``) that are no secret as
    # an attribute key
    assert not is_secret_key("key") and not is_secret_key("sig")
    for name in ("key", "sig", "api_key", "client_secret", "refresh_token", "password"):
        assert _text(f"https://h.example/p?{name}=SECRET") == f"https://h.example/p?{name}={REDACTED}"


# properties -----------------------------------------------------------------------------
_SAFE = string.ascii_letters + string.digits + "-_~"
_label = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
_host = st.lists(_label, min_size=1, max_size=3).map(".".join)
_port = st.none() | st.integers(1, 65535)
_path = st.lists(st.text(_SAFE + ".:", max_size=8), max_size=3).map(lambda segs: "".join("/" + s for s in segs))
_scheme = st.sampled_from(["http", "https", "postgresql", "redis", "amqp", "mysql+pymysql", "wss"])
_plain_name = st.text(string.ascii_letters + "_", min_size=1, max_size=12).filter(
    lambda n: not is_secret_key(n) and n.lower() not in ("key", "sig"))
_secret_name = st.sampled_from(["key", "sig", "api_key", "apiKey", "access_token", "token", "client_secret",
                                "X-Amz-Signature", "password", "refresh_token"])
_value = st.text(_SAFE + "%+", min_size=1, max_size=16)
# prose around a URL: no "=" (a name=value of its own), no "://", no Bearer/Basic credential
_prose = st.text(st.characters(blacklist_characters="=/:@?&#", blacklist_categories=("Cs",)), max_size=30).filter(
    lambda t: "bearer" not in t.lower() and "basic" not in t.lower())


def _url(scheme, userinfo, host, port, path, params):
    query = "&".join(f"{k}={v}" for k, v in params)
    return (f"{scheme}://{userinfo}{host}{'' if port is None else f':{port}'}{path}"
            f"{'?' + query if query else ''}")


@given(_prose, _scheme, st.none() | st.text(_SAFE, min_size=1, max_size=8), _host, _port, _path,
       st.lists(st.tuples(_plain_name, _value), max_size=4), _prose)
def test_redact_never_changes_text_without_a_credential(before, scheme, user, host, port, path, params, after):
    url = _url(scheme, f"{user}@" if user else "", host, port, path, params)
    text = f"{before} {url} {after}"
    assert redact(text) == text
    assert redact({"note": text, "n": [text]}) == {"note": text, "n": [text]}


@given(_prose, _scheme, st.text(_SAFE, max_size=8),
       st.text(string.printable.translate(str.maketrans("", "", string.whitespace + "/?#")), min_size=1, max_size=20),
       _host, _port, _path, st.lists(st.tuples(_plain_name, _value), max_size=3),
       st.lists(st.tuples(_secret_name, _value), min_size=1, max_size=2), st.randoms(use_true_random=False), _prose)
def test_redact_removes_every_url_credential_and_keeps_the_rest(before, scheme, user, password, host, port, path,
                                                                plain, secret, rnd, after):
    params = [*plain, *secret]
    rnd.shuffle(params)
    url = _url(scheme, f"{user}:{password}@", host, port, path, params)
    clean = _url(scheme, f"{user}:{REDACTED}@", host, port, path,
                 [(k, REDACTED if (k, v) in secret else v) for k, v in params])
    assert redact(f"{before} {url} {after}") == f"{before} {clean} {after}"


_FRAGMENTS = st.sampled_from([
    "https://", "redis://", "u", ":", "@", "pw", "p@ss", "?", "&", "key=", "token=", "api_key=", "=", "#", "/",
    " ", ".", ";", ")", "'", '"', REDACTED, "[", "]", "Bearer ", "Basic ", "dXNlcjpwdw==", "password=", "h.example",
])


@given(st.lists(_FRAGMENTS | st.text(max_size=6), max_size=25).map("".join))
# a pair right after a Bearer token, hidden inside a kept pair's value on the first pass
@example("https://Bearer dXNlcjpwdw==token=https://")
# a redacted value that held the "/" ending what is then an authority with a password
@example("x://u:token=a/b&c@h")
def test_redact_is_idempotent(text):
    once = redact(text)
    assert redact(once) == once
    assert redact({"a": [text]}) == {"a": [once]}


# the real recording path ----------------------------------------------------------------
def test_a_url_password_never_reaches_the_stored_sqlite_row(tmp_path):
    path = tmp_path / "sessions.db"
    url = "postgresql://app:hunter2-SECRET@db.internal:5432/app?sslmode=require&password=also-SECRET"
    gemini = f"{GEMINI}?alt=sse&key=AIzaSyA-SECRET"

    async def scenario():
        store = SqliteStorage(path)
        try:
            async with TraceRecorder(store).run(SESSION) as run:
                async with run.tool("db_query", {"db.url": url}) as tool:
                    await tool.event("retry", {"reason": f"could not connect to {url}: timeout",
                                               "request": {"url": gemini}})
                    tool.set_attrs({"tool.error": f"400 Bad Request for url: {gemini}"})
            return run.trace_id, await store.list_spans(run.trace_id), await store.list_events(run.trace_id)
        finally:
            await store.close()

    trace_id, (span,), (event,) = asyncio.run(scenario())
    assert event.attrs == {"reason": f"could not connect to postgresql://app:{REDACTED}@db.internal:5432/app"
                                     f"?sslmode=require&password={REDACTED}: timeout",
                           "request": {"url": f"{GEMINI}?alt=sse&key={REDACTED}"}}
    assert span.attrs["db.url"] == (f"postgresql://app:{REDACTED}@db.internal:5432/app"
                                    f"?sslmode=require&password={REDACTED}")
    assert span.attrs["tool.error"] == f"400 Bad Request for url: {GEMINI}?alt=sse&key={REDACTED}"
    conn = sqlite3.connect(path)
    try:
        rows = [data for table in ("traces", "spans", "events")
                for (data,) in conn.execute(f"SELECT data FROM {table} WHERE trace_id = ?", (trace_id,))]
    finally:
        conn.close()
    assert len(rows) == 3 and all("SECRET" not in data for data in rows)
    assert any("db.internal:5432" in data for data in rows)  # the trace stays useful


def _trace_rows(path) -> list[str]:
    """Every stored trace, span and event row of the store at ``path``, as its JSON text."""
    conn = sqlite3.connect(path)
    try:
        return [data for table in ("traces", "spans", "events") for (data,) in conn.execute(f"SELECT data FROM {table}")]
    finally:
        conn.close()


def test_a_failing_tool_whose_error_quotes_a_connection_url_leaves_no_password_in_the_trace(tmp_path):
    # The loop stores a failed tool's error as the tool span's tool.error: a database driver's
    # message quotes the URL it could not reach, password included.
    path = tmp_path / "sessions.db"
    router = ToolRouter()

    @tool(router=router, description="Query the database", mode="read")
    async def db_query(sql: str) -> str:
        raise ConnectionError("could not connect to postgresql://app:hunter2-SECRET@db.internal:5432/app")

    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"id": "q", "name": "db_query",
                                                               "arguments": {"sql": "select 1"}}]), "done"])
    store = SqliteStorage(path)
    try:
        events = run_loop(CoreLoop(provider, router, storage=store, recorder=TraceRecorder(store)), USER)
        assert completion(events)["status"] == "completed"
        (span,) = [s for s in asyncio.run(store.list_spans(completion(events)["traceId"])) if s.name == "db_query"]
    finally:
        asyncio.run(store.close())
    assert span.attrs["tool.error"].endswith(f"postgresql://app:{REDACTED}@db.internal:5432/app")
    rows = _trace_rows(path)
    assert rows and not [row for row in rows if "SECRET" in row]


def test_a_provider_error_quoting_its_request_url_leaves_no_key_in_the_trace(tmp_path):
    # A real GoogleGenAIProvider against a real server whose 400 body quotes the request URL with
    # the key as Gemini's ?key= parameter, and a proxy URL with a password. The llm.request span
    # stores the error's kind and type, never its message, so neither reaches a stored row.
    path = tmp_path / "sessions.db"
    key = "AIzaSyA-KEY-SECRET"
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                      "message": f"bad request for {GEMINI}?key={key} via http://proxy:proxy-SECRET@proxy.internal:3128"}}
    store = SqliteStorage(path)
    try:
        with ReplayServer([Reply.json(400, body)]) as server:
            provider = GoogleGenAIProvider("gemini-2.5-flash", key, base_url=server.url)
            events = run_loop(CoreLoop(provider, ToolRouter(), storage=store, recorder=TraceRecorder(store)), USER)
        assert completion(events)["status"] == "failed"
        spans = asyncio.run(store.list_spans(completion(events)["traceId"]))
    finally:
        asyncio.run(store.close())
    assert [(s.name, s.attrs["llm.error_kind"]) for s in spans] == [("llm.request", "invalid_request")]
    rows = _trace_rows(path)
    assert rows and not [row for row in rows if "SECRET" in row]
