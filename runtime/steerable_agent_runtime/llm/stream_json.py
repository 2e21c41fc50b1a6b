"""One SSE data field -> its JSON object, or a clear LLMError (never a crash)."""

from __future__ import annotations

import json
from typing import Any

from .classify import malformed_data_error


def decode_event(data: str, *, url: str, provider: str, secrets: tuple[str | None, ...]) -> dict[str, Any]:
    """The JSON object in ``data``; raises LLMError (``invalid_request``) when it is not one."""
    try:
        value = json.loads(data)
    except ValueError:
        raise malformed_data_error(data, url=url, provider=provider, secrets=secrets) from None
    if not isinstance(value, dict):
        raise malformed_data_error(data, url=url, provider=provider, secrets=secrets, reason="not a JSON object")
    return value
