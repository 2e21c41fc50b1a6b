"""An incremental Server-Sent Events decoder (the WHATWG "event stream" interpretation).

Guarantees (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
- Bytes may be fed in any split: a UTF-8 sequence, a line or a CRLF pair cut across two
  feeds decodes as if it came whole. Lines end at CRLF, LF or CR. A leading BOM is dropped.
- Fields ``data`` (several lines join with ``\\n``), ``event`` (the type; ``message`` when
  none), ``id`` (kept for later events; ignored when it contains NUL) and ``retry`` (only
  ASCII digits) are interpreted; comments (``:`` lines) and unknown fields are ignored. One
  space after the colon is dropped.
- An event is dispatched at a blank line, and only when it has at least one ``data`` line.
  A last event not followed by a blank line is not dispatched (:meth:`SSEDecoder.close` says
  whether such a fragment was left over).

This module imports nothing heavy; :func:`aiter_sse_messages` takes an already-open
``httpx.Response`` and so needs no httpx import of its own.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

__all__ = ["SSEDecoder", "SSEMessage", "aiter_sse_batches", "aiter_sse_data_batches", "aiter_sse_messages"]


@dataclass(slots=True)
class SSEMessage:
    """One dispatched event: its type, its data, the last event id seen, and a retry hint."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecoder:
    """Feed bytes, get whole :class:`SSEMessage` objects back (never a partial one)."""

    __slots__ = (
        "_data",
        "_event",
        "_in_event",
        "_last_id",
        "_pending",
        "_retry",
        "_skip_lf",
        "_started",
        "_utf8",
    )

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self._retry: int | None = None
        self._in_event = False

    @property
    def last_event_id(self) -> str:
        """The id a reconnect would send as ``Last-Event-ID``."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        """Decode ``chunk`` and return the events it completed, in order."""
        text = self._utf8.decode(chunk)
        return self._feed_text(text, False) if text else []

    def feed_data(self, chunk: bytes) -> list[str]:
        """:meth:`feed` for a reader that needs only the events' data (not their type, id or
        retry): the ``data`` of each event ``chunk`` completed, in order. The same decoding and
        state (``last_event_id`` included); only no :class:`SSEMessage` is built."""
        text = self._utf8.decode(chunk)
        return self._feed_text(text, True) if text else []

    def close(self) -> bool:
        """End of stream. True when an undispatched fragment (a line or an event) was left over.

        Per the spec the fragment is discarded, not dispatched.
        """
        tail = self._utf8.decode(b"", final=True)
        leftover = bool(self._pending or tail or self._in_event)
        self._pending = ""
        self._data = []
        self._event = ""
        self._in_event = False
        return leftover

    def _feed_text(self, text: str, data_only: bool) -> list[Any]:
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if "\r" in text:
            # A CR at the very end may be the first half of a CRLF split across feeds.
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._pending += text
            return []
        text = self._pending + text
        self._pending = ""
        out: list[Any] = []
        if not self._in_event and "\n\n" in text:
            text = self._events(text, out, data_only)
        lines = text.split("\n")
        self._pending = lines.pop()
        self._lines(lines, out, data_only)
        return out

    def _events(self, text: str, out: list[Any], data_only: bool) -> str:
        """The hot path, at an event boundary: each piece ending in a blank line is one event;
        a lone ``data:`` line (every event of a provider's stream) becomes a message (or its
        data) directly, any other piece goes through :meth:`_lines`. Returns the text after the
        last blank line.

        At a boundary (``_in_event`` False) the event type and retry were reset by the last
        dispatch, and a piece ends with a blank line, so the boundary holds after each piece.
        """
        pieces = text.split("\n\n")
        rest = pieces.pop()
        last_id = self._last_id
        add = out.append
        for piece in pieces:
            if piece[:6] == "data: " and "\n" not in piece:
                add(piece[6:] if data_only else SSEMessage("message", piece[6:], last_id))
            elif piece[:5] == "data:" and "\n" not in piece:
                add(piece[5:] if data_only else SSEMessage("message", piece[5:], last_id))
            else:
                self._lines(piece.split("\n"), out, data_only)
                self._lines(("",), out, data_only)  # the blank line that ended the piece
                last_id = self._last_id
        return rest

    def _lines(self, lines: Any, out: list[Any], data_only: bool) -> None:
        for line in lines:
            if line:
                self._field(line)
            elif self._in_event:
                self._dispatch(out, data_only)

    def _field(self, line: str) -> None:
        self._in_event = True
        colon = line.find(":")
        if colon == 0:
            return  # a comment
        if colon < 0:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1:]
            if value[:1] == " ":
                value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)

    def _dispatch(self, out: list[Any], data_only: bool) -> None:
        data = self._data
        if data:
            joined = data[0] if len(data) == 1 else "\n".join(data)
            out.append(joined if data_only else SSEMessage(self._event or "message", joined, self._last_id, self._retry))
        self._data = []
        self._event = ""
        self._retry = None
        self._in_event = False


async def aiter_sse_messages(response: Any, decoder: SSEDecoder | None = None) -> AsyncIterator[SSEMessage]:
    """Yield the events of an open streaming ``httpx.Response`` as its bytes arrive.

    The body is read with ``aiter_bytes`` (content-encoding undone). httpx exceptions
    (a dropped connection, a read timeout) propagate unchanged; the caller maps them (see
    :func:`.classify.transport_error`). A trailing fragment at end of stream is discarded,
    as the spec says; pass your own ``decoder`` to ask :meth:`SSEDecoder.close` about it.
    """
    async for batch in aiter_sse_batches(response, decoder):
        for message in batch:
            yield message


async def aiter_sse_batches(response: Any, decoder: SSEDecoder | None = None) -> AsyncIterator[list[SSEMessage]]:
    """Like :func:`aiter_sse_messages`, but one non-empty list per network read: the events
    that read completed, in order. A provider that handles a list per step pays the
    async-iterator hop once per read instead of once per event (what a fast stream needs)."""
    decoder = decoder or SSEDecoder()
    async for chunk in response.aiter_bytes():
        batch = decoder.feed(chunk)
        if batch:
            yield batch


async def aiter_sse_data_batches(response: Any, decoder: SSEDecoder | None = None) -> AsyncIterator[list[str]]:
    """:func:`aiter_sse_batches` for a reader that needs only each event's data
    (:meth:`SSEDecoder.feed_data`): one non-empty list of data strings per network read."""
    decoder = decoder or SSEDecoder()
    async for chunk in response.aiter_bytes():
        batch = decoder.feed_data(chunk)
        if batch:
            yield batch
