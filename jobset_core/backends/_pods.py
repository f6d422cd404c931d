"""Pod, log and cleanup access shared by the ``controller`` and ``native`` backends.

Both backends find a run's pods the same way (label selector ``jobset-name`` + ``jobset-uid``),
read logs the same way and wait for deletion the same way; only two things differ and are
passed in: how to read the JobSet spec behind a handle (the JobSet resource, or the native
anchor's copy) and what is left of a run after a delete (the JobSet, or the anchor ConfigMap,
besides Jobs, pods and Services). :class:`PodAccess` (sync) and :class:`AsyncPodAccess` are
textual twins; every decision is made by the pure :mod:`jobset_core.backends._common`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jobset_core.backends import _common as common
from jobset_core.backends._base import Handle
from jobset_core.errors import ApiError, NotFound, WaitTimeout
from jobset_core.models import JobSet

if TYPE_CHECKING:
    from jobset_core.client import AsyncJobSetClient, JobSetClient

__all__ = ["AsyncPodAccess", "PodAccess"]


class PodAccess:
    """A run's pods, their logs and the wait until a deleted run is gone (synchronous).

    Args:
        client: The API client (not closed here).
        read_jobset: The JobSet spec behind a handle (raises when the run is gone).
        poll_interval: Seconds between checks while waiting for deletion or a log pod.
    """

    def __init__(
        self,
        client: JobSetClient,
        *,
        read_jobset: Callable[[Handle], JobSet],
        poll_interval: float,
    ) -> None:
        self._client = client
        self._read_jobset = read_jobset
        self._poll = poll_interval

    def pods(self, handle: Handle) -> list[dict[str, Any]]:
        """Every pod of the run (label selector on its name and UID)."""
        selector = common.jobset_selector(handle.name, handle.uid)
        return self._client.list_pods(namespace=handle.namespace, label_selector=selector).items

    def result(self, handle: Handle, jobset: JobSet) -> Any:
        """The result the default log pod wrote in its termination message, if any."""
        target = common.log_pod_target(jobset)
        if target is None:
            return None
        return common.termination_result(common.choose_log_pod(self.pods(handle), target))

    def wait_gone(
        self,
        handle: Handle,
        leftovers: Callable[[Handle], list[str]],
        timeout: float | None,
    ) -> None:
        """Poll ``leftovers`` until it is empty.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while leftovers(handle):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0)
            time.sleep(self._poll)

    def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None,
        job_index: int,
        pod_index: int,
        follow: bool,
    ) -> Iterator[str]:
        """Lines of one pod's first container; with ``follow``, waits for the pod to start.

        Raises:
            NotFound: no such pod (without ``follow``).
        """
        pod = self._log_pod(handle, replicated_job, job_index, pod_index, follow)
        name = str(pod["metadata"]["name"])
        container = common.pod_container(pod)
        while True:
            try:
                lines = self._client.stream_pod_log(
                    name, namespace=handle.namespace, container=container, follow=follow
                )
                yield from lines
                return
            except ApiError as error:
                if not follow or error.status != 400:  # 400: the container has not started yet
                    raise
            time.sleep(self._poll)

    def _log_pod(
        self,
        handle: Handle,
        replicated_job: str | None,
        job_index: int,
        pod_index: int,
        follow: bool,
    ) -> Mapping[str, Any]:
        jobset = None if replicated_job else self._read_jobset(handle)
        target = common.log_pod_target(
            jobset, replicated_job=replicated_job, job_index=job_index, pod_index=pod_index
        )
        if target is None:
            raise NotFound(404, "NotFound", f"JobSet {handle.name} has no replicated job")
        while True:
            pod = common.choose_log_pod(self.pods(handle), target)
            if pod is not None:
                return pod
            if not follow:
                raise NotFound(404, "NotFound", f"no pod {target} of JobSet {handle.name}")
            time.sleep(self._poll)

    def failed_pod_logs(self, handle: Handle, *, tail_lines: int) -> dict[str, str]:
        """The last ``tail_lines`` lines of every failed pod's first container, by pod name."""
        out: dict[str, str] = {}
        for pod in common.failed_pods(self.pods(handle)):
            name = str(pod["metadata"]["name"])
            try:
                out[name] = self._client.read_pod_log(
                    name,
                    namespace=handle.namespace,
                    container=common.pod_container(pod),
                    tail_lines=tail_lines,
                )
            except ApiError as error:
                out[name] = f"<log unavailable: {error}>"
        return out


class AsyncPodAccess:
    """Asynchronous twin of :class:`PodAccess` (same names, same behaviour)."""

    def __init__(
        self,
        client: AsyncJobSetClient,
        *,
        read_jobset: Callable[[Handle], Awaitable[JobSet]],
        poll_interval: float,
    ) -> None:
        self._client = client
        self._read_jobset = read_jobset
        self._poll = poll_interval

    async def pods(self, handle: Handle) -> list[dict[str, Any]]:
        """See :meth:`PodAccess.pods`."""
        selector = common.jobset_selector(handle.name, handle.uid)
        listed = await self._client.list_pods(namespace=handle.namespace, label_selector=selector)
        return listed.items

    async def result(self, handle: Handle, jobset: JobSet) -> Any:
        """See :meth:`PodAccess.result`."""
        target = common.log_pod_target(jobset)
        if target is None:
            return None
        return common.termination_result(common.choose_log_pod(await self.pods(handle), target))

    async def wait_gone(
        self,
        handle: Handle,
        leftovers: Callable[[Handle], Awaitable[list[str]]],
        timeout: float | None,
    ) -> None:
        """See :meth:`PodAccess.wait_gone`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while await leftovers(handle):
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0)
            await asyncio.sleep(self._poll)

    async def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None,
        job_index: int,
        pod_index: int,
        follow: bool,
    ) -> AsyncIterator[str]:
        """See :meth:`PodAccess.stream_logs`."""
        pod = await self._log_pod(handle, replicated_job, job_index, pod_index, follow)
        name = str(pod["metadata"]["name"])
        container = common.pod_container(pod)
        while True:
            try:
                lines = self._client.stream_pod_log(
                    name, namespace=handle.namespace, container=container, follow=follow
                )
                async for line in lines:
                    yield line
                return
            except ApiError as error:
                if not follow or error.status != 400:  # 400: the container has not started yet
                    raise
            await asyncio.sleep(self._poll)

    async def _log_pod(
        self,
        handle: Handle,
        replicated_job: str | None,
        job_index: int,
        pod_index: int,
        follow: bool,
    ) -> Mapping[str, Any]:
        jobset = None if replicated_job else await self._read_jobset(handle)
        target = common.log_pod_target(
            jobset, replicated_job=replicated_job, job_index=job_index, pod_index=pod_index
        )
        if target is None:
            raise NotFound(404, "NotFound", f"JobSet {handle.name} has no replicated job")
        while True:
            pod = common.choose_log_pod(await self.pods(handle), target)
            if pod is not None:
                return pod
            if not follow:
                raise NotFound(404, "NotFound", f"no pod {target} of JobSet {handle.name}")
            await asyncio.sleep(self._poll)

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int) -> dict[str, str]:
        """See :meth:`PodAccess.failed_pod_logs`."""
        out: dict[str, str] = {}
        for pod in common.failed_pods(await self.pods(handle)):
            name = str(pod["metadata"]["name"])
            try:
                out[name] = await self._client.read_pod_log(
                    name,
                    namespace=handle.namespace,
                    container=common.pod_container(pod),
                    tail_lines=tail_lines,
                )
            except ApiError as error:
                out[name] = f"<log unavailable: {error}>"
        return out
