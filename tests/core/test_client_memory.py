"""The client hands back the memory answers took: once after a burst that reached the bound,
never while the answers read since the last trim stay below it (pure: the trim is a
stand-in; the real one is glibc's)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from jobset_core.client import _memory
from jobset_core.client._memory import TRIM_AFTER_BYTES, Trimmer

DELAY = 0.05


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
async def test_a_trim_after_big_answers(sizes: list[int], trims: int) -> None:
    trimmer, durations, calls = _counted()
    for size in sizes:
        trimmer.answered(size)
    await asyncio.sleep(DELAY * 1.5)
    assert (len(calls), len(durations)) == (trims, trims)


async def test_the_count_starts_again_after_a_trim() -> None:
    trimmer, _, calls = _counted()
    trimmer.answered(TRIM_AFTER_BYTES)
    await asyncio.sleep(DELAY * 2)
    trimmer.answered(TRIM_AFTER_BYTES - 1)  # below the bound since the trim
    await asyncio.sleep(DELAY * 2)
    assert calls == [1]
    trimmer.answered(1)
    await asyncio.sleep(DELAY * 2)
    assert calls == [1, 1]


async def test_answers_that_keep_coming_put_a_trim_off_only_so_long() -> None:
    calls: list[int] = []
    trimmer = Trimmer(trim=lambda: calls.append(1), delay=DELAY, wait_max=DELAY * 3)
    trimmer.answered(TRIM_AFTER_BYTES)
    for _ in range(8):  # an answer every half delay, for four delays
        await asyncio.sleep(DELAY / 2)
        trimmer.answered(10)
    assert calls == [1]  # ran at the longest wait, while the answers still came


async def test_the_trim_waits_for_the_burst_to_end() -> None:
    trimmer, _, calls = _counted()
    for _ in range(3):  # each big answer puts the trim off again
        trimmer.answered(TRIM_AFTER_BYTES)
        await asyncio.sleep(DELAY / 2)
    assert calls == []
    await asyncio.sleep(DELAY)
    assert calls == [1]


async def test_a_closed_client_leaves_no_trim_behind() -> None:
    trimmer, _, calls = _counted()
    trimmer.answered(TRIM_AFTER_BYTES)
    trimmer.cancel()
    await asyncio.sleep(DELAY * 1.5)
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
