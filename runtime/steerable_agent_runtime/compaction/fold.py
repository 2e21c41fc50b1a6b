"""Folding: old tool results replaced by a one-line excerpt, the last few kept readable.

Guarantees:
- Idempotent: ``fold(fold(t)) == fold(t)``. An already-folded result is skipped, and
  ``keep_last`` counts readable (not folded) results, so a second pass keeps the same ones.
- Only ``tool`` messages change, each in place: the order, the roles, every ``tool_call_id``
  and every other message stay as they were (a result is never separated from its call).
- A result is folded only when the folded form is smaller by the estimate; a short result
  stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..models import LLMMessage
from .estimate import estimate_message_tokens

FOLD_PREFIX = "[tool result folded: "


def is_folded(message: LLMMessage) -> bool:
    """Whether ``message`` is a tool result this module folded."""
    return message.role == "tool" and isinstance(message.content, str) and message.content.startswith(FOLD_PREFIX)


def is_readable_result(message: LLMMessage) -> bool:
    """A tool result the model can still read in full."""
    return message.role == "tool" and not is_folded(message)


def content_text(content: object) -> str:
    """The text of a message content (a string, or the text parts of a part list)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:  # type: ignore[attr-defined]
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)


def folded_text(text: str, excerpt_chars: int) -> str:
    """The folded form: the size, then the first ``excerpt_chars`` characters on one line."""
    excerpt = " ".join(text[:excerpt_chars].split())
    more = "…" if len(text) > excerpt_chars else ""
    return f"{FOLD_PREFIX}{len(text)} chars] {excerpt}{more}"


@dataclass
class FoldResult:
    """The folded transcript and what changed (``removed[i]`` became ``added[i]``)."""

    messages: list[LLMMessage]
    removed: list[LLMMessage] = field(default_factory=list)
    added: list[LLMMessage] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.removed)

    @property
    def saved_tokens(self) -> int:
        """Estimated tokens the fold removed."""
        return sum(map(estimate_message_tokens, self.removed)) - sum(map(estimate_message_tokens, self.added))


def fold_tool_results(messages: Sequence[LLMMessage], *, keep_last: int, excerpt_chars: int) -> FoldResult:
    """Fold every readable tool result except the last ``keep_last`` readable ones.

    Returns a new list (the input is not mutated); unchanged messages are the same objects.
    """
    readable = [i for i, m in enumerate(messages) if is_readable_result(m)]
    protected = set(readable[len(readable) - keep_last:]) if keep_last > 0 else set()
    result = FoldResult(list(messages))
    for index in readable:
        if index in protected:
            continue
        original = messages[index]
        folded = original.model_copy(update={"content": folded_text(content_text(original.content), excerpt_chars)})
        if estimate_message_tokens(folded) < estimate_message_tokens(original):
            result.messages[index] = folded
            result.removed.append(original)
            result.added.append(folded)
    return result
