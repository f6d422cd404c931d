"""The client hands back the memory answers took: once after a burst that reached the bound,
never while the answers read since the last trim stay below it (pure: the trim is a
stand-in; the real one is glibc's). The loop's clock is the test's: it moves only when the
test moves it, so a busy machine cannot move a trim past the test's next step."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest

from jobset_core.client import _memory
from jobset_core.client._memory import TRIM_AFTER_BYTES, Trimmer

DELAY = 0.05

Advance = Callable[[float], Awaitable[None]]


@pytest.fixture
async def advance(monkeypatch: pytest.MonkeyPatch) -> Advance:
    """Move the running loop's clock on by some seconds, then let what came due run."""
    loop = asyncio.get_running_loop()
    now = [loop.time()]
    monkeypatch.setattr(loop, "time", lambda: now[0])

    async def advance(seconds: float) -> None:
        now[0] += seconds
        for _ in range(3):  # the due timers join the ready queue, then run
            await asyncio.sleep(0)

    return advance


def _counted() -> tuple[Trimmer, list[float], list[int]]:
    calls: list[int] = []
    durations: list[float] = []
    return Trimmer(durations.append, lambda: calls.append(1), delay=DELAY), durations, calls


@pytest.mark.parametrize(
    ("sizes", "trims"),
    [
        pytest.param([], 0, id="nothing-read"),
        pytest.param([TRIM_AFTER_BYTES // 8] * 7, 0, id="below-the-bound-in-all"),
        pytest.param([TRIM_AFTER_BYTES // 8] * 8, 1, id="small-answers-that-add-up"),
        pytest.param([TRIM_AFTER_BYTES], 1, id="one-big-answer"),
        pytest.param([TRIM_AFTER_BYTES * 4] * 20, 1, id="a-burst-is-trimmed-once"),
    ],
)
async def test_a_trim_after_big_answers(advance: Advance, sizes: list[int], trims: int) -> None:
    trimmer, durations, calls = _counted()
    for size in sizes:
        trimmer.answered(size)
    await advance(DELAY * 0.9)
    assert calls == []
    await advance(DELAY * 0.2)
    assert (len(calls), len(durations)) == (trims, trims)
    await advance(DELAY * 10)
    assert len(calls) == trims


async def test_the_count_starts_again_after_a_trim(advance: Advance) -> None:
    trimmer, _, calls = _counted()
    trimmer.answered(TRIM_AFTER_BYTES)
    await advance(DELAY * 2)
    trimmer.answered(TRIM_AFTER_BYTES - 1)  # below the bound since the trim
    await advance(DELAY * 2)
    assert calls == [1]
    trimmer.answered(1)
    await advance(DELAY * 2)
    assert calls == [1, 1]


async def test_answers_that_keep_coming_put_a_trim_off_only_so_long(advance: Advance) -> None:
    calls: list[int] = []
    trimmer = Trimmer(trim=lambda: calls.append(1), delay=DELAY, wait_max=DELAY * 3)
    trimmer.answered(TRIM_AFTER_BYTES)
    for step in range(1, 9):  # an answer every half delay, for four delays
        await advance(DELAY / 2)
        # ran at the longest wait (three delays: the sixth step), while the answers still came
        assert calls == ([1] if step >= 6 else []), step
        trimmer.answered(10)
    await advance(DELAY * 10)
    assert calls == [1]  # the small answers after it stay below the bound


async def test_the_trim_waits_for_the_burst_to_end(advance: Advance) -> None:
    trimmer, _, calls = _counted()
    for _ in range(3):  # each big answer puts the trim off again
        trimmer.answered(TRIM_AFTER_BYTES)
        await advance(DELAY * 0.9)
    assert calls == []
    await advance(DELAY * 0.2)
    assert calls == [1]


async def test_a_closed_client_leaves_no_trim_behind(advance: Advance) -> None:
    trimmer, _, calls = _counted()
    trimmer.answered(TRIM_AFTER_BYTES)
    trimmer.cancel()
    await advance(DELAY * 10)
    assert calls == []


async def test_without_a_trim_nothing_is_scheduled() -> None:
    trimmer = Trimmer(trim=None)
    trimmer.answered(TRIM_AFTER_BYTES * 10)
    assert trimmer._pending is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibcs_trim_is_found_here() -> None:
    """The machines this suite runs on use glibc (Debian): the real trim is there."""
    trim = _memory._malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)
