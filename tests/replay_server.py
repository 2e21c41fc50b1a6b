"""A real HTTP server on 127.0.0.1 that replays scripted responses (the providers' test model).

Each request takes the next :class:`Reply` from the script (the last one repeats when the
script runs out, unless ``repeat_last=False``, which answers 599). A reply is a status, headers
and a body given as chunks; ``drop_after`` closes the connection after that many chunks
without finishing the body (a stream cut mid-way); ``delay_s`` sleeps before each chunk;
``stall_after`` holds the connection open, silent, for ``stall_s`` seconds after that many
chunks before sending the rest (a body that does not end with its last event); a client that
closes the connection during the stall ends it at once, and is counted in ``closed_in_stall``.
Every request is recorded (method, path, query, headers, body, the client address and port)
for assertions.

In a test::

    with ReplayServer([Reply.sse_file(path)]) as server:
        provider = OpenAICompatProvider("m", base_url=server.url + "/v1")

As a process (crash tests, the sidecar tests)::

    python -m tests.replay_server SCRIPT.json --port-file PORT

where SCRIPT.json is a list of ``{"status", "headers", "chunks" (text) | "file", "dropAfter",
"delayS", "stallAfter", "stallS"}``; the server writes its port to PORT once it listens, and serves until killed.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/event-stream"})
    chunks: list[bytes] = field(default_factory=list)
    drop_after: int | None = None
    delay_s: float = 0.0
    stall_after: int | None = None
    stall_s: float = 0.0

    @classmethod
    def sse_file(cls, path: str | Path, **kwargs: Any) -> "Reply":
        """The recorded stream in ``path``, sent one SSE event (blank-line separated) per chunk."""
        data = Path(path).read_bytes()
        return cls(chunks=split_events(data), **kwargs)

    @classmethod
    def json(cls, status: int, body: Any, headers: dict[str, str] | None = None) -> "Reply":
        """A plain JSON response (an HTTP error with its body)."""
        merged = {"content-type": "application/json", **(headers or {})}
        return cls(status=status, headers=merged, chunks=[json.dumps(body).encode()])

    @classmethod
    def from_dict(cls, spec: dict[str, Any], base: Path) -> "Reply":
        if "file" in spec:
            chunks = split_events((base / spec["file"]).read_bytes())
        else:
            chunks = [c.encode() if isinstance(c, str) else bytes(c) for c in spec.get("chunks", [])]
        headers = spec.get("headers") or {"content-type": "text/event-stream"}
        return cls(status=spec.get("status", 200), headers=headers, chunks=chunks,
                   drop_after=spec.get("dropAfter"), delay_s=spec.get("delayS", 0.0),
                   stall_after=spec.get("stallAfter"), stall_s=spec.get("stallS", 0.0))


def split_events(data: bytes) -> list[bytes]:
    """Split an SSE byte stream after each blank line, keeping every byte."""
    out: list[bytes] = []
    rest = data.replace(b"\r\n", b"\n")
    while rest:
        cut = rest.find(b"\n\n")
        if cut < 0:
            out.append(rest)
            break
        out.append(rest[: cut + 2])
        rest = rest[cut + 2 :]
    return out


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    peer: tuple[str, int] | None = None  # the client's (address, port): one per TCP connection

    def json(self) -> Any:
        return json.loads(self.body)


class _Server(ThreadingHTTPServer):
    # a listen backlog for a burst of clients (the default 5 drops connections of a hundred
    # streams started at once, which then fail as if the model had cut them)
    request_queue_size = 256


class ReplayServer:
    """A threaded HTTP server on 127.0.0.1 (an ephemeral port) replaying ``script``."""

    def __init__(self, script: list[Reply], *, repeat_last: bool = True) -> None:
        self.script = list(script)
        self.repeat_last = repeat_last
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._next = 0
        self._conns: set[Any] = set()
        self.closed_in_stall = 0  # stalls a client ended by closing its connection
        self._closing = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        # close() ends every connection (a client's keep-alive pool would otherwise hold a
        # handler thread open forever) and joins the handler threads: no thread outlives a test.
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ReplayServer":
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()

    def __enter__(self) -> "ReplayServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> Reply | None:
        with self._lock:
            if self._next < len(self.script):
                reply = self.script[self._next]
                self._next += 1
                return reply
            return self.script[-1] if (self.repeat_last and self.script) else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server._conns.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:  # the client went away first
                    pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                with server._lock:
                    server.requests.append(Recorded(self.command, parts.path, parse_qs(parts.query),
                                                    {k.lower(): v for k, v in self.headers.items()}, body,
                                                    tuple(self.client_address[:2])))
                reply = server._take()
                if reply is None:
                    reply = Reply.json(599, {"error": "replay script exhausted"})
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.drop_after is None:
                    self.send_header("content-length", str(sum(len(c) for c in reply.chunks)))
                else:
                    self.send_header("connection", "close")
                self.end_headers()
                for index, chunk in enumerate(reply.chunks):
                    if reply.drop_after is not None and index >= reply.drop_after:
                        break
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply.stall_after is not None and index == reply.stall_after:
                        if self._stall(reply.stall_s):  # close() ends the stall, as does the client
                            return
                    try:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return
                if reply.drop_after is not None:
                    self.close_connection = True

            def _stall(self, seconds: float) -> bool:
                """Stay silent for ``seconds`` (or until close()); True when the client closed
                the connection meanwhile (counted in ``closed_in_stall``)."""
                end = time.monotonic() + seconds
                while not server._closing.is_set():
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
                    if readable:
                        try:
                            gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                        except OSError:
                            gone = True
                        if gone:
                            with server._lock:
                                server.closed_in_stall += 1
                            self.close_connection = True
                            return True
                        server._closing.wait(0.02)  # bytes from the client: not an end
                return False

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    specs = json.loads(args.script.read_text())
    server = ReplayServer([Reply.from_dict(s, args.script.parent) for s in specs]).start()
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(str(server.port))
    tmp.replace(args.port_file)
    threading.Event().wait()


if __name__ == "__main__":
    main()
