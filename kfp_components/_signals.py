"""SIGTERM during a launch: one quick DELETE of the task's JobSet, then stop.

When a KFP run is terminated, Argo signals the launcher's process group and the pod is killed
about a second later, so the handler sends exactly one DELETE (the backend's ``cancel``: no
waiting for the deletion) and raises :class:`Terminated` to end the wait.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from jobset_core.backends import BackendProtocol, Handle

__all__ = ["Terminated", "cancel_on_sigterm"]


class Terminated(BaseException):
    """The process got SIGTERM; the JobSet was asked to be deleted.

    A ``BaseException`` so that no ``except Exception`` on the way swallows it.
    """

    def __init__(self, handle: Handle | None, error: Exception | None = None) -> None:
        self.handle, self.error = handle, error
        what = f"JobSet {handle.namespace}/{handle.name}" if handle else "no JobSet yet"
        note = f" (the DELETE failed: {error})" if error else " (DELETE sent)"
        super().__init__(f"terminated by SIGTERM; {what}{note if handle else ''}")


@contextlib.contextmanager
def cancel_on_sigterm(
    backend: BackendProtocol, current: Callable[[], Handle | None]
) -> Iterator[None]:
    """Within the block, SIGTERM cancels ``current()`` once and raises :class:`Terminated`.

    Only installs the handler in the main thread (signals are delivered there); elsewhere the
    block runs unguarded.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[bool] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        fired.append(True)
        handle = current()
        error = None
        if handle is not None:
            try:
                backend.cancel(handle)
            except Exception as err:  # reported in Terminated; the process is ending anyway
                error = err
        raise Terminated(handle, error)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
