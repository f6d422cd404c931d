"""The contract every backend keeps, in a sync and an async twin with the same names.

A backend turns a JobSet into running child objects on a cluster and reports how it ends:

- ``controller``: submits the JobSet resource; the upstream controller does the rest.
- ``native``: creates the headless Service and child Jobs itself (clusters without the
  controller), owned by one anchor object, and applies the same pure policies.

Both return the same :class:`~jobset_core.outcome.Outcome`; adapters never look further.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome, Progress

__all__ = [
    "AsyncBackendProtocol",
    "BackendProtocol",
    "Handle",
    "OnRestart",
    "ProgressCallback",
    "Submission",
]

#: What ``wait`` does when the JobSet restarts: keep waiting (``"continue"``), or return a
#: non-terminal outcome with phase ``Restarting`` so an orchestrator can turn the restart into
#: a task retry (``"return"``). For the native backend, ``"return"`` stops after the attempt's
#: Jobs are deleted and the restart is recorded; the next ``wait`` creates the next attempt.
OnRestart = Literal["continue", "return"]

ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class Handle:
    """Which JobSet a backend is running: enough to reattach from another process."""

    name: str
    namespace: str
    uid: str
    backend: Backend


@dataclass(frozen=True)
class Submission:
    """The result of ``submit``: the handle and whether this call created the object
    (``False``: an existing object with matching identity was adopted)."""

    handle: Handle
    created: bool
    identity: Mapping[str, str] = field(default_factory=dict)


class BackendProtocol(Protocol):
    """Synchronous backend."""

    kind: Backend

    def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        """Create the JobSet, or adopt the existing one when its identity labels (and UID,
        when given) match; raise ``IdentityMismatch`` otherwise. Never creates a duplicate."""
        ...

    def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach to a running JobSet by name (+ UID / identity checks)."""
        ...

    def status(self, handle: Handle) -> Outcome:
        """A snapshot (``terminal_state`` is ``None`` while it runs)."""
        ...

    def jobset_status(self, handle: Handle) -> JobSetStatus:
        """The run's status in the JobSet status shape (conditions, terminalState, restarts,
        restartsCountTowardsMax, replicatedJobsStatus): the controller's for ``controller``,
        the one the backend keeps on its anchor for ``native``. ``jobsetctl status -o json``
        prints it."""
        ...

    def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Watch until terminal (or restart with ``on_restart="return"``); ``WaitTimeout``
        when ``timeout`` seconds pass first (the JobSet is left running)."""
        ...

    def cancel(self, handle: Handle) -> None:
        """One quick DELETE (foreground propagation), for signal handlers and kill paths."""
        ...

    def delete(self, handle: Handle, *, wait: bool = False, timeout: float | None = None) -> None:
        """Delete everything the run created; optionally wait until it is all gone."""
        ...

    def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> Iterator[str]:
        """Lines of one pod's log (default: the coordinator, else the first pod of the first
        replicated job)."""
        ...

    def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """The last lines of every failed pod of the run, by pod name."""
        ...


class AsyncBackendProtocol(Protocol):
    """Asynchronous twin of :class:`BackendProtocol`: same names, same behaviour."""

    kind: Backend

    async def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission: ...

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle: ...

    async def status(self, handle: Handle) -> Outcome: ...

    async def jobset_status(self, handle: Handle) -> JobSetStatus: ...

    async def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome: ...

    async def cancel(self, handle: Handle) -> None: ...

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = None
    ) -> None: ...

    def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> AsyncIterator[str]: ...

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]: ...
