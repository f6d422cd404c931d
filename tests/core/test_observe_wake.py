"""A tracked run's wake-up (pure asyncio): the first look needs none; a wake-up before a wait
makes it return at once, and is used up by it; one during a wait ends it (every wait under
way); a wait times out without one, and one that ends leaves nothing behind. (Each wait holds a
future of its own while it waits: an ``asyncio.Event`` per handle took 0.86 KiB a waiting
task, its waiters' deque most of it; ``make bench`` measures the memory.)"""

from __future__ import annotations

import asyncio
from typing import Any

from jobset_core.observe._observer import Target, Tracked


def _tracked() -> Tracked:
    return Tracked(Any, Target("controller", "ns", "js"))  # type: ignore[arg-type]


async def test_wake_ups_before_during_and_without_a_wait() -> None:
    tracked = _tracked()
    assert await tracked.changed(0)  # the first look
    assert not await tracked.changed(0)  # used up: nothing changed since
    tracked.wake()
    tracked.wake()  # two wake-ups before a wait are one change
    assert await tracked.changed(30)
    assert not await tracked.changed(0.01)
    waits = [asyncio.ensure_future(tracked.changed(30)) for _ in range(2)]
    await asyncio.sleep(0)  # both wait now
    tracked.wake()
    assert await asyncio.wait_for(asyncio.gather(*waits), 5) == [True, True]
    assert tracked._waiters == ()  # nothing left behind by the waits


async def test_a_timed_out_or_cancelled_wait_leaves_nothing_and_misses_no_wake_up() -> None:
    tracked = _tracked()
    await tracked.changed(0)
    assert not await tracked.changed(0.01)
    cancelled = asyncio.ensure_future(tracked.changed(30))
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert tracked._waiters == ()
    later = asyncio.ensure_future(tracked.changed(30))
    await asyncio.sleep(0)
    tracked.wake()
    assert await asyncio.wait_for(later, 5)
