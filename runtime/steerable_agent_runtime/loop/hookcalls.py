"""Calling a host's hook: what it raises, or a value of the wrong type, becomes a HookError.

Guarantees: :func:`call_hook` returns None or an instance of the expected type, else raises
:class:`~steerable_agent_runtime.errors.HookError` (``kind`` "hook") naming the hooks' class,
the method and what went wrong; :func:`as_messages` turns a hook's messages (LLMMessage or wire
dicts, as ``run`` takes them) into LLMMessages, or raises HookError naming the bad one.
The loop turns a HookError into an ``error`` event and a ``failed`` completion (docs/loop.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from ..errors import HookError
from ..models import LLMMessage
from ..tooloutcome import clip, exception_text

T = TypeVar("T")


def _where(hooks: Any, method: str) -> str:
    return f"hook {type(hooks).__name__}.{method}"


async def call_hook(hooks: Any, method: str, expected: type[T], *args: Any) -> T | None:
    """``await hooks.<method>(*args)``, checked (see the module docstring)."""
    try:
        value = await getattr(hooks, method)(*args)
    except Exception as exc:  # noqa: BLE001 - a hook's failure ends the turn with a typed error
        raise HookError(clip(f"{_where(hooks, method)} raised {exception_text(exc)}")) from exc
    if value is not None and not isinstance(value, expected):
        raise HookError(f"{_where(hooks, method)} returned {type(value).__name__}, not {expected.__name__} or None")
    return value


def as_messages(hooks: Any, method: str, messages: Iterable[Any]) -> list[LLMMessage]:
    """A hook's messages as LLMMessages (dicts are validated as ``run`` validates them)."""
    out: list[LLMMessage] = []
    if not isinstance(messages, (list, tuple)):
        raise HookError(f"{_where(hooks, method)} gave {type(messages).__name__} where a list of messages goes")
    for message in messages:
        if isinstance(message, LLMMessage):
            out.append(message)
            continue
        try:
            out.append(LLMMessage.model_validate(message))
        except ValueError as exc:
            raise HookError(clip(f"{_where(hooks, method)} gave a message that is not one: {message!r:.200} "
                                 f"({type(exc).__name__})")) from exc
    return out
