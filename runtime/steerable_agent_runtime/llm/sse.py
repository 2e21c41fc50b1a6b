"""An incremental Server-Sent Events decoder (the WHATWG "event stream" interpretation).

Guarantees (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
- Bytes may be fed in any split: a UTF-8 sequence, a line or a CRLF pair cut across two
  feeds decodes as if it came whole. Lines end at CRLF, LF or CR. A leading BOM is dropped.
- Fields ``data`` (several lines join with ``\\n``), ``event`` (the type; ``message`` when
  none), ``id`` (kept for later events; ignored when it contains NUL) and ``retry`` (only
  ASCII digits) are interpreted; comments (``:`` lines) and unknown fields are ignored. One
  space after the colon is dropped. A line that is no field (an unknown name) goes to
  :meth:`SSEDecoder.other_line`, which ignores it (a subclass may read it).
- An event is dispatched at a blank line, and only when it has at least one ``data`` line.
  A last event not followed by a blank line is not dispatched (:meth:`SSEDecoder.close` says
  whether such a fragment was left over).

This module imports nothing heavy; :func:`aiter_sse_messages` takes an already-open
``httpx.Response`` and so needs no httpx import of its own.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import accumulate
from json.decoder import scanstring
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
        "_runs",
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
        self._runs: tuple[str, str, Any] | None = None

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

    def text_runs(self, head: str | None, tail: str = "") -> None:
        """For :meth:`feed_data`: read runs of events ``data: {head}<string>{tail}`` whole.

        ``head`` ends with a JSON string's opening quote and ``tail`` starts with its closing
        quote (a :class:`~.openai_compat_template.ChunkTemplate`'s frame). From now on, each run
        of consecutive events that are one ``data:`` line of ``head``, one JSON string body
        (strictly: escapes decoded as ``json.loads`` decodes them, no raw control character)
        and ``tail`` comes as ONE item: a ``list`` of the decoded strings, in order, in the
        place of those events' data (every other event still comes as its data string).
        Nothing else changes: the events, their order, ``last_event_id``. ``head=None``, or a
        frame with a line break in it, turns it off.
        """
        if head is None or "\n" in head or "\n" in tail or "\r" in head or "\r" in tail or not tail:
            self._runs = None
        else:
            # the cut is a compiled pattern: str.split prepares a long separator again at each
            # occurrence (CPython's two-way search), re's literal search does it once
            self._runs = ("data: " + head, tail + "\n\n", re.compile(re.escape(tail + "\n\ndata: " + head)).split)

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
            if data_only and self._runs is not None:
                text = self._runs_and_events(text, out)
            else:
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

    def _runs_and_events(self, text: str, out: list[Any]) -> str:
        """:meth:`_events` (data only) with the runs of :meth:`text_runs` read whole.

        ``text`` (at an event boundary) is cut at each ``sep``: ``tail``, the blank line,
        ``data: `` and ``head``. Neither ``head`` nor ``tail`` holds a line break and a string
        body holds no raw one, so the blank line in a ``sep`` is always the end of an event:
        each cut is at an event boundary, and the piece between two cuts is either the body of
        one event of the frame (when it is a JSON string body) or whole events, the last of
        them ending in the frame's tail (read by :meth:`_events`, as are the text before the
        first frame event and after the last cut). Pieces without a quote, a backslash or a
        control character (the common case) are their own value: all are checked by one search.
        """
        prefix, suffix, cut_at_sep = self._runs  # type: ignore[misc]
        pieces = cut_at_sep(text)
        last = len(pieces) - 1
        if last == 0:
            return self._events(text, out, True)
        if pieces[0].startswith(prefix):
            pieces[0] = pieces[0][len(prefix):]
            bodies = pieces[:last]
        else:  # whole events, the last one of the frame
            self._events(pieces[0] + suffix, out, True)
            bodies = pieces[1:last]
        joined = "".join(bodies)
        bad = _UNSAFE.search(joined)
        if bad is None:
            run = bodies
        else:
            ends = list(accumulate(map(len, bodies)))
            run, at = [], 0
            while bad is not None:
                cut = bisect_right(ends, bad.start())  # the body holding that character
                run += bodies[at:cut]
                value = _string_body(bodies[cut])
                if value is not None:
                    run.append(value)
                else:
                    if run:
                        out.append(run)
                        run = []
                    self._events(prefix + bodies[cut] + suffix, out, True)
                at = cut + 1
                bad = _UNSAFE.search(joined, ends[cut]) if at < len(bodies) else None
            run += bodies[at:]
        if run:
            out.append(run)
        return self._events(prefix + pieces[last], out, True)

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
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
        else:
            self.other_line(line)

    def other_line(self, line: str) -> None:
        """A line that is no SSE field (an unknown field name: the spec ignores it; comments do
        not come here). Ignored; a subclass for a wire that writes outside the SSE framing reads
        such lines here. Called only for those lines, so the usual event costs nothing more."""

    def _dispatch(self, out: list[Any], data_only: bool) -> None:
        data = self._data
        if data:
            joined = data[0] if len(data) == 1 else "\n".join(data)
            out.append(joined if data_only else SSEMessage(self._event or "message", joined, self._last_id, self._retry))
        self._data = []
        self._event = ""
        self._retry = None
        self._in_event = False


#: a character that a JSON string body holds only escaped, or that starts an escape
_UNSAFE = re.compile(r'["\\\x00-\x1f]')


def _string_body(body: str) -> str | None:
    """The value of ``body`` as the inside of a JSON string (``json.loads`` decoding, strict),
    or None when it is not exactly one string body (an unescaped quote, a bad escape, a raw
    control character, a trailing backslash)."""
    try:
        value, end = scanstring(body + '"', 0)
    except ValueError:
        return None
    return value if end == len(body) + 1 else None


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
