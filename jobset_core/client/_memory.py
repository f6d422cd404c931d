"""Handing back to the system the memory a big answer took, once it is free.

A list page of a few MB is read whole, decoded whole, and what the caller keeps of it is a
fraction. The C allocator (glibc's) keeps the freed space in its heap: after the first lists
of a triggerer holding 1,000 runs, 12 MiB of its RSS (12 KiB a waiting task) was free space
that ``malloc_trim`` gives back. So once answers of :data:`TRIM_AFTER_BYTES` or more in all
were read since the last trim (one list page of a few MB, or the many smaller lists of an
identity bound to namespaces, one per namespace and kind), the client asks for a trim once the
caller has had time to let them go (:data:`TRIM_DELAY`, put off by each answer that comes
meanwhile, up to :data:`TRIM_WAIT_MAX`); a burst of answers (a triggerer's start, where
every informer lists) is trimmed once. Where the C library has no ``malloc_trim`` (musl,
macOS), nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import sys
import time
from collections.abc import Callable

__all__ = ["TRIM_AFTER_BYTES", "TRIM_DELAY", "TRIM_WAIT_MAX", "Trimmer"]

#: The bytes of answers read since the last trim after which the freed memory is handed back.
TRIM_AFTER_BYTES = 1 << 20
#: How long after the answer that reached the bound the trim runs, put off by each answer
#: after it (seconds): its caller has decoded it, kept its part and let it go by then, and
#: the answers of a burst are trimmed once.
TRIM_DELAY = 0.5
#: The longest a due trim is put off by answers that keep coming (seconds).
TRIM_WAIT_MAX = 2.0


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, when the process's C library has it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


_TRIM = _malloc_trim()


class Trimmer:
    """Trims once after a burst of answers (see the module docs).

    Args:
        trimmed: Called after each trim with the seconds it took.
        trim: The trim (the C library's, by default; ``None``: there is none).
        delay: How long after the last answer it runs (seconds).
        wait_max: How long at most a due trim waits for answers to stop coming (seconds).
    """

    def __init__(
        self,
        trimmed: Callable[[float], None] = lambda seconds: None,
        trim: Callable[[], object] | None = _TRIM,
        delay: float = TRIM_DELAY,
        wait_max: float = TRIM_WAIT_MAX,
    ) -> None:
        self._trim, self._trimmed = trim, trimmed
        self._delay, self._wait_max = delay, wait_max
        self._pending: asyncio.TimerHandle | None = None
        self._due = 0.0  # the loop's time by which a due trim runs
        self._read = 0  # bytes of answers since the last trim

    def answered(self, size: int) -> None:
        """An answer of ``size`` bytes was read (call it on the event loop)."""
        if self._trim is None:
            return
        self._read += size
        if self._read < TRIM_AFTER_BYTES and self._pending is None:
            return
        loop = asyncio.get_running_loop()
        if self._pending is None:
            self._due = loop.time() + self._wait_max
        else:
            self._pending.cancel()
        at = min(loop.time() + self._delay, self._due)
        self._pending = loop.call_at(at, self._run)

    def _run(self) -> None:
        self._pending, self._read = None, 0
        assert self._trim is not None
        began = time.perf_counter()
        self._trim()
        self._trimmed(time.perf_counter() - began)

    def cancel(self) -> None:
        """Drop a trim still pending (the client closes)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
