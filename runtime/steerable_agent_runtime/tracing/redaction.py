"""Redaction of span and event attributes before they are stored.

Guarantees: ``redact`` never modifies its input; values under secret-looking keys (any case or
separator style, at any depth) and strings carrying an HTTP credential (``Bearer ...``,
``Basic ...``) become ``REDACTED``; token counts (``max_tokens``, ``prompt_tokens``) are kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

# Substrings of the normalised key (lowercase, separators removed) that always mark a secret.
_SECRET_SUBSTRINGS = (
    "password", "passwd", "passphrase", "secret", "apikey", "authorization", "credential",
    "privatekey", "accesskey", "cookie", "signature",
)
# Whole words that mark a secret; "token" only when no count word says it is a token count
# (``max_tokens``, ``token_count`` and ``prompt_tokens`` are LLM usage, not secrets).
_SECRET_WORDS = frozenset({"token", "auth", "pwd", "bearer", "jwt", "otp"})
_COUNT_WORDS = frozenset({
    "count", "counts", "limit", "limits", "usage", "budget", "max", "min", "total", "num",
    "estimate", "estimated", "type", "kind",
})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S+", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """Whether an attribute key names a secret (case-insensitive, any separator style).

    ``password``, ``db_password``, ``clientSecret``, ``x-api-key``, ``Authorization``,
    ``access_token`` and ``aws_credentials`` are secrets; ``max_tokens``, ``token_count``
    and ``prompt_tokens`` are not.
    """
    words = [w.lower() for w in _WORD.findall(key)]
    joined = "".join(words)
    if any(part in joined for part in _SECRET_SUBSTRINGS):
        return True
    hits = _SECRET_WORDS.intersection(words)
    if hits == {"token"} and _COUNT_WORDS.intersection(words):
        return False
    return bool(hits)


def redact(value: Any) -> Any:
    """A copy of ``value`` with secrets replaced by ``REDACTED``, at any depth.

    Dict values under secret keys (see ``is_secret_key``) and strings that carry an HTTP
    credential (``Bearer ...``, ``Basic ...``) are replaced; lists, tuples and dicts are
    walked. The input is never modified.
    """
    if isinstance(value, Mapping):
        return {k: REDACTED if is_secret_key(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str) and _CREDENTIAL_VALUE.match(value):
        return REDACTED
    return value


__all__ = ["REDACTED", "is_secret_key", "redact"]
