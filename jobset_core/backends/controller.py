"""The ``controller`` backend: submit the JobSet resource; the upstream controller runs it.

:class:`ControllerBackend` (sync, over :class:`~jobset_core.client.JobSetClient`) and
:class:`AsyncControllerBackend` (async, over :class:`~jobset_core.client.AsyncJobSetClient`)
are textual twins: the same methods, names and steps; every decision is made by the pure
:mod:`jobset_core.backends._common`.

Tracking is a watch, never a poll: list the JobSet (field selector on its name), then watch
from the list's resourceVersion with bookmarks; a 410 Gone relists, a dropped or refused
connection reconnects with backoff from the last resourceVersion seen. A second stream follows
the JobSet's Events (field selector ``involvedObject.uid``) so a ``JobCreationFailed`` or
``HeadlessServiceCreationFailed`` warning, which upstream never turns into a failed JobSet,
ends the wait with :class:`~jobset_core.errors.CreationFailed` instead of a silent hang. The
sync twin reads each stream in a daemon thread feeding one queue; the async twin in a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

from jobset_core.backends import _common as common
from jobset_core.backends._base import Handle, OnRestart, ProgressCallback, Submission
from jobset_core.backends._pods import AsyncPodAccess, PodAccess
from jobset_core.client import (
    AsyncJobSetClient,
    EventType,
    JobSetClient,
    ObjectList,
    Unreachable,
    WatchEvent,
)
from jobset_core.errors import (
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
    WaitTimeout,
)
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome
from jobset_core.validation import ensure_valid

__all__ = ["AsyncControllerBackend", "ControllerBackend"]

#: Server-side length of one watch request, in seconds (a stopped reader ends within it).
WATCH_WINDOW = 20
_RECONNECT_BASE = 0.5
_RECONNECT_MAX = 5.0
_TRANSIENT = (Unreachable, ServerError, TooManyRequests)
_ERROR = "error"
_EVENT = common.SOURCE_EVENT


def _backoff(failures: int) -> float:
    return float(min(_RECONNECT_MAX, _RECONNECT_BASE * 2 ** max(0, failures - 1)))


def _not_ours(handle: Handle, jobset: JobSet) -> bool:
    return bool(handle.uid) and jobset.metadata.uid != handle.uid


def _gone(handle: Handle) -> NotFound:
    return common.jobset_gone(handle.namespace, handle.name, handle.uid)


def _present(handle: Handle, listed: ObjectList[JobSet]) -> ObjectList[JobSet]:
    """A list of the JobSet by name; raises when it holds no JobSet with the handle's UID."""
    if not any(not _not_ours(handle, jobset) for jobset in listed.items):
        raise _gone(handle)
    return listed


def _optional(tag: str | None, error: Exception) -> bool:
    """Whether a stream's failure may be ignored: reading Events is a courtesy (it only makes
    creation failures surface sooner), so an identity without RBAC for it still waits."""
    return tag == _EVENT and isinstance(error, Forbidden)


class ControllerBackend:
    """Runs JobSets through the upstream JobSet controller (synchronous).

    Args:
        client: The API client (not closed by the backend).
        validate: Check every JobSet with :func:`~jobset_core.validation.validate` before
            creating anything (turn off only to let the server judge, e.g. in tests).
        feature_gates: The controller's feature gates, for validation.
        poll_interval: Seconds between checks while waiting for deletion or a log pod.
        watch_window: Server-side length of one watch request, in seconds.
    """

    kind: Backend = "controller"

    def __init__(
        self,
        client: JobSetClient,
        *,
        validate: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        poll_interval: float = 0.5,
        watch_window: int = WATCH_WINDOW,
    ) -> None:
        self._client = client
        self._validate = validate
        self._gates = dict(feature_gates or {})
        self._window = watch_window
        self._access = PodAccess(client, read_jobset=self._get, poll_interval=poll_interval)

    # ------------------------------------------------------------------ identity

    def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        """Validate, then create the JobSet with its identity labels, or adopt the existing
        one when its identity labels (and UID, when given) match.

        Raises:
            SpecError: the JobSet is invalid (every problem, nothing created).
            IdentityMismatch: an object of that name exists but is not this run's.
        """
        named, marks = common.stamp_identity(jobset, namespace, identity)
        if self._validate:
            ensure_valid(named, feature_gates=self._gates)
        try:
            created = self._client.create_jobset(named, namespace=namespace)
        except Conflict:
            existing = self._client.get_jobset(named.name, namespace=namespace)
            problem = common.adoption_problem(
                kind="JobSet",
                namespace=namespace,
                name=named.name,
                labels=existing.metadata.labels,
                uid=existing.metadata.uid,
                expected_labels=marks,
                expected_uid=expected_uid,
            )
            if problem is not None:
                raise problem from None
            return Submission(self._handle(existing), created=False, identity=marks)
        return Submission(self._handle(created), created=True, identity=marks)

    def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach by name; with ``uid`` or ``identity`` the JobSet must match them."""
        existing = self._client.get_jobset(name, namespace=namespace)
        if uid or identity:
            problem = common.adoption_problem(
                kind="JobSet",
                namespace=namespace,
                name=name,
                labels=existing.metadata.labels,
                uid=existing.metadata.uid,
                expected_labels=common.identity_labels(identity),
                expected_uid=uid,
            )
            if problem is not None:
                raise problem
        return self._handle(existing)

    def _handle(self, jobset: JobSet) -> Handle:
        meta = jobset.metadata
        return Handle(jobset.name, meta.namespace or "", meta.uid or "", self.kind)

    # ------------------------------------------------------------------ state

    def _get(self, handle: Handle) -> JobSet:
        jobset = self._client.get_jobset(handle.name, namespace=handle.namespace)
        if _not_ours(handle, jobset):
            raise _gone(handle)
        return jobset

    def status(self, handle: Handle) -> Outcome:
        """A snapshot; a finished run carries its result."""
        jobset = self._get(handle)
        outcome = common.build_outcome(jobset, self.kind)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": self._access.result(handle, jobset)})
        return outcome

    def jobset_status(self, handle: Handle) -> JobSetStatus:
        """The JobSet's ``status`` as the controller wrote it."""
        return self._get(handle).status or JobSetStatus()

    def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """Suspend (``True``) or resume the run by patching ``spec.suspend``."""
        self._get(handle)
        patched = self._client.patch_jobset(
            handle.name, {"spec": {"suspend": suspend}}, namespace=handle.namespace
        )
        return common.build_outcome(patched, self.kind)

    def _job_failure(self, handle: Handle, job: str | None) -> str:
        if not job:
            return ""
        try:
            return common.job_failure(self._client.get_job(job, namespace=handle.namespace))
        except NotFound:
            return ""

    # ------------------------------------------------------------------ watching

    def _stream(
        self,
        list_: Callable[[], ObjectList[Any]],
        watch: Callable[[str], Iterator[WatchEvent[Any]]],
        stop: threading.Event,
        resource_version: str | None = None,
    ) -> Iterator[tuple[str, Any]]:
        """List, then watch from the list's resourceVersion; relist on 410 Gone; reconnect
        with backoff when the connection drops. Yields ``(source, object)``."""
        version, failures = resource_version, 0
        while not stop.is_set():
            try:
                if not version:
                    listed = list_()
                    version = listed.resource_version
                    for item in listed.items:
                        yield common.SOURCE_LIST, item
                for event in watch(version):
                    version = event.resource_version or version
                    if event.type is not EventType.BOOKMARK:
                        yield event.type.value, event.object
                failures = 0
            except Gone:
                version = None
            except _TRANSIENT:
                failures += 1
                stop.wait(_backoff(failures))

    def _jobset_stream(
        self, handle: Handle, stop: threading.Event, resource_version: str | None = None
    ) -> Iterator[tuple[str, Any]]:
        by_name = {"metadata.name": handle.name}

        def list_() -> ObjectList[JobSet]:
            listed = self._client.list_jobsets(namespace=handle.namespace, field_selector=by_name)
            return _present(handle, listed)

        return self._stream(
            list_,
            lambda version: self._client.watch_jobsets(
                namespace=handle.namespace,
                resource_version=version,
                field_selector=by_name,
                timeout_seconds=self._window,
            ),
            stop,
            resource_version,
        )

    def _event_stream(self, handle: Handle, stop: threading.Event) -> Iterator[tuple[str, Any]]:
        about = {"involvedObject.uid": handle.uid}
        return self._stream(
            lambda: self._client.list_events(namespace=handle.namespace, field_selector=about),
            lambda version: self._client.watch_events(
                namespace=handle.namespace,
                resource_version=version,
                field_selector=about,
                timeout_seconds=self._window,
            ),
            stop,
        )

    def snapshots(
        self, handle: Handle, *, resource_version: str | None = None
    ) -> Iterator[tuple[str, JobSet]]:
        """Every state of the JobSet as ``(source, jobset)``: ``source`` is ``"list"`` for a
        (re)list, else the watch event type. Starts with a list, or with a watch from
        ``resource_version`` when given (a too-old one relists). Runs until closed."""
        stop = threading.Event()
        try:
            yield from self._jobset_stream(handle, stop, resource_version)
        finally:
            stop.set()

    def _pump(
        self, items: Iterator[tuple[str, Any]], tag: str | None, out: queue.Queue[Any]
    ) -> None:
        try:
            for source, item in items:
                out.put((tag or source, item))
        except Exception as error:  # the waiter raises it; a dead reader must not hang it
            if not _optional(tag, error):
                out.put((_ERROR, error))

    def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Follow the JobSet until ``Completed``/``Failed`` (or, with ``on_restart="return"``,
        until ``status.restarts`` grows past its value when the wait began).

        Raises:
            WaitTimeout: ``timeout`` seconds passed first (the JobSet keeps running).
            CreationFailed: the controller reported it cannot create a child object.
            NotFound: the JobSet was deleted before it finished.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        tracker = common.WaitTracker(self.kind, return_on_restart=on_restart == "return")
        inbox: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        for items, tag in (
            (self._jobset_stream(handle, stop), None),
            (self._event_stream(handle, stop), _EVENT),
        ):
            threading.Thread(target=self._pump, args=(items, tag, inbox), daemon=True).start()
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                try:
                    source, item = inbox.get(
                        timeout=None if remaining is None else max(0.0, remaining)
                    )
                except queue.Empty:
                    raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0) from None
                outcome = self._judge(handle, tracker, source, item, on_progress)
                if outcome is not None:
                    return outcome
        finally:
            stop.set()

    def _judge(
        self,
        handle: Handle,
        tracker: common.WaitTracker,
        source: str,
        item: Any,
        on_progress: ProgressCallback | None,
    ) -> Outcome | None:
        if source == _ERROR:
            raise item
        verdict = common.judge(
            tracker,
            namespace=handle.namespace,
            name=handle.name,
            uid=handle.uid,
            source=source,
            item=item,
        )
        if verdict.progress is not None and on_progress is not None:
            on_progress(verdict.progress)
        if verdict.error is not None:
            raise verdict.error
        if verdict.outcome is None or verdict.jobset is None:
            return None
        if verdict.restarted:
            detail = self._job_failure(handle, verdict.failed_job)
            return common.restart_details(verdict.outcome, verdict.jobset, detail)
        result = self._access.result(handle, verdict.jobset)
        return verdict.outcome.model_copy(update={"result": result})

    # ------------------------------------------------------------------ cleanup

    def cancel(self, handle: Handle) -> None:
        """One DELETE with foreground propagation (UID precondition); already gone is fine."""
        with contextlib.suppress(NotFound, Conflict):
            self._client.delete_jobset(
                handle.name,
                namespace=handle.namespace,
                propagation="Foreground",
                uid=handle.uid or None,
            )

    def delete(self, handle: Handle, *, wait: bool = False, timeout: float | None = None) -> None:
        """Delete the JobSet (foreground); with ``wait``, until it, its Jobs, pods and
        Service are gone.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        self.cancel(handle)
        if wait:
            self._access.wait_gone(handle, self._leftovers, timeout)

    def _leftovers(self, handle: Handle) -> list[str]:
        ns, selector = handle.namespace, {"jobset.sigs.k8s.io/jobset-name": handle.name}
        by_name = {"metadata.name": handle.name}
        return common.leftovers(
            handle.uid,
            jobsets=self._client.list_jobsets(namespace=ns, field_selector=by_name).items,
            jobs=self._client.list_jobs(namespace=ns, label_selector=selector).items,
            pods=self._client.list_pods(namespace=ns, label_selector=selector).items,
            services=self._client.list_services(namespace=ns).items,
        )

    # ------------------------------------------------------------------ logs

    def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> Iterator[str]:
        """Lines of one pod's first container (default: the coordinator, else pod 0 of job 0
        of the first replicated job). With ``follow``, waits for the pod to start.

        Raises:
            NotFound: no such pod (without ``follow``).
        """
        yield from self._access.stream_logs(
            handle,
            replicated_job=replicated_job,
            job_index=job_index,
            pod_index=pod_index,
            follow=follow,
        )

    def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """The last ``tail_lines`` lines of every failed pod's first container, by pod name."""
        return self._access.failed_pod_logs(handle, tail_lines=tail_lines)


class AsyncControllerBackend:
    """Runs JobSets through the upstream JobSet controller (asynchronous twin of
    :class:`ControllerBackend`: same names, same behaviour)."""

    kind: Backend = "controller"

    def __init__(
        self,
        client: AsyncJobSetClient,
        *,
        validate: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        poll_interval: float = 0.5,
        watch_window: int = WATCH_WINDOW,
    ) -> None:
        self._client = client
        self._validate = validate
        self._gates = dict(feature_gates or {})
        self._window = watch_window
        self._access = AsyncPodAccess(client, read_jobset=self._get, poll_interval=poll_interval)

    # ------------------------------------------------------------------ identity

    async def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        """See :meth:`ControllerBackend.submit`."""
        named, marks = common.stamp_identity(jobset, namespace, identity)
        if self._validate:
            ensure_valid(named, feature_gates=self._gates)
        try:
            created = await self._client.create_jobset(named, namespace=namespace)
        except Conflict:
            existing = await self._client.get_jobset(named.name, namespace=namespace)
            problem = common.adoption_problem(
                kind="JobSet",
                namespace=namespace,
                name=named.name,
                labels=existing.metadata.labels,
                uid=existing.metadata.uid,
                expected_labels=marks,
                expected_uid=expected_uid,
            )
            if problem is not None:
                raise problem from None
            return Submission(self._handle(existing), created=False, identity=marks)
        return Submission(self._handle(created), created=True, identity=marks)

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """See :meth:`ControllerBackend.attach`."""
        existing = await self._client.get_jobset(name, namespace=namespace)
        if uid or identity:
            problem = common.adoption_problem(
                kind="JobSet",
                namespace=namespace,
                name=name,
                labels=existing.metadata.labels,
                uid=existing.metadata.uid,
                expected_labels=common.identity_labels(identity),
                expected_uid=uid,
            )
            if problem is not None:
                raise problem
        return self._handle(existing)

    def _handle(self, jobset: JobSet) -> Handle:
        meta = jobset.metadata
        return Handle(jobset.name, meta.namespace or "", meta.uid or "", self.kind)

    # ------------------------------------------------------------------ state

    async def _get(self, handle: Handle) -> JobSet:
        jobset = await self._client.get_jobset(handle.name, namespace=handle.namespace)
        if _not_ours(handle, jobset):
            raise _gone(handle)
        return jobset

    async def status(self, handle: Handle) -> Outcome:
        """See :meth:`ControllerBackend.status`."""
        jobset = await self._get(handle)
        outcome = common.build_outcome(jobset, self.kind)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(
                update={"result": await self._access.result(handle, jobset)}
            )
        return outcome

    async def jobset_status(self, handle: Handle) -> JobSetStatus:
        """See :meth:`ControllerBackend.jobset_status`."""
        return (await self._get(handle)).status or JobSetStatus()

    async def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """See :meth:`ControllerBackend.set_suspend`."""
        await self._get(handle)
        patched = await self._client.patch_jobset(
            handle.name, {"spec": {"suspend": suspend}}, namespace=handle.namespace
        )
        return common.build_outcome(patched, self.kind)

    async def _job_failure(self, handle: Handle, job: str | None) -> str:
        if not job:
            return ""
        try:
            return common.job_failure(await self._client.get_job(job, namespace=handle.namespace))
        except NotFound:
            return ""

    # ------------------------------------------------------------------ watching

    async def _stream(
        self,
        list_: Callable[[], Awaitable[ObjectList[Any]]],
        watch: Callable[[str], AsyncIterator[WatchEvent[Any]]],
        stop: asyncio.Event,
        resource_version: str | None = None,
    ) -> AsyncIterator[tuple[str, Any]]:
        """See :meth:`ControllerBackend._stream`."""
        version, failures = resource_version, 0
        while not stop.is_set():
            try:
                if not version:
                    listed = await list_()
                    version = listed.resource_version
                    for item in listed.items:
                        yield common.SOURCE_LIST, item
                async for event in watch(version):
                    version = event.resource_version or version
                    if event.type is not EventType.BOOKMARK:
                        yield event.type.value, event.object
                failures = 0
            except Gone:
                version = None
            except _TRANSIENT:
                failures += 1
                await asyncio.sleep(_backoff(failures))

    def _jobset_stream(
        self, handle: Handle, stop: asyncio.Event, resource_version: str | None = None
    ) -> AsyncIterator[tuple[str, Any]]:
        by_name = {"metadata.name": handle.name}

        async def list_() -> ObjectList[JobSet]:
            listed = await self._client.list_jobsets(
                namespace=handle.namespace, field_selector=by_name
            )
            return _present(handle, listed)

        return self._stream(
            list_,
            lambda version: self._client.watch_jobsets(
                namespace=handle.namespace,
                resource_version=version,
                field_selector=by_name,
                timeout_seconds=self._window,
            ),
            stop,
            resource_version,
        )

    def _event_stream(self, handle: Handle, stop: asyncio.Event) -> AsyncIterator[tuple[str, Any]]:
        about = {"involvedObject.uid": handle.uid}
        return self._stream(
            lambda: self._client.list_events(namespace=handle.namespace, field_selector=about),
            lambda version: self._client.watch_events(
                namespace=handle.namespace,
                resource_version=version,
                field_selector=about,
                timeout_seconds=self._window,
            ),
            stop,
        )

    async def snapshots(
        self, handle: Handle, *, resource_version: str | None = None
    ) -> AsyncIterator[tuple[str, JobSet]]:
        """See :meth:`ControllerBackend.snapshots`."""
        stop = asyncio.Event()
        try:
            async for item in self._jobset_stream(handle, stop, resource_version):
                yield item
        finally:
            stop.set()

    async def _pump(
        self, items: AsyncIterator[tuple[str, Any]], tag: str | None, out: asyncio.Queue[Any]
    ) -> None:
        try:
            async for source, item in items:
                await out.put((tag or source, item))
        except Exception as error:  # the waiter raises it; a dead reader must not hang it
            if not _optional(tag, error):
                await out.put((_ERROR, error))

    async def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """See :meth:`ControllerBackend.wait`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        tracker = common.WaitTracker(self.kind, return_on_restart=on_restart == "return")
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self._pump(items, tag, inbox))
            for items, tag in (
                (self._jobset_stream(handle, stop), None),
                (self._event_stream(handle, stop), _EVENT),
            )
        ]
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                try:
                    source, item = await asyncio.wait_for(
                        inbox.get(), None if remaining is None else max(0.0, remaining)
                    )
                except asyncio.TimeoutError:
                    raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0) from None
                outcome = await self._judge(handle, tracker, source, item, on_progress)
                if outcome is not None:
                    return outcome
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _judge(
        self,
        handle: Handle,
        tracker: common.WaitTracker,
        source: str,
        item: Any,
        on_progress: ProgressCallback | None,
    ) -> Outcome | None:
        if source == _ERROR:
            raise item
        verdict = common.judge(
            tracker,
            namespace=handle.namespace,
            name=handle.name,
            uid=handle.uid,
            source=source,
            item=item,
        )
        if verdict.progress is not None and on_progress is not None:
            on_progress(verdict.progress)
        if verdict.error is not None:
            raise verdict.error
        if verdict.outcome is None or verdict.jobset is None:
            return None
        if verdict.restarted:
            detail = await self._job_failure(handle, verdict.failed_job)
            return common.restart_details(verdict.outcome, verdict.jobset, detail)
        result = await self._access.result(handle, verdict.jobset)
        return verdict.outcome.model_copy(update={"result": result})

    # ------------------------------------------------------------------ cleanup

    async def cancel(self, handle: Handle) -> None:
        """See :meth:`ControllerBackend.cancel`."""
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete_jobset(
                handle.name,
                namespace=handle.namespace,
                propagation="Foreground",
                uid=handle.uid or None,
            )

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = None
    ) -> None:
        """See :meth:`ControllerBackend.delete`."""
        await self.cancel(handle)
        if wait:
            await self._access.wait_gone(handle, self._leftovers, timeout)

    async def _leftovers(self, handle: Handle) -> list[str]:
        ns, selector = handle.namespace, {"jobset.sigs.k8s.io/jobset-name": handle.name}
        by_name = {"metadata.name": handle.name}
        return common.leftovers(
            handle.uid,
            jobsets=(await self._client.list_jobsets(namespace=ns, field_selector=by_name)).items,
            jobs=(await self._client.list_jobs(namespace=ns, label_selector=selector)).items,
            pods=(await self._client.list_pods(namespace=ns, label_selector=selector)).items,
            services=(await self._client.list_services(namespace=ns)).items,
        )

    # ------------------------------------------------------------------ logs

    async def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> AsyncIterator[str]:
        """See :meth:`ControllerBackend.stream_logs`."""
        async for line in self._access.stream_logs(
            handle,
            replicated_job=replicated_job,
            job_index=job_index,
            pod_index=pod_index,
            follow=follow,
        ):
            yield line

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """See :meth:`ControllerBackend.failed_pod_logs`."""
        return await self._access.failed_pod_logs(handle, tail_lines=tail_lines)
