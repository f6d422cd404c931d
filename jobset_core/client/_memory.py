"""Handing back to the system the memory a big answer took, once it is free.

A list page of a few MB is read whole, decoded whole, and what the caller keeps of it is a
fraction. The C allocator (glibc's) keeps the freed space in its heap: after the first lists
of a triggerer holding 1,000 runs, 12 MiB of its RSS (12 KiB a waiting task) was free space
that ``malloc_trim`` gives back. So after an answer of :data:`TRIM_AFTER_BYTES` or more, the
client asks for a trim once the caller has had time to let the answer go
(:data:`TRIM_DELAY`); a burst of big answers (a triggerer's start, where every informer
lists) is trimmed once. Where the C library has no ``malloc_trim`` (musl, macOS), nothing is
done.
"""

from __future__ import annotations

import asyncio
import ctypes
import sys
import time
from collections.abc import Callable

__all__ = ["TRIM_AFTER_BYTES", "TRIM_DELAY", "Trimmer"]

#: The size of an answer after which the freed memory is handed back (bytes).
TRIM_AFTER_BYTES = 1 << 20
#: How long after the last big answer the trim runs (seconds): its caller has decoded it,
#: kept its part and let it go by then, and the big answers of a burst are trimmed once.
TRIM_DELAY = 0.5


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
    """Trims once after a burst of big answers (see the module docs).

    Args:
        trimmed: Called after each trim with the seconds it took.
        trim: The trim (the C library's, by default; ``None``: there is none).
        delay: How long after the last big answer it runs (seconds).
    """

    def __init__(
        self,
        trimmed: Callable[[float], None] = lambda seconds: None,
        trim: Callable[[], object] | None = _TRIM,
        delay: float = TRIM_DELAY,
    ) -> None:
        self._trim, self._trimmed, self._delay = trim, trimmed, delay
        self._pending: asyncio.TimerHandle | None = None

    def answered(self, size: int) -> None:
        """An answer of ``size`` bytes was read (call it on the event loop)."""
        if self._trim is None or size < TRIM_AFTER_BYTES:
            return
        if self._pending is not None:
            self._pending.cancel()
        self._pending = asyncio.get_running_loop().call_later(self._delay, self._run)

    def _run(self) -> None:
        self._pending = None
        assert self._trim is not None
        began = time.perf_counter()
        self._trim()
        self._trimmed(time.perf_counter() - began)

    def cancel(self) -> None:
        """Drop a trim still pending (the client closes)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
