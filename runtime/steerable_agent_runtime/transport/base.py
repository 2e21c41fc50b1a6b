"""The transport contract: SSEEvent and the TransportAdapter protocol."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..models import replace_lone_surrogates

# built once (json.dumps with separators builds one per call); allow_nan=False: NaN is no JSON
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
SURROGATE_ESCAPE = "\\ud"  # how an ASCII encoder writes any surrogate: half of a pair, or a lone one


def dumps(value: Any) -> str:
    """Compact ASCII JSON; a NaN or infinity (a model or a host tool can produce one, and
    every JSON parser refuses it) is written as null, and a lone UTF-16 surrogate (a model
    can stream one: half an emoji) as U+FFFD, as the record stores it: strict parsers refuse
    its escape, and the sidecar itself refuses it as text."""
    try:
        out = _ENCODER.encode(value)
    except ValueError:  # only a non-finite float makes this encoder fail
        return _ENCODER.encode(_sanitize(value))
    # a surrogate escape: a character beyond the BMP (an escaped pair) or a lone surrogate
    return _ENCODER.encode(_sanitize(value)) if SURROGATE_ESCAPE in out else out


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (itself when it has none)."""
    return replace_lone_surrogates(text)


def _sanitize(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {_sanitize(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    return value


@dataclass(frozen=True)
class SSEEvent:
    """One event: a name (``stream.chunk``, a JSON-RPC method) and its JSON-ready ``data``.

    ``id`` is the JSON-RPC request id of an incoming request (None for a notification) or the
    SSE ``id:`` field of an outgoing event.
    """

    event: str
    data: Any = None
    id: str | int | None = None

    def encode_sse(self) -> bytes:
        """The event as one SSE frame (``event:``, ``id:``, ``data:`` lines, a blank line).

        ``data`` is compact JSON, ASCII only, so it never contains a newline.
        """
        head = f"event: {self.event}\n"
        if self.id is not None:
            head += f"id: {self.id}\n"
        return (head + "data: " + dumps(self.data) + "\n\n").encode()


@runtime_checkable
class TransportAdapter(Protocol):
    """A bidirectional channel of events between the runtime and a host.

    ``emit`` sends one event and returns once the transport accepted it (a bounded transport
    waits for room: a slow reader slows the producer, nothing is dropped). ``receive`` yields
    the host's incoming events in arrival order until the host goes away. ``aclose`` stops
    both directions; it is idempotent.
    """

    async def emit(self, event: SSEEvent) -> None: ...

    def receive(self) -> AsyncIterator[SSEEvent]: ...

    async def aclose(self) -> None: ...
