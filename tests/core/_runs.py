"""The core's lifecycle under the names the backend tests use, in two flavours.

``async``: one :class:`~jobset_core.lifecycle.Lifecycle` of one session on the test's event
loop (what a triggerer or an async caller does). ``blocking``: every call goes through
:func:`jobset_core.lifecycle.blocking` on a thread of its own, with a session of its own (what a
synchronous caller does: a worker, a KFP step, ``jobsetctl``). Both must behave the same; the
tests run in both.

:meth:`RunFace.wait` returns the outcome for a terminal verdict (and for a restart handed back)
and raises the core's error for every other one, as a caller that only cares about the
JobSet would.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from jobset_core.errors import JobSetGone
from jobset_core.lifecycle import (
    ClientSettings,
    Deadline,
    Handle,
    Lifecycle,
    LogTarget,
    Reporter,
    RunRequest,
    Submission,
    Verdict,
    blocking,
    error_for,
    session,
)
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome, Progress

FLAVOURS = ["async", "blocking"]
T = TypeVar("T")


def outcome_of(verdict: Verdict) -> Outcome:
    """The outcome of a verdict that has one; the core's error for the others."""
    if verdict.kind in ("completed", "failed", "restarting", "reached"):
        assert verdict.outcome is not None
        return verdict.outcome
    error = error_for(verdict)
    assert error is not None
    raise error


class RunFace:
    """One way to call the lifecycle (see the module docs)."""

    def __init__(
        self,
        flavour: str,
        kubeconfig: Path,
        kind: Backend,
        *,
        shared: Lifecycle | None = None,
        **options: Any,
    ) -> None:
        self.flavour, self.kind = flavour, kind
        self.settings = ClientSettings(kubeconfig_path=str(kubeconfig))
        self.options = options
        self._shared = shared

    async def call(self, work: Callable[[Lifecycle], Awaitable[T]]) -> T:
        if self.flavour == "async":
            assert self._shared is not None
            return await work(self._shared)
        return await asyncio.to_thread(blocking, self.settings, work, **self.options)

    @property
    def run(self) -> Lifecycle:
        assert self._shared is not None, "only the async flavour shares one Lifecycle"
        return self._shared

    def request(self, **fields: Any) -> RunRequest:
        """A request of this face's backend."""
        return RunRequest(backend=self.kind, **fields)

    # ------------------------------------------------------------------ the verbs

    async def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: dict[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        request = self.request(
            jobset=jobset, namespace=namespace, identity=identity or {}, adopt_uid=expected_uid
        )

        async def start(lifecycle: Lifecycle) -> Submission:
            return (await lifecycle.start(request)).submission

        return await self.call(start)

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: dict[str, str] | None = None,
    ) -> Handle:
        found = await self.call(
            lambda lifecycle: lifecycle.runs.locate(
                name, namespace=namespace, backend=self.kind, uid=uid, identity=identity
            )
        )
        return found.handle

    async def verdict(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        on_restart: str = "continue",
        until: frozenset[Any] = frozenset(),
    ) -> Verdict:
        request = self.request(
            namespace=handle.namespace,
            deadline=Deadline(timeout=timeout).begin(time.time()),
            on_restart=on_restart,  # type: ignore[arg-type]
            until=until,
            cancel_on_kill=False,
        )
        report = Reporter(progress=on_progress)
        return await self.call(lambda lifecycle: lifecycle.wait(request, handle, report=report))

    async def wait(self, handle: Handle, **kwargs: Any) -> Outcome:
        return outcome_of(await self.verdict(handle, **kwargs))

    async def flush(self) -> None:
        """The writes that outlive a verdict are done (a blocking call's session closed with
        them done already)."""
        await self.call(lambda lifecycle: lifecycle.flush())

    async def status(self, handle: Handle) -> Outcome:
        return (await self.call(lambda lifecycle: lifecycle.runs.status(handle)))[0]

    async def jobset_status(self, handle: Handle) -> JobSetStatus:
        return (await self.call(lambda lifecycle: lifecycle.runs.status(handle)))[1]

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        await self.call(lambda lifecycle: lifecycle.runs.set_suspend(handle, suspend))

    async def cancel(self, handle: Handle) -> None:
        await self.call(lambda lifecycle: lifecycle.cancel(handle))

    async def delete(self, handle: Handle, *, wait: bool = False, timeout: float = 60) -> None:
        await self.call(lambda lifecycle: lifecycle.runs.delete(handle, wait=wait, timeout=timeout))

    async def logs(self, handle: Handle, **target: Any) -> list[str]:
        lines: list[str] = []
        await self.call(
            lambda lifecycle: lifecycle.runs.read_log(
                handle, LogTarget(**target), follow=False, sink=lambda ln: lines.append(ln.text)
            )
        )
        return lines

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        from jobset_core.lifecycle._logs import failed_pod_logs

        return await self.call(
            lambda lifecycle: failed_pod_logs(lifecycle.client, handle, tail_lines=tail_lines)
        )


@contextlib.asynccontextmanager
async def open_face(
    flavour: str, kubeconfig: Path, kind: Backend, **options: Any
) -> AsyncIterator[RunFace]:
    """A :class:`RunFace` of ``flavour`` (its client and observer closed afterwards)."""
    if flavour == "blocking":
        yield RunFace(flavour, kubeconfig, kind, **options)
        return
    async with session(ClientSettings(kubeconfig_path=str(kubeconfig)), **options) as lifecycle:
        yield RunFace(flavour, kubeconfig, kind, shared=lifecycle, **options)


def run_request(js: Any, namespace: str, backend: str, *, timeout: float, **fields: Any) -> Any:
    """A ``RunRequest`` of ``js`` in ``namespace`` on ``backend``, within ``timeout`` seconds."""
    from jobset_core.lifecycle import Deadline, RunRequest

    deadline = Deadline(timeout=timeout)
    return RunRequest(jobset=js, namespace=namespace, backend=backend, deadline=deadline, **fields)


async def start_meeting_a_namesake_being_deleted(
    face: RunFace, jobset: JobSet, namespace: str, devcluster: Any
) -> tuple[Submission, Submission]:
    """A run is deleted while a finalizer of the test's holds it; a start of the same run
    meanwhile must wait, not adopt the run going away nor fail; once the hold is released,
    it creates a run of its own. The first and the second submission."""
    from tests.cluster.holds import HOLD, finalizers, hold

    first = await face.submit(jobset, namespace=namespace, identity={"run": "test"})
    name = first.handle.name
    hold(devcluster, face.kind, namespace, name, True)
    await face.delete(first.handle, wait=False)
    start = asyncio.ensure_future(
        face.submit(jobset, namespace=namespace, identity={"run": "test"})
    )
    try:
        ends = time.monotonic() + 60
        # until the garbage collector took the run's children
        while (held := finalizers(devcluster, face.kind, namespace, name)) != [HOLD]:
            assert time.monotonic() < ends, held
            await asyncio.sleep(0.2)
        await asyncio.sleep(2)
        assert not start.done(), "the start did not wait for its namesake to go"
        hold(devcluster, face.kind, namespace, name, False)
        second = await asyncio.wait_for(start, 90)
    finally:
        start.cancel()
    return first, second


__all__ = [
    "FLAVOURS",
    "JobSetGone",
    "RunFace",
    "open_face",
    "outcome_of",
    "run_request",
    "start_meeting_a_namesake_being_deleted",
]
