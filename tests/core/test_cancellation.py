"""A cancelled wait is cancelled (pure asyncio): Python 3.11's ``asyncio.wait_for`` swallows a
cancellation that comes as what it waits for completes, and a cold CI run's wait, cancelled
as its run changed, waited out its whole 60 s timeout instead."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobset_core.lifecycle._logs import FollowControl, stop_follower
from jobset_core.observe._observer import Target, Tracked


async def test_a_wait_cancelled_as_its_run_changes_is_cancelled() -> None:
    tracked = Tracked(Any, Target("controller", "ns", "js"))  # type: ignore[arg-type]
    for _ in range(20):
        await tracked.changed(0)  # the last wake-up (or the first look's) is used up
        task = asyncio.ensure_future(tracked.changed(30))
        await asyncio.sleep(0)  # it waits for a change now
        tracked.wake()  # the change and the cancellation come in one turn of the loop
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)


async def test_stopping_a_follower_lets_the_callers_cancellation_through() -> None:
    release = asyncio.Event()

    async def follower() -> None:
        await release.wait()

    async def caller(task: asyncio.Task[None]) -> str:
        await stop_follower(task, FollowControl(), drain=30)
        return "went on"

    task = asyncio.ensure_future(follower())
    stopping = asyncio.ensure_future(caller(task))
    await asyncio.sleep(0.01)  # draining: the follower has not ended
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await asyncio.sleep(0)
    assert task.cancelled()  # cancelled on the way, not left running
    # A follower that ends by itself (or fails) is not the caller's error.
    ended = asyncio.ensure_future(asyncio.sleep(0))
    await stop_follower(ended, FollowControl(), drain=1)
    cancelled = asyncio.ensure_future(follower())
    cancelled.cancel()
    await stop_follower(cancelled, FollowControl(), drain=1)
