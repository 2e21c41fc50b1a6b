"""Awaiting a coroutine under a deadline that costs nothing when the coroutine never waits.

``asyncio.timeout`` schedules a timer on entry and cancels it on exit: a few microseconds per
call, most of what a quick tool call costs the loop. A timeout can only act where a coroutine
suspends, so :func:`await_until` runs the coroutine's first step at once and arms
``asyncio.timeout_at(when)`` only if that step suspends; the rest is driven exactly as ``await``
drives it (values sent and exceptions thrown in, as ``yield from`` does).

Guarantees: the result, the exceptions and the timing of the stop are those of
``async with asyncio.timeout_at(when): return await coro``: a coroutine still running at ``when``
is cancelled at its suspension point and TimeoutError raised; one that finishes first (also
without ever suspending) returns its value; cancelling the calling task cancels the coroutine.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


async def await_until(awaitable: Awaitable[T], when: float | Callable[[], float],
                      armed: Callable[[asyncio.Timeout], None], disarmed: Callable[[asyncio.Timeout], None]) -> T:
    """``await awaitable`` with a deadline at loop time ``when`` (see the module docstring).

    ``when`` may also be a function giving that loop time, called only when a timer is armed
    (a caller that needs the clock only then). ``armed(timeout)`` is called with the entered
    Timeout once there is one (the coroutine suspended), so a caller can ``reschedule`` it (stop
    the coroutine early); ``disarmed(timeout)`` when it is done.
    Anything but a native coroutine is awaited under the timeout from the start.
    """
    if type(awaitable) is not types.CoroutineType:
        return await _under(asyncio.timeout_at(when() if callable(when) else when), awaitable, armed, disarmed)
    step = awaitable.__await__()
    try:
        first = step.send(None)
    except StopIteration as done:
        return done.value
    return await _under(asyncio.timeout_at(when() if callable(when) else when), _Resumed(step, first), armed, disarmed)


async def resume_until(coro: Any, first: Any, when: float | Callable[[], float],
                       armed: Callable[[asyncio.Timeout], None], disarmed: Callable[[asyncio.Timeout], None]) -> Any:
    """The rest of :func:`await_until` for a native coroutine whose first step the caller ran
    itself (``first = coro.send(None)`` yielded ``first`` rather than returning)."""
    return await _under(asyncio.timeout_at(when() if callable(when) else when), _Resumed(coro, first), armed, disarmed)


async def _under(timeout: asyncio.Timeout, awaitable: Awaitable[T], armed: Callable[[asyncio.Timeout], None],
                 disarmed: Callable[[asyncio.Timeout], None]) -> T:
    try:
        async with timeout:
            armed(timeout)  # entered: it may be rescheduled from here on
            return await awaitable
    finally:
        disarmed(timeout)


class _Resumed:
    """Awaiting it goes on driving a coroutine that already yielded ``first`` (``yield from``)."""

    __slots__ = ("step", "first")

    def __init__(self, step: Generator[Any, Any, Any], first: Any) -> None:
        self.step = step
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        step, pending = self.step, self.first
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                step.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the task (a cancel): pass it on
                try:
                    pending = step.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = step.send(sent)
                except StopIteration as done:
                    return done.value
