"""estimate_tokens: a cheap, provider-neutral token estimate of messages.

The figures (RUNTIME.md): 0.25 tokens per character, 0.6 per CJK character (Han, kana,
Hangul, full-width forms), +8 per message, +1024 per image part; tool-call names and their
JSON arguments count like text (also a call in OpenAI's ``{id, function: {name, arguments}}``
form, which every provider reads: llm/transcript.py).

Guarantees:
- Deterministic and additive: ``estimate_tokens(a + b) == estimate_tokens(a) +
  estimate_tokens(b)`` (each message is rounded up on its own), so a caller can estimate
  only what was appended and add it to an earlier figure.
- Never raises on a well-formed LLMMessage or its wire dict; unknown part types count their
  string values as text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..models import LLMMessage

CHAR_TOKENS = 0.25
CJK_CHAR_TOKENS = 0.6
MESSAGE_OVERHEAD_TOKENS = 8
IMAGE_PART_TOKENS = 1024
IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})

# Runs of CJK characters: kana, CJK ideographs (and extension A), Hangul syllables,
# compatibility ideographs, full-width forms, the supplementary ideograph planes.
_CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                      "\uff00-\uffef\U00020000-\U0002fa1f]+")


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps(**kwargs) builds one per call


def text_token_weight(text: str) -> float:
    """The unrounded estimate of ``text`` alone (no per-message overhead)."""
    if text.isascii():
        return len(text) * CHAR_TOKENS
    cjk = sum(map(len, _CJK_RUN.findall(text)))
    return (len(text) - cjk) * CHAR_TOKENS + cjk * CJK_CHAR_TOKENS


def estimate_text_tokens(text: str) -> int:
    """The estimate of ``text`` alone, rounded up (what a context fragment's cap is checked against)."""
    return math.ceil(text_token_weight(text))


def _strings_weight(value: Any) -> float:
    if isinstance(value, str):
        return text_token_weight(value)
    if isinstance(value, Mapping):
        return sum(_strings_weight(v) for k, v in value.items() if k != "type")
    if isinstance(value, (list, tuple)):
        return sum(_strings_weight(v) for v in value)
    return 0.0


def _content_weight(content: Any) -> float:
    if content is None:
        return 0.0
    if isinstance(content, str):
        return text_token_weight(content)
    weight = 0.0
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES:
            weight += IMAGE_PART_TOKENS
        else:
            weight += _strings_weight(part)
    return weight


def _calls_weight(calls: Iterable[Mapping[str, Any]] | None) -> float:
    weight = 0.0
    for call in calls or ():
        function = call.get("function")
        if isinstance(function, Mapping):  # OpenAI's {id, function: {name, arguments}}, read by every provider
            call = function
        weight += text_token_weight(str(call.get("name") or ""))
        arguments = call.get("arguments")
        if arguments:
            text = arguments if isinstance(arguments, str) else _ENCODER.encode(arguments)
            weight += text_token_weight(text)
    return weight


def estimate_message_tokens(message: LLMMessage | Mapping[str, Any]) -> int:
    """The estimate of one message (an LLMMessage or its wire dict), rounded up."""
    if isinstance(message, LLMMessage):
        content, calls, name = message.content, message.tool_calls, message.name
    else:
        content, calls, name = message.get("content"), message.get("toolCalls", message.get("tool_calls")), \
            message.get("name")
    weight = _content_weight(content) + _calls_weight(calls)
    if name:
        weight += text_token_weight(name)
    return MESSAGE_OVERHEAD_TOKENS + math.ceil(weight)


def estimate_tokens(messages: Iterable[LLMMessage | Mapping[str, Any]]) -> int:
    """The estimated prompt tokens of ``messages``: the sum of each message's estimate."""
    return sum(map(estimate_message_tokens, messages))
