"""await_until: ``await`` under a deadline armed only once the coroutine first waits."""

from __future__ import annotations

import asyncio

import pytest
from steerable_agent_runtime.loop.deadline import await_until

from tests.helpers import run


class Watch:
    def __init__(self) -> None:
        self.armed: list[asyncio.Timeout] = []
        self.disarmed: list[asyncio.Timeout] = []

    def arm(self, timeout: asyncio.Timeout) -> None:
        self.armed.append(timeout)

    def disarm(self, timeout: asyncio.Timeout) -> None:
        self.disarmed.append(timeout)


def until(coro, seconds: float, watch: Watch):
    return await_until(coro, asyncio.get_running_loop().time() + seconds, watch.arm, watch.disarm)


def test_a_coroutine_that_never_waits_returns_without_a_timer():
    async def quick():
        return 41 + 1

    async def go():
        watch = Watch()
        assert await until(quick(), 5, watch) == 42
        assert watch.armed == [] and watch.disarmed == []

    run(go())


def test_a_coroutine_that_waits_gets_values_sent_in_and_returns():
    async def waits(future):
        first = await future
        await asyncio.sleep(0)
        return first * 2

    async def go():
        watch = Watch()
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, 21)
        assert await until(waits(future), 5, watch) == 42
        assert len(watch.armed) == 1 and watch.disarmed == watch.armed

    run(go())


def test_a_coroutine_past_its_deadline_is_cancelled_where_it_waits_and_timeouterror_raised():
    seen: list[str] = []

    async def hangs():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def go():
        watch = Watch()
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await until(hangs(), 0.05, watch)
        assert 0.04 <= asyncio.get_running_loop().time() - started < 2
        assert seen == ["cancelled"] and watch.disarmed == watch.armed
        assert asyncio.current_task().cancelling() == 0  # the timeout's own cancel was taken back

    run(go())


def test_errors_before_and_after_the_first_wait_propagate_as_raised():
    async def fails_at_once():
        raise ValueError("first step")

    async def fails_later():
        await asyncio.sleep(0)
        raise KeyError("later")

    async def go():
        with pytest.raises(ValueError, match="first step"):
            await until(fails_at_once(), 5, Watch())
        with pytest.raises(KeyError, match="later"):
            await until(fails_later(), 5, Watch())

    run(go())


def test_rescheduling_the_armed_timeout_to_now_stops_the_coroutine():
    async def go():
        watch = Watch()

        async def stopper():
            while not watch.armed:
                await asyncio.sleep(0)
            watch.armed[0].reschedule(asyncio.get_running_loop().time())

        asyncio.get_running_loop().create_task(stopper())
        with pytest.raises(TimeoutError):
            await until(asyncio.sleep(3600), 3600, watch)

    run(go())


def test_cancelling_the_caller_cancels_the_coroutine_and_is_not_a_timeout():
    seen: list[str] = []

    async def hangs():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def go():
        task = asyncio.get_running_loop().create_task(until(hangs(), 3600, Watch()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen == ["cancelled"]

    run(go())


def test_an_awaitable_that_is_not_a_coroutine_is_awaited_under_the_timeout():
    async def go():
        watch = Watch()
        future = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await until(future, 0.02, watch)
        assert len(watch.armed) == 1 and future.cancelled()
        with pytest.raises(TypeError, match="await"):
            await until(42, 1, Watch())  # the error `await 42` gives

    run(go())
