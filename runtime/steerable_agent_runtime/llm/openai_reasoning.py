"""The reasoning items a Responses model streamed, kept to be sent back with its calls.

With ``store: false`` OpenAI keeps nothing between requests, so a reasoning model (o-series,
gpt-5) loses its reasoning between the requests of a tool-calling turn unless the caller asks
for ``include: ["reasoning.encrypted_content"]`` and passes the ``reasoning`` output items back
in ``input``, in place, before the function calls of the same response. Guarantees:

- A reasoning item is kept in the form ``response.output_item.done`` gave it (the API encrypts
  each copy it streams afresh; the done one is final), as ``{type, id, summary,
  encrypted_content}``; one without ``encrypted_content`` is never kept (with ``store: false``
  its id alone names nothing the API can find).
- Each kept item goes back just before the output item that followed it in the response: the
  assistant's text message or one of its function calls. One followed by nothing we send back
  (the end of the output, or an item of another type) is dropped.
- Only a response that made a tool call is kept, keyed by its first call's ``call_id`` (the
  turn that ends in an answer has no later request to carry its reasoning); the last
  :data:`MAX_KEPT` such responses, in memory, the oldest evicted first.

Raises nothing: an item of a shape it does not know is simply not kept.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

MAX_KEPT = 1024
INCLUDE = "reasoning.encrypted_content"
BEFORE_TEXT = ""  # the slot of the assistant's text message (call ids are never empty)

_REASONING_MODEL = re.compile(r"(o\d|gpt-5|codex-)")


def is_reasoning_model(model: str) -> bool:
    """Whether ``model`` names an OpenAI reasoning family that takes encrypted reasoning:
    o1/o3/o4..., gpt-5 and its successors (not gpt-5-chat, which does not reason), codex-mini."""
    name = model.lower().rsplit("/", 1)[-1]
    return bool(_REASONING_MODEL.match(name)) and not name.startswith("gpt-5-chat")


class ReasoningKeep:
    """The kept reasoning of the last ``limit`` responses that made tool calls."""

    __slots__ = ("_turns", "limit")

    def __init__(self, limit: int = MAX_KEPT) -> None:
        self.limit = limit
        self._turns: OrderedDict[str, dict[str, list[dict[str, Any]]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._turns)

    def remember(self, output: Iterable[dict[str, Any]]) -> None:
        """Keep the reasoning of one response's output items (in output order)."""
        first_call, slots = place(output)
        if first_call is None or not slots:
            return
        self._turns[first_call] = slots
        self._turns.move_to_end(first_call)
        while len(self._turns) > self.limit:
            self._turns.popitem(last=False)

    def slots(self, first_call_id: str) -> dict[str, list[dict[str, Any]]]:
        """Fresh copies of the items kept for the turn whose first call is ``first_call_id``:
        slot (a call id, or BEFORE_TEXT) -> the reasoning items to send just before it."""
        kept = self._turns.get(first_call_id) or {}
        return {slot: [_copy(item) for item in items] for slot, items in kept.items()}


def place(output: Iterable[dict[str, Any]]) -> tuple[str | None, dict[str, list[dict[str, Any]]]]:
    """The response's first call id and its encrypted reasoning items, each under the slot of
    the item that followed it."""
    first_call: str | None = None
    slots: dict[str, list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "reasoning":
            wire = _wire(item)
            if wire is not None:
                pending.append(wire)
            continue
        if kind == "message":
            slot = BEFORE_TEXT
        elif kind == "function_call" and isinstance(item.get("call_id"), str) and item["call_id"]:
            slot = item["call_id"]
            first_call = first_call or slot
        else:
            pending = []
            continue
        if pending:
            slots.setdefault(slot, []).extend(pending)
            pending = []
    return first_call, slots


def _wire(item: dict[str, Any]) -> dict[str, Any] | None:
    encrypted, item_id = item.get("encrypted_content"), item.get("id")
    if not (isinstance(encrypted, str) and encrypted and isinstance(item_id, str) and item_id):
        return None
    summary = [{"type": "summary_text", "text": part["text"]} for part in item.get("summary") or ()
               if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return {"type": "reasoning", "id": item_id, "summary": summary, "encrypted_content": encrypted}


def _copy(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "summary": [dict(part) for part in item["summary"]]}
