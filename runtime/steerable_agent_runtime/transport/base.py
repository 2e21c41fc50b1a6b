"""The transport contract: SSEEvent and the TransportAdapter protocol."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

_ENCODER = json.JSONEncoder(separators=(",", ":"))


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
        return (head + "data: " + _ENCODER.encode(self.data) + "\n\n").encode()


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
