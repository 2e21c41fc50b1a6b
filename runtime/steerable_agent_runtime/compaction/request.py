"""The current request: the messages a compaction never summarises while they fit.

A *user-authored* message is a ``user`` message the runtime did not write itself: not a
compaction summary (``SUMMARY_PREFIX``), not a :class:`~..context.fragment.ContextFragment`
rendering (notes, system notices: any fragment class defined, recognised by its markers). A
steer (``CoreLoop.steer``) is a user message, so it is user-authored; tool results and
assistant messages never are.

The current request is the last user-authored message of the transcript together with the
user-authored messages of the same turn before it, back to the previous turn's final answer (an
assistant message without tool calls): a steer amends the request it arrives in, it does not
replace it. Usually that is one message.

When they fall into the middle of a summary step they are kept whole (pinned right after the
head, in their order, before the summary: see summary.py) while they fit the step's budget
(half the threshold; halved again per overflow recovery of the round). The newest is fitted
first: each that fits in what the newer ones left is kept whole; the first that does not is
pinned *cut* to what is left (the longest prefix of its text that fits, ending with
:data:`REQUEST_CUT_MARKER`: how many characters were kept of how many); older ones, and one
that not a character of would fit, are summarised with the middle. A request in parts keeps
only its text when cut. A cut form fits what it was cut to, so a later compaction keeps it as
it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..context.fragment import all_fragment_classes
from ..models import LLMMessage
from .estimate import estimate_message_tokens
from .fold import content_text
from .summary import is_summary

REQUEST_CUT_MARKER = "\n…[current request cut by compaction: its first {kept} of {total} characters kept]"

Cut = tuple[int, int]
"""(kept, total) characters of a request pinned cut."""


def is_user_authored(message: LLMMessage) -> bool:
    """A ``user`` message that is neither a compaction summary nor a ContextFragment rendering."""
    if message.role != "user" or is_summary(message):
        return False
    content = message.content
    return not (isinstance(content, str) and any(cls.recognises(content) for cls in all_fragment_classes()))


def current_request_indices(messages: Sequence[LLMMessage]) -> list[int]:
    """The indices of the current request's messages in ``messages``, oldest first (see the
    module docstring); empty when there is no user-authored message."""
    found: list[int] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if found and message.role == "assistant" and not message.tool_calls:
            break  # the previous turn's final answer
        if is_user_authored(message):
            found.append(index)
    return found[::-1]


def fit_request(message: LLMMessage, budget_tokens: int) -> tuple[LLMMessage, Cut | None]:
    """``message`` itself when its estimate is within ``budget_tokens``; else its cut form (the
    longest prefix of its text that fits, with REQUEST_CUT_MARKER) and (kept, total)."""
    if estimate_message_tokens(message) <= budget_tokens:
        return message, None
    text = content_text(message.content)

    def cut(kept: int) -> LLMMessage:
        marker = REQUEST_CUT_MARKER.format(kept=kept, total=len(text))
        return message.model_copy(update={"content": text[:kept] + marker})

    low, high = 0, len(text)  # the estimate grows with the prefix: the longest one that fits
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_message_tokens(cut(mid)) <= budget_tokens:
            low = mid
        else:
            high = mid - 1
    return cut(low), (low, len(text))


def fit_requests(messages: Sequence[LLMMessage], budget_tokens: int) -> list[tuple[LLMMessage, Cut | None] | None]:
    """How each message of the current request (oldest first) is pinned within ``budget_tokens``:
    (the message or its cut form, the cut), or None for one summarised (see the module docstring)."""
    fitted: list[tuple[LLMMessage, Cut | None] | None] = [None] * len(messages)
    left = budget_tokens
    for index in range(len(messages) - 1, -1, -1):
        pinned, cut = fit_request(messages[index], left)
        if cut is not None and cut[0] == 0:
            break  # not a character fits
        fitted[index] = (pinned, cut)
        if cut is not None:
            break  # what is left is spent
        left -= estimate_message_tokens(pinned)
    return fitted
