"""Redaction of span and event attributes before they are stored.

Guarantees: ``redact`` never modifies its input; values under secret-looking keys (any case or
separator style, at any depth) and strings that are an HTTP credential (``Bearer ...``,
``Basic ...``) become ``REDACTED``; in a longer string (an error message quoting a header) a
``Bearer`` token, or a ``Basic`` one that decodes to ``user:password``, is replaced by
``REDACTED`` and the rest of the text kept; token counts (``max_tokens``, ``prompt_tokens``) are
kept.
"""

from __future__ import annotations

import base64
import binascii
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
# A credential inside a longer text: "Bearer" is no ordinary word, so any token after it goes;
# "basic" is one ("a basic plan"), so only a token that is base64 of user:password goes.
_CREDENTIAL_IN_TEXT = re.compile(r"\b(bearer|basic)(\s+)([A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """Whether an attribute key names a secret (case-insensitive, any separator style).

    ``password``, ``db_password``, ``clientSecret``, ``x-api-key``, ``Authorization``,
    ``access_token``, ``accesstoken`` and ``aws_credentials`` are secrets; ``max_tokens``,
    ``token_count`` and ``prompt_tokens`` are not.
    """
    words = [w.lower() for w in _WORD.findall(key)]
    joined = "".join(words)
    if any(part in joined for part in _SECRET_SUBSTRINGS):
        return True
    hits = _SECRET_WORDS.intersection(words)
    # a token run together with what it is ("accesstoken", "AUTHTOKEN": no separator to split
    # on), but not a count run together ("maxtoken"; "prompttokens" is plural, never matched)
    if any(w.endswith("token") and len(w) > 5 and w[:-5] not in _COUNT_WORDS for w in words):
        hits = hits | {"token"}
    if hits == {"token"} and _COUNT_WORDS.intersection(words):
        return False
    return bool(hits)


def redact(value: Any) -> Any:
    """A copy of ``value`` with secrets replaced by ``REDACTED``, at any depth.

    Dict values under secret keys (see ``is_secret_key``) and strings that are an HTTP
    credential (``Bearer ...``, ``Basic ...``) are replaced; in a longer string only the
    credential is (see the module guarantees); lists, tuples and dicts are walked. The input is
    never modified.
    """
    if isinstance(value, Mapping):
        return {k: REDACTED if is_secret_key(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str):
        if _CREDENTIAL_VALUE.match(value):
            return REDACTED
        return _CREDENTIAL_IN_TEXT.sub(_redact_credential, value)
    return value


def _redact_credential(match: re.Match[str]) -> str:
    scheme, space, token = match.groups()
    if scheme.lower() == "basic" and not _is_basic_credential(token):
        return match.group()
    return f"{scheme}{space}{REDACTED}"


def _is_basic_credential(token: str) -> bool:
    """Whether ``token`` is base64 of ``user:password`` (what a Basic Authorization carries)."""
    try:
        return b":" in base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        return False


__all__ = ["REDACTED", "is_secret_key", "redact"]
