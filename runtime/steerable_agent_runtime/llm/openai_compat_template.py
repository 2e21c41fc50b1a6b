"""The chat/completions hot path: chunks that differ from each other only in their text.

A server streams thousands of chunks that are, byte for byte, the same JSON except for the
content string (``{"id":"chatcmpl-1",...,"delta":{"content":"<text>"},"finish_reason":null}]}``).
:func:`learn` takes one chunk the provider parsed in full and, when it is such a chunk, returns
a :class:`ChunkTemplate`: the bytes before the content string (``head``) and after it
(``tail``). :meth:`ChunkTemplate.text` then reads a later chunk's text with one C string scan
(``json.decoder.scanstring``, the scanner ``json.loads`` itself uses for strings) instead of a
JSON parse and the dict lookups; a chunk that does not fit returns None and takes the full path.

Why the value is the one a full parse gives (nothing is guessed):
- ``learn`` accepts a chunk only when its parsed object carries nothing but content (one
  choice, no finish reason, no usage, no error, no reasoning, no tool calls), and only after
  parsing ``head + PROBE + tail`` gave exactly that object with the content replaced by the
  probe: so ``head`` ends at a token boundary at the value of ``choices[0].delta.content``,
  and nothing later in the text (a duplicate key) overrides it.
- ``text`` accepts ``data`` only when it is ``head``, then one complete JSON string token
  (strictly scanned: escapes decoded, raw control characters refused), then ``tail``. JSON's
  grammar puts any string token in that place into the same slot, with every other token, and
  so every other value, unchanged: the full parse would give the learned object with this
  string as the content. Strings are decoded as ``json.loads`` decodes them (the provider's
  parser gives ``json.loads``'s values; see ``openai_compat.json_loader``).
"""

from __future__ import annotations

from collections.abc import Callable
from json.decoder import scanstring
from typing import Any

__all__ = ["PROBE", "ChunkTemplate", "learn"]

#: the string put in the content slot to prove a template (any plain string would do)
PROBE = "steerable-template-probe"
_KEY = '"content"'
_SPACE = " \t\n\r"


class ChunkTemplate:
    """The fixed text around a stream's content string (see the module docstring)."""

    __slots__ = ("after", "head", "start", "tail")

    def __init__(self, head: str, tail: str) -> None:
        self.head = head  # ends with the string's opening quote
        self.tail = tail  # starts with its closing quote
        self.start = len(head)
        self.after = len(tail) - 1  # what follows the closing quote

    def __repr__(self) -> str:
        return f"ChunkTemplate(head={self.head!r}, tail={self.tail!r})"

    def text(self, data: str) -> str | None:
        """The content of ``data`` when it is this template around one JSON string, else None."""
        if data.startswith(self.head) and data.endswith(self.tail):
            try:
                value, end = scanstring(data, self.start)
            except ValueError:  # an unterminated string, a bad escape, a raw control character
                return None
            if end == len(data) - self.after:  # the string's closing quote is the tail's
                return value
        return None

    def read(self, batch: list[str], at: int, emit: Callable[[str], Any]) -> int:
        """:meth:`text` over ``batch[at:]`` while its chunks fit: ``emit`` each non-empty text,
        in order; returns the index of the first chunk that does not fit (``len(batch)`` when
        all did). One call per run of chunks instead of one per chunk."""
        head, tail, start, after = self.head, self.tail, self.start, self.after
        size = len(batch)
        while at < size:
            data = batch[at]
            if not (data.startswith(head) and data.endswith(tail)):
                return at
            try:
                value, end = scanstring(data, start)
            except ValueError:
                return at
            if end != len(data) - after:
                return at
            if value:
                emit(value)
            at += 1
        return at


def learn(data: str, obj: Any, loads: Callable[[str], Any]) -> ChunkTemplate | None:
    """The template of ``data`` (whose parsed value is ``obj``), or None when it has none.

    ``loads`` is the parser the provider uses (it parses the probe). Never raises.
    """
    content = plain_content(obj)
    if content is None:
        return None
    at = data.rfind(_KEY)
    while at >= 0:
        found = _string_after(data, at + len(_KEY))
        if found is not None and found[0] == content:
            head, tail = data[:found[1]], data[found[2]:]
            if _proven(head, tail, obj, loads):
                return ChunkTemplate(head, tail)
        at = data.rfind(_KEY, 0, at)
    return None


def plain_content(obj: Any) -> str | None:
    """``choices[0].delta.content`` of a chunk that carries nothing else that matters, or None."""
    if type(obj) is not dict or obj.get("error") or obj.get("usage"):
        return None
    groq = obj.get("x_groq")
    if groq and (type(groq) is not dict or groq.get("usage")):
        return None
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("finish_reason") or type(delta) is not dict:
        return None
    if delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls"):
        return None
    content = delta.get("content")
    return content if type(content) is str else None


def _string_after(data: str, pos: int) -> tuple[str, int, int] | None:
    """After a key ending at ``pos``: the string value, where its text starts (after the
    opening quote) and where its closing quote is."""
    size = len(data)
    while pos < size and data[pos] in _SPACE:
        pos += 1
    if pos >= size or data[pos] != ":":
        return None
    pos += 1
    while pos < size and data[pos] in _SPACE:
        pos += 1
    if pos >= size or data[pos] != '"':
        return None
    try:
        value, end = scanstring(data, pos + 1)
    except ValueError:
        return None
    return value, pos + 1, end - 1


def _proven(head: str, tail: str, obj: dict[str, Any], loads: Callable[[str], Any]) -> bool:
    """Whether ``head + PROBE + tail`` parses to ``obj`` with the probe as its content."""
    try:
        probed = loads(head + PROBE + tail)
    except ValueError:
        return False
    delta = dict(obj["choices"][0]["delta"], content=PROBE)
    expected = dict(obj, choices=[dict(obj["choices"][0], delta=delta)])
    return type(probed) is dict and probed == expected
