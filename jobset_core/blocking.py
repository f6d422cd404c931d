"""The synchronous façade of the core: run one of its coroutines to the end, here and now.

The core is asynchronous inside (one observer, one lifecycle); a synchronous caller (an
Airflow worker, a sensor's poke, ``jobsetctl``, a KFP step) runs what it needs with
:func:`run`, on an event loop of its own in the calling thread, for the duration of the call.
There is no background loop and no portal thread.

Only when the caller is itself inside a running event loop on this thread (a signal handler
that interrupted a wait, e.g. Airflow calling ``on_kill`` while ``execute`` waits) does the
coroutine run on a short-lived thread of its own, joined before :func:`run` returns.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["cancel_on_signals", "run"]

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` to completion and return its result (or raise its error)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_call(main))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(_call(main))
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=target, name="jobset-core-blocking")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]


async def _call(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


@contextmanager
def cancel_on_signals(*signals: signal.Signals) -> Iterator[None]:
    """Inside a coroutine run by :func:`run`: the given signals cancel the running task (its
    own cleanup, such as a run's cancel-on-kill DELETE, then runs). Only in the main thread,
    where signals are delivered; elsewhere the block runs unguarded."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if threading.current_thread() is not threading.main_thread() or task is None:
        yield
        return
    for number in signals:
        loop.add_signal_handler(number, task.cancel)
    try:
        yield
    finally:
        for number in signals:
            loop.remove_signal_handler(number)
