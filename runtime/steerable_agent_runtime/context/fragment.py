"""ContextFragment: every injected context surface, typed, marked and capped.

A fragment class declares its ``role``, ``content_kind``, ``start_marker`` / ``end_marker``
(so the model can tell injected text from user text, and the record can re-identify it) and
its ``max_tokens`` cap on the cap ladder:

- up to 1,024 tokens (the default): no review needed;
- above 1,024: only with an in-code ``review_note`` saying why;
- never above 10,000.

The ladder is enforced when a subclass is defined (ValueError naming ``max_tokens``) and
again by ``tests/context/test_fragment_bounds.py``, which walks every subclass.

``render()`` guarantees its text is within ``max_tokens`` (by :func:`estimate_text_tokens`):
content over the cap is cut and ends with :data:`TRUNCATION_NOTICE`; the markers are kept.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import ConfigValueError
from ..models import CHAT_ROLES, ChatRole, LLMMessage

DEFAULT_MAX_TOKENS = 1024
"""The no-review cap."""
CEILING_TOKENS = 10_000
"""No fragment class may declare a larger cap."""
TRUNCATION_NOTICE = "…[fragment truncated: exceeded its token cap]"


def estimate_text_tokens(text: str) -> int:
    """The cap's measure: ``compaction.estimate.estimate_text_tokens`` (imported on use: the
    compaction package imports this module for its reminder)."""
    from ..compaction.estimate import estimate_text_tokens as estimate

    return estimate(text)


def check_ladder(cls: type[ContextFragment]) -> None:
    """Raise ConfigValueError (a ValueError) when ``cls`` breaks the cap ladder or has no markers."""
    name, cap = cls.__qualname__, cls.max_tokens
    if not isinstance(cap, int) or cap <= 0:
        raise ConfigValueError(f"{name}.max_tokens must be a positive int, got {cap!r}", parameter="max_tokens")
    if cap > CEILING_TOKENS:
        raise ConfigValueError(f"{name}.max_tokens={cap} is above the {CEILING_TOKENS:,}-token ceiling",
                               parameter="max_tokens", hint="split the payload or summarise it")
    if cap > DEFAULT_MAX_TOKENS and not (cls.review_note or "").strip():
        raise ConfigValueError(f"{name}.max_tokens={cap} is above {DEFAULT_MAX_TOKENS} without a review_note",
                               parameter="max_tokens",
                               hint="add a review_note saying why this surface needs the larger cap")
    if cls.role not in CHAT_ROLES:
        raise ConfigValueError(f"{name}.role={cls.role!r} is not one of {sorted(CHAT_ROLES)}", parameter="role")
    if not cls.start_marker or not cls.end_marker:
        raise ConfigValueError(f"{name} needs a start_marker and an end_marker", parameter="start_marker")
    overhead = estimate_text_tokens(cls.start_marker + TRUNCATION_NOTICE + cls.end_marker)
    if overhead >= cap:
        raise ConfigValueError(f"{name}: its markers alone ({overhead} tokens) fill max_tokens={cap}",
                               parameter="max_tokens")


class ContextFragment:
    """One injected piece of context: ``content`` between the class's markers, within its cap.

    Subclasses set the class attributes; instances carry only ``content``. Markers carry their
    own whitespace: ``render()`` is ``start_marker + content + end_marker``.
    """

    role: ClassVar[ChatRole] = "user"
    content_kind: ClassVar[str] = "context"
    start_marker: ClassVar[str] = "<context>\n"
    end_marker: ClassVar[str] = "\n</context>"
    max_tokens: ClassVar[int] = DEFAULT_MAX_TOKENS
    review_note: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        check_ladder(cls)

    def __init__(self, content: str) -> None:
        self.content = content

    def render(self) -> str:
        """The marked text, cut to ``max_tokens`` (ending the content with TRUNCATION_NOTICE) if over."""
        full = self.start_marker + self.content + self.end_marker
        if estimate_text_tokens(full) <= self.max_tokens:
            return full
        return self.start_marker + self.content[:self._fitting_prefix()] + TRUNCATION_NOTICE + self.end_marker

    @property
    def truncated(self) -> bool:
        """Whether ``render()`` had to cut the content."""
        return estimate_text_tokens(self.start_marker + self.content + self.end_marker) > self.max_tokens

    def _fitting_prefix(self) -> int:
        """The longest content prefix that fits with the markers and the notice (binary search:
        the estimate grows with the prefix)."""
        frame = self.start_marker + TRUNCATION_NOTICE + self.end_marker
        low, high = 0, len(self.content)
        while low < high:
            mid = (low + high + 1) // 2
            if estimate_text_tokens(frame + self.content[:mid]) <= self.max_tokens:
                low = mid
            else:
                high = mid - 1
        return low

    def to_message(self) -> LLMMessage:
        """The fragment as the message the loop appends."""
        return LLMMessage(role=self.role, content=self.render())

    @classmethod
    def recognises(cls, text: object) -> bool:
        """Whether ``text`` is a rendering of this fragment class (starts and ends with its markers)."""
        return isinstance(text, str) and text.startswith(cls.start_marker) and text.endswith(cls.end_marker)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.content[:40]!r}{'…' if len(self.content) > 40 else ''})"


def all_fragment_classes() -> list[type[ContextFragment]]:
    """Every ContextFragment subclass defined so far (recursively), for the gate test."""
    found: list[type[ContextFragment]] = []
    pending = list(ContextFragment.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found
