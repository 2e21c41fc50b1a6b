"""What ``json.loads`` accepts but a frame must not hold: values nested deeper than the rest of
the runtime can store and send back, and strings with an unpaired UTF-16 surrogate (``"\\ud83d"``
alone: JSON's grammar allows the escape, but it is no text, and UTF-8, SQLite and the model's
API all refuse it).

Guarantees:
- ``find_problem(line, value)`` returns None, or ``(path, why)`` for the first such value
  (``path`` a list of keys and indexes from the frame's root). It never raises.
- Cheap for ordinary frames: the value is walked only when the raw line could hold a problem
  (more brackets than ``MAX_DEPTH``, or a surrogate escape ``\\uD800``-``\\uDFFF``); an
  ASCII-escaped emoji (a surrogate *pair*) is text and passes.
"""

from __future__ import annotations

import re
from typing import Any

from ..models import has_lone_surrogate

MAX_DEPTH = 128  # arrays and objects, counting the frame itself; the store and pydantic read ~190
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

Problem = tuple[list[str | int], str]


def find_problem(line: bytes, value: Any) -> Problem | None:
    """The first value of ``value`` (decoded from ``line``) nested too deeply or holding an
    unpaired surrogate, or None (see the module guarantees)."""
    deep = line.count(b"[") + line.count(b"{") > MAX_DEPTH
    if not deep and _SURROGATE_ESCAPE.search(line) is None:
        return None
    stack: list[tuple[Any, list[str | int], int]] = [(value, [], 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            if has_lone_surrogate(node):
                return path, "holds an unpaired UTF-16 surrogate (half of an emoji?), which is not text"
            continue
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            return path, f"nests arrays and objects deeper than {MAX_DEPTH} levels"
        if isinstance(node, dict):
            for key, child in node.items():
                if has_lone_surrogate(key):
                    return [*path, key.encode("utf-8", "backslashreplace").decode()], \
                        "is a key with an unpaired UTF-16 surrogate, which is not text"
                stack.append((child, [*path, key], depth + 1))
        else:
            stack.extend((child, [*path, i], depth + 1) for i, child in enumerate(node))
    return None

