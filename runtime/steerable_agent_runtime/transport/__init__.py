"""Transports: how the runtime's methods and events reach a host.

- :class:`TransportAdapter`: the protocol (``emit``, ``receive``, ``aclose``).
- :class:`SSEEvent`: one event ``{event, data}`` (an optional ``id``).
- :class:`StdioJsonRpcTransport`: newline-delimited JSON-RPC 2.0 on stdin/stdout (the sidecar).
- :class:`FastAPISseTransport` and :func:`create_app`: HTTP POST routes answering with
  ``text/event-stream`` (extra ``[server]``; fastapi is imported only when asked for).
"""

from __future__ import annotations

from ..lazy import lazy_exports
from .base import SSEEvent, TransportAdapter
from .jsonrpc import RpcError

_LAZY = {
    "StdioJsonRpcTransport": ".stdio",
    "FastAPISseTransport": ".fastapi_sse",
    "create_app": ".fastapi_sse",
}

__all__ = ["FastAPISseTransport", "RpcError", "SSEEvent", "StdioJsonRpcTransport", "TransportAdapter", "create_app"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
