"""A real HTTP server on 127.0.0.1 that takes a request and never finishes its answer.

Two modes:

- ``silent``: reads the whole request, then sends nothing at all (no status line), as a
  provider that accepted the connection and hangs;
- ``keepalive``: answers ``200 text/event-stream`` and then sends an SSE comment
  (``: keep-alive``) every 20 ms, for ever: the client's read timeout never fires.

Either way the connection stays open until the client closes it, which the server notes
(``closed_by_client``: the count of connections the client ended), or until ``close()``.
Every request's body is kept (``bodies``); ``asked`` is set once the first one arrived.
"""

from __future__ import annotations

import socket
import threading
from typing import Literal

Mode = Literal["silent", "keepalive"]


class HangingServer:
    """``with HangingServer("silent") as server: ... server.url``."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.bodies: list[bytes] = []
        self.asked = threading.Event()
        self.closed_by_client = 0
        self.client_closed = threading.Event()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> HangingServer:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._acceptor.join()
        for thread in self._threads:
            thread.join()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.02)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = self._recv(conn)
                if chunk is None:
                    continue
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                chunk = self._recv(conn)
                if chunk == b"":
                    return
                body += chunk or b""
            with self._lock:
                self.bodies.append(body)
            self.asked.set()
            if self.mode == "keepalive":
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            while not self._closing.is_set():
                if self.mode == "keepalive":
                    try:
                        conn.sendall(b": keep-alive\n\n")
                    except OSError:
                        self._gone()
                        return
                chunk = self._recv(conn)
                if chunk == b"":
                    self._gone()
                    return

    def _recv(self, conn: socket.socket) -> bytes | None:
        """Bytes, b"" when the client closed (or reset) the connection, None when none came yet."""
        try:
            return conn.recv(65536)
        except TimeoutError:
            return None
        except OSError:
            return b""

    def _gone(self) -> None:
        with self._lock:
            self.closed_by_client += 1
        self.client_closed.set()
