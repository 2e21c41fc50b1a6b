"""The recorded provider streams under tests/llm/streams/<provider>/, as replay-server replies.

Each provider folder has ``cases.json``: case name -> a replay spec (``status``, ``headers``,
``file``, ``dropAfter``), the format ``python -m tests.replay_server`` reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from steerable_agent_runtime.llm import LLMStreamChunk

from tests.replay_server import Reply

STREAMS = Path(__file__).parent / "streams"

# Keys that look real enough to be found if they leak, and never are real.
ANTHROPIC_KEY = "sk-ant-api03-SECRETKEY-anthropic-0123456789abcdef"
GEMINI_KEY = "AIzaSySECRETKEY-gemini-0123456789abcdefXYZ"


def case(provider: str, name: str) -> Reply:
    """The reply that replays case ``name`` of ``provider``."""
    folder = STREAMS / provider
    specs = json.loads((folder / "cases.json").read_text())
    return Reply.from_dict(specs[name], folder)


def case_names(provider: str) -> list[str]:
    return sorted(json.loads((STREAMS / provider / "cases.json").read_text()))


async def drain(chunks: AsyncIterator[LLMStreamChunk]) -> list[LLMStreamChunk]:
    return [chunk async for chunk in chunks]


@contextmanager
def sdk_environment(*prefixes: str) -> Iterator[None]:
    """Remove every environment variable starting with one of ``prefixes`` (restored after)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


def without_cache_control(value: Any) -> Any:
    """``value`` with every cache_control key removed (to compare bodies before stamping)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value
