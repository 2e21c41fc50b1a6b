"""Redaction of span and event attributes before they are stored.

Guarantees: ``redact`` never modifies its input; values under secret-looking keys (any case or
separator style, at any depth) and strings that are an HTTP credential (``Bearer ...``,
``Basic ...``) become ``REDACTED``; in a longer string (an error message quoting a header) a
``Bearer`` token, or a ``Basic`` one that decodes to ``user:password``, is replaced by
``REDACTED`` and the rest of the text kept; token counts (``max_tokens``, ``prompt_tokens``) are
kept.

Credentials inside URLs, in a value or anywhere in a longer text (an error message quoting a
connection or request URL), lose their secret part and keep the rest, so the trace still says
which host and path failed:

- the password of a URL's userinfo: ``postgresql://app:pw@db:5432/x`` is stored as
  ``postgresql://app:[REDACTED]@db:5432/x`` (``redis://:pw@host`` too; the user is kept, and a
  userinfo without a password, ``ssh://git@host``, is no credential). The password runs to the
  last ``@`` before the host, so an unencoded ``@`` in it is covered; one with an unencoded
  ``/``, ``?`` or ``#`` is no URL userinfo (no parser reads it as one) and is not recognised;
- the value of a ``name=value`` pair whose name is a secret key (``is_secret_key``:
  ``api_key=``, ``access_token=``, ``password=``, ``X-Amz-Signature=``), wherever it stands: a
  query string, a form body, a ``key=value`` connection string; and, after ``?``, ``&`` or ``;``
  only (``&amp;`` in an HTML error page), the query parameters ``key`` (Gemini's and other
  Google APIs' ``?key=API_KEY``) and ``sig`` (an Azure SAS signature), which are no secret as an
  attribute key. The value ends at whitespace, ``&``, ``#``, a quote or ``<>``, its trailing
  ``.,;:)]}`` left to the prose around it.

Text holding none of these credentials is returned unchanged, and ``redact(redact(x)) ==
redact(x)`` (tests/tracing/test_redaction_urls.py checks both as properties). Time is linear in
the text: each pattern starts only at the start of a word and scans one run of it, so a huge
tool error is no denial of service.
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
# A URL's userinfo with a password: a scheme (bounded, and only at the start of a word, so a long
# run of letters costs linear time), the user, then the password up to the last "@" of the
# authority (the greedy run backs off to it).
_URL_PASSWORD = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s/?#@:]*:)([^\s/?#]+)@")
# name=value: the name at the start of a word (only "name=" is consumed, so a pair inside a kept
# value is still seen); the value runs to a delimiter (see _value_end).
_NAME = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z_][A-Za-z0-9_.\-]{0,63})=")
_VALUE = re.compile(r"[^\s&#'\"<>]+")
_TRAILING = ".,;:)]}"
# Query parameters that carry a credential although they are no secret as an attribute key.
_SECRET_QUERY_PARAMS = frozenset({"key", "sig"})


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
    credential is: a Bearer/Basic token, a URL's password, a secret query parameter or
    ``name=value`` pair (see the module guarantees). Lists, tuples and dicts are walked. The
    input is never modified; text without a credential comes back unchanged, and a second
    ``redact`` changes nothing.
    """
    if isinstance(value, Mapping):
        return {k: REDACTED if is_secret_key(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    if isinstance(value, str):
        if _CREDENTIAL_VALUE.match(value):
            return REDACTED
        return _redact_text(value)
    return value


def _redact_text(text: str) -> str:
    """``text`` with every credential it holds replaced (see the module guarantees)."""
    url = "://" in text
    if url:
        text = _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)
    if "=" in text:
        text = _redact_pairs(text)
        if url:  # again: a redacted value may have held the "/" that ended an authority
            text = _URL_PASSWORD.sub(rf"\1{REDACTED}@", text)
    return _CREDENTIAL_IN_TEXT.sub(_redact_credential, text)


def _redact_pairs(text: str) -> str:
    """``text`` with the value of each secret ``name=value`` pair replaced."""
    pieces: list[str] = []
    pos = 0
    for match in _NAME.finditer(text):
        start = match.start()
        if start < pos:  # inside a value already replaced
            continue
        name = match.group(1)
        in_query = start > 0 and text[start - 1] in "?&;"  # ";": a separator too, and "&amp;" in HTML
        if not (is_secret_key(name) or (in_query and name.lower() in _SECRET_QUERY_PARAMS)):
            continue
        end = _value_end(text, match.end())
        if end is not None:
            pieces += [text[pos:match.end()], REDACTED]
            pos = end
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _value_end(text: str, start: int) -> int | None:
    """Where the value starting at ``start`` ends, None when there is none: up to a delimiter,
    its trailing punctuation left to the prose ("(see ...?key=K)."), an already redacted value
    taken whole (so a second pass changes nothing). rstrip, not a lazy regex: linear time."""
    run = _VALUE.match(text, start)
    if run is None:
        return None
    raw = run.group()
    if raw.startswith(REDACTED) and not raw[len(REDACTED):].strip(_TRAILING):
        return start + len(REDACTED)
    kept = raw.rstrip(_TRAILING)
    return start + len(kept) if kept else None


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
