"""Transports: how the runtime's methods and events reach a host.

- :class:`TransportAdapter`: the protocol (``emit``, ``receive``, ``aclose``).
- :class:`SSEEvent`: one event ``{event, data}`` (an optional ``id``).
- :class:`StdioJsonRpcTransport`: newline-delimited JSON-RPC 2.0 on stdin/stdout (the sidecar).
- :class:`FastAPISseTransport` and :func:`create_app`: HTTP POST routes answering with
  ``text/event-stream`` (extra ``[server]``; fastapi is imported only when asked for).
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import SSEEvent, TransportAdapter
from .jsonrpc import RpcError

_LAZY = {
    "StdioJsonRpcTransport": ".stdio",
    "FastAPISseTransport": ".fastapi_sse",
    "create_app": ".fastapi_sse",
}

__all__ = ["FastAPISseTransport", "RpcError", "SSEEvent", "StdioJsonRpcTransport", "TransportAdapter", "create_app"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
