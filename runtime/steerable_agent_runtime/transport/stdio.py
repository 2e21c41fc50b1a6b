"""StdioJsonRpcTransport: newline-delimited JSON-RPC 2.0 over a pair of file descriptors.

Guarantees:
- The output descriptor carries only protocol messages, each one line of ASCII JSON written
  whole and in order (one writer: the event loop's thread; the messages of one loop iteration
  are joined into one write); log lines go through ``logging`` (stderr).
- Frames up to ``max_frame`` bytes (16 MiB) are read; a longer one is skipped up to its
  newline and answered -32600 with id null; when it is the host's answer to a waiting reverse
  request (its first 4 KiB name the ``sc-N`` id), that request fails at once (RpcError)
  instead of waiting for its timeout. Blank lines are ignored.
- Input is read ahead by at most ``INPUT_BUDGET`` bytes of frames not yet taken by
  ``receive`` (one frame of any allowed size always fits): a host that writes without reading
  the answers (so the sidecar waits on its stdout) is held up in its own writes, and the
  sidecar's memory stays bounded.
- ``receive`` answers protocol errors itself (-32700, -32600) and yields only well-formed
  requests (``SSEEvent.id`` set) and notifications (``id`` None), in arrival order. Responses
  resolve the reverse request they answer; a response to an id this side never sent (or
  already timed out) is logged and ignored, as JSON-RPC says. A frame refused -32600 whose id
  names a waiting reverse request (the host's answer, malformed) fails that request at once.
- ``request`` sends a reverse request and waits at most ``timeout`` seconds for its answer:
  it returns the result, raises RpcError for an error answer and TimeoutError when none came.
- A write to a host that went away (EPIPE) marks the transport closed and calls
  ``on_host_gone`` (the sidecar shuts down: nobody can read its answers); ``receive`` ends at
  input EOF or ``aclose``.
- A write waits for a host that does not read (a full pipe) without limit, until
  ``limit_writes(wait_s)`` (a shutdown signal, input EOF): from then on it waits at most until
  that deadline, and then gives the output up as if the host were gone, so a shutdown never
  hangs on a host that stopped reading (the last line it got may then be cut).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import select
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # what json's own encoder uses for str (ASCII output)
from typing import Any

from .base import SSEEvent, clean_text
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
    error_message,
    notification_message,
    parse_frame,
    request_message,
    result_message,
)

log = logging.getLogger("steerable.sidecar.transport")

MAX_FRAME = 16 * 1024 * 1024
INPUT_BUDGET = 32 * 1024 * 1024  # bytes of frames read ahead of receive
SHUTDOWN_WRITE_WAIT_S = 3.0  # how long a shutdown waits for a host that does not read its stdout
_OVERSIZE_HEAD = 4096  # bytes of a skipped frame kept to find the reverse request it answers
_REVERSE_ID = re.compile(rb'"id"\s*:\s*"(sc-[0-9]+)"')


@dataclass(frozen=True)
class _Oversize:
    """A frame over ``max_frame`` that was skipped; ``head`` its first bytes."""

    head: bytes

_EOF = object()


class LineSplitter:
    """Cuts a byte stream into frames at ``\\n`` (a trailing ``\\r`` dropped, blank lines
    skipped); a frame longer than ``max_frame`` is dropped whole and reported as _Oversize."""

    def __init__(self, max_frame: int, post: Any) -> None:
        self.max_frame = max_frame
        self.post = post
        self.buf = bytearray()
        self.skipping = False
        self.head = b""

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._add(chunk[start:])
                return
            self._add(chunk[start:nl])
            self._finish()
            start = nl + 1

    def _add(self, piece: bytes) -> None:
        if self.skipping:
            return
        self.buf += piece
        if len(self.buf) > self.max_frame:
            self.skipping = True
            self.head = bytes(self.buf[:_OVERSIZE_HEAD])
            self.buf = bytearray()

    def _finish(self) -> None:
        if self.skipping:
            self.skipping = False
            self.post(_Oversize(self.head))
            return
        line = bytes(self.buf)
        self.buf = bytearray()
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            self.post(line)

    def end(self) -> None:
        if self.buf or self.skipping:
            self._finish()


class StdioJsonRpcTransport:
    """JSON-RPC 2.0, one message per line, on ``read_fd`` and ``write_fd``."""

    def __init__(self, read_fd: int, write_fd: int, *, max_frame: int = MAX_FRAME) -> None:
        self._read_fd = read_fd
        self._fd = write_fd
        self.max_frame = max_frame
        self._queue: asyncio.Queue[Any] | None = None
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self.host_gone = False
        self.on_host_gone: Callable[[], None] | None = None
        self._write_deadline: float | None = None
        self._nonblocking = _make_nonblocking(write_fd)  # a full pipe: wait in select, not in write
        self._budget = threading.Condition()
        self._read_ahead = 0  # bytes of frames the reader thread queued and receive has not taken

    # output ------------------------------------------------------------------------------
    def _write(self, message: dict[str, Any]) -> None:
        """Queue one message; everything queued in one event-loop iteration goes out in one
        write (in order), right after the iteration (``flush``)."""
        self._write_line(encode(message))

    def _write_line(self, line: bytes) -> None:
        if self.host_gone:
            return
        self._out.append(line)
        if not self._flush_scheduled:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        """Flush right after this event-loop iteration (at once when there is no loop)."""
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop (synchronous use): write at once
            self.flush()
            return
        self._flush_scheduled = True

    def flush(self) -> None:
        """Write everything queued, whole lines only, blocking while the host's pipe is full
        (a host that reads slowly slows the sidecar; nothing is dropped)."""
        self._flush_scheduled = False
        if not self._out:
            return
        data = memoryview(b"".join(self._out))
        self._out.clear()
        try:
            while data:
                data = data[self._write_some(data):]
        except OSError as exc:  # EPIPE, or TimeoutError from _write_some
            log.warning("the host stopped reading the protocol stream (%s)", exc)
            self.host_gone = True
            if self.on_host_gone is not None:
                self.on_host_gone()

    def _write_some(self, data: memoryview) -> int:
        """Write what the pipe takes now (0 when it is full: wait until it has room again).
        Raises TimeoutError past the ``limit_writes`` deadline, OSError when the host is gone."""
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            pass
        while True:
            deadline = self._write_deadline
            wait = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("the host did not read its stdout before the shutdown's deadline")
            if select.select([], [self._fd], [], wait)[1]:
                return 0

    def limit_writes(self, wait_s: float) -> None:
        """From now on a write waits at most ``wait_s`` more for a host that does not read
        (see the module guarantees). Safe from a signal handler or another thread."""
        if self._write_deadline is None:
            self._write_deadline = time.monotonic() + wait_s

    async def emit(self, event: SSEEvent) -> None:
        """Send ``event`` as a notification (method = event name, params = data)."""
        self._write(notification_message(event.event, event.data))

    def text_chunk_writer(self, stream_id: str) -> Callable[[str, str], None]:
        """A synchronous writer of the ``stream.chunk {streamId, <key>: <text>}`` notifications
        of one stream (``key``: ``delta`` or ``reasoningDelta``, or the loop's event kinds
        ``content_delta`` / ``reasoning_delta`` for them: the writer serves as a CoreLoop
        ``text_sink`` as it is), the relay's hot path.

        ``write(key, text)`` queues exactly the line ``emit`` would (same bytes, same order
        with every other message; ``encode`` is the reference): the fixed head of the line is
        encoded once per stream, only the text per chunk. ``write.many(key, texts)`` queues the
        lines of ``write(key, text)`` for each of ``texts`` (the same bytes), built in one join.
        """
        sid = encode_basestring_ascii(stream_id).encode()
        heads = {key: b'{"jsonrpc":"2.0","method":"stream.chunk","params":{"streamId":' + sid + b',"'
                 + key.encode() + b'":' for key in ("delta", "reasoningDelta")}
        heads["content_delta"], heads["reasoning_delta"] = heads["delta"], heads["reasoningDelta"]
        out = self._out  # never rebound: flush clears it in place

        def write(key: str, text: str) -> None:  # _write_line, inlined: this runs once per chunk
            if not self.host_gone:
                # a lone surrogate (half an emoji) goes out as U+FFFD, as ``dumps`` writes it; only
                # non-ASCII text can hold one (isascii reads a flag: no scan)
                escaped = encode_basestring_ascii(text if text.isascii() else clean_text(text))
                out.append(heads[key] + escaped.encode() + b"}}\n")
                if not self._flush_scheduled:
                    self._schedule_flush()

        # many(key, texts): write(key, text) for each text, the lines built by one join
        # (between two texts' escaped strings: the end of one line and the head of the next)
        str_heads = {key: head.decode() for key, head in heads.items()}
        seps = {key: "}}\n" + head for key, head in str_heads.items()}

        def many(key: str, texts: list[str]) -> None:
            if not self.host_gone and texts:
                if "".join(texts).isascii():  # (one copy of the texts, not a scan of the lines with their heads)
                    body = seps[key].join(map(encode_basestring_ascii, texts))
                else:  # as in write
                    body = seps[key].join([encode_basestring_ascii(clean_text(text)) for text in texts])
                out.append((str_heads[key] + body + "}}\n").encode())
                if not self._flush_scheduled:
                    self._schedule_flush()

        write.many = many  # type: ignore[attr-defined]
        return write

    def respond(self, request_id: str | int, result: Any) -> None:
        """Answer request ``request_id`` with ``result``."""
        self._write(result_message(request_id, result))

    def respond_error(self, request_id: RequestId, error: RpcError) -> None:
        """Answer request ``request_id`` (None when it could not be read) with ``error``."""
        self._write(error_message(request_id, error))

    async def request(self, method: str, params: Any, *, timeout: float) -> Any:
        """A reverse request to the host; see the module guarantees."""
        rid = f"sc-{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            self._write(request_message(rid, method, params))
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(rid, None)

    # input -------------------------------------------------------------------------------
    async def receive(self) -> AsyncIterator[SSEEvent]:
        """Incoming requests and notifications until input EOF or ``aclose``."""
        loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        queue = self._queue
        threading.Thread(target=self._read_lines, args=(loop, queue), name="stdin-reader", daemon=True).start()
        while True:
            item = await queue.get()
            if item is _EOF:
                return
            if isinstance(item, bytes):
                with self._budget:
                    self._read_ahead -= len(item)
                    self._budget.notify()
            try:
                event = self._handle_line(item)
            except Exception:  # a bug must not end the protocol: answer, log, keep serving
                log.exception("internal error reading a frame")
                self.respond_error(None, RpcError(INTERNAL_ERROR, "internal error reading a frame",
                                                  hint="a bug: report it with the sidecar's stderr log"))
                continue
            if event is not None:
                yield event

    def _handle_line(self, item: Any) -> SSEEvent | None:
        if isinstance(item, _Oversize):
            error = RpcError(INVALID_REQUEST, f"invalid request: a frame exceeds {self.max_frame} bytes",
                             hint="send frames of at most 16 MiB")
            found = _REVERSE_ID.search(item.head)
            future = self._pending.get(found.group(1).decode()) if found else None
            if future is not None and not future.done():  # an answer too big to read: fail its request now
                future.set_exception(RpcError(INVALID_REQUEST, f"the host's answer exceeds {self.max_frame} bytes",
                                              hint="return less data from the tool (at most 16 MiB a frame)"))
            self.respond_error(None, error)
            return None
        frame = parse_frame(item)
        if isinstance(frame, RpcError):
            if frame.silent:
                log.warning("ignored a notification: %s", frame.message)
            else:
                self._fail_answered(frame)
                self.respond_error(frame.request_id, frame)
            return None
        if isinstance(frame, Response):
            self._resolve(frame)
            return None
        if isinstance(frame, Notification):
            return SSEEvent(frame.method, frame.params, None)
        assert isinstance(frame, Request)
        if frame.id is None:  # JSON-RPC discourages it, and SSEEvent.id None means a notification
            self.respond_error(None, RpcError(INVALID_REQUEST, "invalid request: id null is not supported",
                                              hint="use a string or integer id, or omit id for a notification"))
            return None
        return SSEEvent(frame.method, frame.params, frame.id)

    def _fail_answered(self, error: RpcError) -> None:
        """A frame without a method refused -32600 whose id names a waiting reverse request was
        the host's answer to it, malformed (no or another ``jsonrpc``, neither result nor
        error): that request fails now instead of waiting for its timeout."""
        if not error.malformed_answer:  # a request (it names a method) with that id is the host's own
            return
        future = self._pending.get(error.request_id) if isinstance(error.request_id, str) else None
        if future is not None and not future.done():
            future.set_exception(RpcError(INVALID_REQUEST, f"the host's answer is malformed ({error.message})",
                                          hint="answer with {\"jsonrpc\": \"2.0\", \"id\": ..., \"result\": ...}"))

    def _resolve(self, response: Response) -> None:
        future = self._pending.get(response.id) if isinstance(response.id, str) else None
        if future is None or future.done():
            log.warning("ignored a response to id %r: no request with that id is waiting", response.id)
            return
        if response.error is not None:
            err = response.error
            data = err.get("data") if isinstance(err.get("data"), dict) else {}
            future.set_exception(RpcError(int(err.get("code", -32603)) if isinstance(err.get("code"), int) else -32603,
                                          str(err.get("message", "error")), hint=data.get("hint"), data=data))
        else:
            future.set_result(response.result)

    def _read_lines(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        # Raw os.read on the descriptor (no BufferedReader: a daemon thread blocked inside one
        # aborts the interpreter at exit).
        def post(item: Any) -> None:
            if isinstance(item, bytes):
                with self._budget:  # wait (holding up the host's writes) while too much is queued
                    while self._read_ahead and self._read_ahead + len(item) > INPUT_BUDGET and not self._closed:
                        self._budget.wait(0.5)
                    self._read_ahead += len(item)
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                pass

        lines = LineSplitter(self.max_frame, post)
        try:
            while chunk := _read_some(self._read_fd):
                lines.feed(chunk)
            lines.end()
        except OSError as exc:
            log.warning("reading the protocol input failed (%s): treating it as EOF", exc)
        self.limit_writes(SHUTDOWN_WRITE_WAIT_S)  # the host hung up: the shutdown must not wait on it
        post(_EOF)

    def fail_pending(self) -> None:
        """Fail every reverse request still waiting (ConnectionError): nobody will answer it."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the sidecar is shutting down"))

    async def aclose(self) -> None:
        """Stop: end ``receive``, fail waiting reverse requests. Idempotent."""
        self._closed = True
        self.flush()
        if self._nonblocking:  # leave the pipe as the host gave it
            self._nonblocking = False
            try:
                os.set_blocking(self._fd, True)
            except OSError:
                pass
        self.fail_pending()
        if self._queue is not None:
            self._queue.put_nowait(_EOF)


def _make_nonblocking(fd: int) -> bool:
    """Put a pipe or socket ``fd`` in non-blocking mode (a full pipe is then waited for in
    select, where a shutdown can end the wait); other files (a terminal, a regular file) stay
    as they are. Whether it did."""
    try:
        if not stat.S_ISFIFO(mode := os.fstat(fd).st_mode) and not stat.S_ISSOCK(mode):
            return False
        os.set_blocking(fd, False)
    except OSError:
        return False
    return True


def _read_some(fd: int) -> bytes:
    """One read of up to 1 MiB (b"" at EOF); waits for data when ``fd`` is non-blocking (the
    host may have given the same socket for input and output)."""
    while True:
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:
            select.select([fd], [], [])
