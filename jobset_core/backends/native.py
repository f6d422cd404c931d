"""The ``native`` backend: run a JobSet on a cluster without the JobSet controller.

The backend does the controller's work itself, in the calling process. ``submit`` stores the
JobSet in an anchor ConfigMap (:mod:`._anchor`) and runs the first reconcile pass; ``wait``
keeps running passes (:mod:`._native_exec` over the core planner) whenever a child Job
changes: it creates the headless Service and the Jobs from the core renderer, all owned by the
anchor, applies the success, failure, startup and suspend policies, and writes a status of the
JobSet status shape back to the anchor after every change (compare-and-swap on its
``resourceVersion``). Any process can read that status, and a new process resumes where the
last one stopped. Deleting the anchor removes the run through garbage collection.

:class:`NativeBackend` (sync) and :class:`AsyncNativeBackend` are textual twins; every
decision is made in the pure modules they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from jobset_core import naming
from jobset_core.backends._anchor import (
    Anchor,
    NotAnAnchor,
    build_anchor,
    identity_mismatch,
    job_selector,
    parse_anchor,
    suspend_patch,
)
from jobset_core.backends._base import Handle, OnRestart, ProgressCallback, Submission
from jobset_core.backends._native_exec import (
    NativePass,
    PodChoice,
    default_pod,
    outcome_of,
    pick_pod,
    plan_pass,
    pod_selector,
    restarting_outcome,
    termination_message,
)
from jobset_core.client import AsyncJobSetClient, EventType, JobSetClient, Unreachable
from jobset_core.errors import (
    ApiError,
    Conflict,
    CreationFailed,
    Gone,
    IdentityMismatch,
    JobSetError,
    NotFound,
    Problem,
    SpecError,
    WaitTimeout,
)
from jobset_core.models import JobSet
from jobset_core.outcome import Backend, Outcome, Progress, decode_result
from jobset_core.render import Placement
from jobset_core.validation import ensure_valid

__all__ = ["MAX_CONCURRENT_CREATES", "AsyncNativeBackend", "NativeBackend"]

#: Upstream's ``maxParallelism``: Jobs created at the same time.
MAX_CONCURRENT_CREATES = 50
_CONFLICT_RETRIES = 10
_KIND = "ConfigMap"
_ProgressKind = Literal["status", "restarting", "deleted"]


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _check_supported(jobset: JobSet) -> None:
    if jobset.spec.volume_claim_policies:
        problem = Problem(
            "spec.volumeClaimPolicies",
            "the native backend does not create volume claims; use the controller backend",
            "native-unsupported",
        )
        raise SpecError([problem])


def _anchor_of(obj: Mapping[str, Any], handle: Handle) -> Anchor:
    why = identity_mismatch(obj, None, handle.uid)
    if why is not None:
        raise IdentityMismatch(_KIND, handle.namespace, handle.name, why)
    try:
        return parse_anchor(obj)
    except NotAnAnchor as err:
        raise IdentityMismatch(_KIND, handle.namespace, handle.name, str(err)) from err


def _handle(anchor: Anchor) -> Handle:
    return Handle(name=anchor.name, namespace=anchor.namespace, uid=anchor.uid, backend="native")


def _gone(handle: Handle, what: str) -> NotFound:
    return NotFound(404, "NotFound", f"JobSet {handle.namespace}/{handle.name} {what}")


def _progress(outcome: Outcome, kind: _ProgressKind = "status") -> Progress:
    return Progress(
        kind=kind,
        phase=outcome.phase,
        restarts=outcome.restarts,
        replicated_jobs=outcome.replicated_jobs,
        reason=outcome.reason,
        message=outcome.message,
    )


class _Pass:
    """The anchor after one sent pass, the pass, and where a Job watch continues."""

    def __init__(self, anchor: Anchor, step: NativePass, resource_version: str) -> None:
        self.anchor, self.step, self.resource_version = anchor, step, resource_version


class _Reporter:
    """Calls ``on_progress`` when the observable state changes."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self._callback = callback
        self._last: Progress | None = None

    def __call__(self, progress: Progress) -> None:
        if self._callback is not None and progress != self._last:
            self._last = progress
            self._callback(progress)


class NativeBackend:
    """Synchronous native backend.

    Args:
        client: The API client (not closed by the backend).
        poll_interval: Longest quiet time between two passes, in seconds: how soon a change of
            the anchor made elsewhere (suspend, cancel) is noticed while no Job changes.
        ttl_linger: After the run finished, ``wait`` stays up to this many seconds for
            ``ttlSecondsAfterFinished`` to expire and deletes the anchor itself; a longer TTL
            is applied by the next ``wait``/``attach`` after it expired.
        placement: How exclusive placement is rendered (``"affinity"``: no pod webhook needed).
        sleep: Waits between polls (injectable for tests).
        clock: Monotonic seconds (injectable for tests).
    """

    kind: Backend = "native"

    def __init__(
        self,
        client: JobSetClient,
        *,
        poll_interval: float = 5.0,
        ttl_linger: float = 60.0,
        placement: Placement = "affinity",
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._poll = poll_interval
        self._ttl_linger = ttl_linger
        self._placement: Placement = placement
        self._sleep = sleep
        self._clock = clock
        self._services: set[str] = set()

    # ------------------------------------------------------------------ identity

    def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        """Create the anchor and start the run, or adopt an existing anchor whose identity
        labels (and UID, when given) match; ``IdentityMismatch`` otherwise."""
        ensure_valid(jobset)
        _check_supported(jobset)
        body = build_anchor(jobset, namespace, identity)
        try:
            obj = self._client.create_config_map(body, namespace=namespace)
            created = True
        except Conflict:
            name = jobset.name
            obj = self._client.get_config_map(name, namespace=namespace)
            why = identity_mismatch(obj, identity, expected_uid)
            if why is not None:
                raise IdentityMismatch(_KIND, namespace, name, why) from None
            created = False
        handle = _handle(parse_anchor(obj))
        self._reconcile(handle, create=True)
        return Submission(handle=handle, created=created, identity=dict(identity or {}))

    def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach to a run by name (+ UID / identity checks)."""
        obj = self._client.get_config_map(name, namespace=namespace)
        why = identity_mismatch(obj, identity, uid)
        if why is not None:
            raise IdentityMismatch(_KIND, namespace, name, why)
        return _handle(parse_anchor(obj))

    def _read(self, handle: Handle) -> Anchor:
        obj = self._client.get_config_map(handle.name, namespace=handle.namespace)
        return _anchor_of(obj, handle)

    # ------------------------------------------------------------------ status

    def status(self, handle: Handle) -> Outcome:
        """The status last written to the anchor, as an outcome (result once finished)."""
        anchor = self._read(handle)
        outcome = outcome_of(anchor)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": self._result(anchor)})
        return outcome

    def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """Suspend (``True``) or resume the run: set ``spec.suspend`` on the anchor, then run
        one pass so the Jobs follow at once."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = self._read(handle)
            if bool(anchor.jobset.spec.suspend) == suspend:
                break
            patch = suspend_patch(anchor, suspend)
            try:
                self._client.patch_config_map(handle.name, patch, namespace=handle.namespace)
                break
            except Conflict:
                continue
        return outcome_of(self._reconcile(handle, create=True).anchor)

    # ------------------------------------------------------------------ reconcile

    def _reconcile(self, handle: Handle, *, create: bool) -> _Pass:
        for _ in range(_CONFLICT_RETRIES):
            anchor = self._read(handle)
            if anchor.deleting:
                raise _gone(handle, "is being deleted")
            selector = job_selector(anchor.name, anchor.uid)
            listed = self._client.list_jobs(namespace=handle.namespace, label_selector=selector)
            step = plan_pass(anchor, listed.items, _now(), create=create, placement=self._placement)
            if step.plan.problem is not None:
                raise JobSetError(f"JobSet {handle.namespace}/{handle.name}: {step.plan.problem}")
            self._send(anchor, step)
            if step.status_patch is not None:
                try:
                    obj = self._client.patch_config_map(
                        handle.name, step.status_patch, namespace=handle.namespace
                    )
                except Conflict:
                    continue  # someone else wrote first: plan again from what they wrote
                anchor = _anchor_of(obj, handle)
            if step.delete_anchor:
                self._delete_anchor(handle)
            return _Pass(anchor, step, listed.resource_version)
        raise Conflict(409, "Conflict", f"anchor {handle.namespace}/{handle.name} keeps changing")

    def _send(self, anchor: Anchor, step: NativePass) -> None:
        namespace = anchor.namespace
        for deletion in step.delete_jobs:
            with contextlib.suppress(NotFound, Conflict):  # gone, or a namesake: not ours
                self._client.delete_job(deletion.name, namespace=namespace, uid=deletion.uid)
        if step.service is not None and anchor.uid not in self._services:
            try:
                self._client.create_service(step.service, namespace=namespace)
            except Conflict:
                pass
            except ApiError as err:
                raise CreationFailed(
                    namespace, anchor.name, "HeadlessServiceCreationFailed", str(err)
                ) from err
            self._services.add(anchor.uid)
        self._create_jobs(anchor, step.create_jobs)
        for name in step.suspend_jobs:
            self._patch_job(name, namespace, True)
        for name in step.resume_jobs:
            self._patch_job(name, namespace, False)

    def _create_job(self, anchor: Anchor, job: Mapping[str, Any]) -> None:
        try:
            self._client.create_job(job, namespace=anchor.namespace)
        except Conflict:
            pass  # created by an earlier pass or another process
        except ApiError as err:
            raise CreationFailed(
                anchor.namespace, anchor.name, "JobCreationFailed", str(err)
            ) from err

    def _create_jobs(self, anchor: Anchor, jobs: tuple[dict[str, Any], ...]) -> None:
        if len(jobs) <= 1:
            for job in jobs:
                self._create_job(anchor, job)
            return
        with ThreadPoolExecutor(max_workers=min(MAX_CONCURRENT_CREATES, len(jobs))) as pool:
            for future in [pool.submit(self._create_job, anchor, job) for job in jobs]:
                future.result()

    def _patch_job(self, name: str, namespace: str, suspend: bool) -> None:
        with contextlib.suppress(NotFound):
            self._client.patch_job(name, {"spec": {"suspend": suspend}}, namespace=namespace)

    def _delete_anchor(self, handle: Handle) -> None:
        with contextlib.suppress(NotFound, Conflict):
            self._client.delete_config_map(handle.name, namespace=handle.namespace, uid=handle.uid)

    # ------------------------------------------------------------------ wait

    def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Run reconcile passes until the run finishes (or restarts, with
        ``on_restart="return"``); ``WaitTimeout`` when ``timeout`` seconds pass first."""
        deadline = None if timeout is None else self._clock() + timeout
        report = _Reporter(on_progress)
        while True:
            remaining = self._remaining(handle, deadline, timeout)
            try:
                done = self._reconcile(handle, create=True)
            except Unreachable:
                self._sleep(min(1.0, remaining or 1.0))
                continue
            restart = done.step.restart
            if restart is not None:
                report(_progress(restarting_outcome(done.anchor, restart), "restarting"))
                if on_restart == "return":
                    done = self._reconcile(handle, create=False)
                    return restarting_outcome(done.anchor, restart)
            outcome = outcome_of(done.anchor)
            report(_progress(outcome))
            if outcome.phase.terminal and done.step.plan.stage == "Finished":
                if done.step.delete_anchor:
                    report(_progress(outcome, "deleted"))
                elif self._linger(done.step, deadline):
                    self._sleep(done.step.ttl_remaining or 0.0)
                    continue
                return outcome.model_copy(update={"result": self._result(done.anchor)})
            if done.step.acted or outcome.phase.terminal:
                continue
            self._wait_for_change(done, remaining)

    def _remaining(
        self, handle: Handle, deadline: float | None, timeout: float | None
    ) -> float | None:
        if deadline is None or timeout is None:
            return None
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise WaitTimeout(handle.namespace, handle.name, timeout)
        return remaining

    def _linger(self, step: NativePass, deadline: float | None) -> bool:
        left = step.ttl_remaining
        if left is None or left > self._ttl_linger:
            return False
        return deadline is None or self._clock() + left < deadline

    def _wait_for_change(self, done: _Pass, remaining: float | None) -> None:
        seconds = self._poll if remaining is None else min(self._poll, remaining)
        anchor = done.anchor
        events = self._client.watch_jobs(
            namespace=anchor.namespace,
            resource_version=done.resource_version,
            label_selector=job_selector(anchor.name, anchor.uid),
            timeout_seconds=max(1, int(seconds)),
        )
        try:
            for event in events:
                if event.type is not EventType.BOOKMARK:
                    return
        except Gone:
            return  # the next pass lists again
        except Unreachable:
            self._sleep(min(1.0, seconds))
        finally:
            close: Callable[[], None] | None = getattr(events, "close", None)
            if close is not None:
                close()

    # ------------------------------------------------------------------ cleanup

    def cancel(self, handle: Handle) -> None:
        """One quick DELETE of the anchor (Foreground): everything of the run follows."""
        self._delete_anchor(handle)

    def delete(self, handle: Handle, *, wait: bool = False, timeout: float | None = None) -> None:
        """Delete the anchor; with ``wait``, return once the anchor, Jobs, pods and Service
        are all gone (``WaitTimeout`` after ``timeout`` seconds)."""
        service = handle.name
        with contextlib.suppress(NotFound, IdentityMismatch):
            service = naming.subdomain(self._read(handle).jobset)
        self._delete_anchor(handle)
        if not wait:
            return
        deadline = None if timeout is None else self._clock() + timeout
        while self._leftovers(handle, service):
            self._remaining(handle, deadline, timeout)
            self._sleep(0.5)

    def _leftovers(self, handle: Handle, service: str) -> list[str]:
        namespace, selector = handle.namespace, job_selector(handle.name, handle.uid)
        left: list[str] = []
        try:
            obj = self._client.get_config_map(handle.name, namespace=namespace)
            if (obj.get("metadata") or {}).get("uid") == handle.uid:
                left.append(f"configmap/{handle.name}")
        except NotFound:
            pass
        jobs = self._client.list_jobs(namespace=namespace, label_selector=selector).items
        pods = self._client.list_pods(namespace=namespace, label_selector=selector).items
        left += [f"job/{j['metadata']['name']}" for j in jobs]
        left += [f"pod/{p['metadata']['name']}" for p in pods]
        try:
            svc = self._client.get_service(service, namespace=namespace)
            owners = (svc.get("metadata") or {}).get("ownerReferences") or []
            if any(o.get("uid") == handle.uid for o in owners):
                left.append(f"service/{service}")
        except NotFound:
            pass
        return left

    # ------------------------------------------------------------------ logs and result

    def _pod(self, anchor: Anchor, choice: PodChoice) -> dict[str, Any] | None:
        listed = self._client.list_pods(
            namespace=anchor.namespace, label_selector=pod_selector(anchor, choice)
        )
        return pick_pod(listed.items, choice)

    def _result(self, anchor: Anchor) -> Any:
        choice = default_pod(anchor.jobset)
        pod = None if choice is None else self._pod(anchor, choice)
        return None if pod is None else decode_result(termination_message(pod))

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
        replicated job); waits for the pod to exist first."""
        anchor = self._read(handle)
        choice = default_pod(anchor.jobset, replicated_job, job_index, pod_index)
        if choice is None:
            return
        pod = self._pod(anchor, choice)
        while pod is None or (pod.get("status") or {}).get("phase") == "Pending":
            if not follow and pod is None:
                return
            self._sleep(0.5)
            pod = self._pod(self._read(handle), choice)
        yield from self._client.stream_pod_log(
            pod["metadata"]["name"], namespace=handle.namespace, follow=follow
        )

    def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """The last lines of every failed pod of the run, by pod name."""
        selector = job_selector(handle.name, handle.uid)
        pods = self._client.list_pods(namespace=handle.namespace, label_selector=selector).items
        out: dict[str, str] = {}
        for pod in pods:
            if (pod.get("status") or {}).get("phase") != "Failed":
                continue
            name = pod["metadata"]["name"]
            try:
                out[name] = self._client.read_pod_log(
                    name, namespace=handle.namespace, tail_lines=tail_lines
                )
            except ApiError as err:
                out[name] = f"<log unavailable: {err}>"
        return out


class AsyncNativeBackend:
    """Asynchronous twin of :class:`NativeBackend`: same names, same behaviour.

    Args:
        client: The API client (not closed by the backend).
        poll_interval: Longest quiet time between two passes, in seconds: how soon a change of
            the anchor made elsewhere (suspend, cancel) is noticed while no Job changes.
        ttl_linger: After the run finished, ``wait`` stays up to this many seconds for
            ``ttlSecondsAfterFinished`` to expire and deletes the anchor itself; a longer TTL
            is applied by the next ``wait``/``attach`` after it expired.
        placement: How exclusive placement is rendered (``"affinity"``: no pod webhook needed).
        sleep: Waits between polls (injectable for tests).
        clock: Monotonic seconds (injectable for tests).
    """

    kind: Backend = "native"

    def __init__(
        self,
        client: AsyncJobSetClient,
        *,
        poll_interval: float = 5.0,
        ttl_linger: float = 60.0,
        placement: Placement = "affinity",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._poll = poll_interval
        self._ttl_linger = ttl_linger
        self._placement: Placement = placement
        self._sleep = sleep
        self._clock = clock
        self._services: set[str] = set()

    # ------------------------------------------------------------------ identity

    async def submit(
        self,
        jobset: JobSet,
        *,
        namespace: str,
        identity: Mapping[str, str] | None = None,
        expected_uid: str | None = None,
    ) -> Submission:
        """Create the anchor and start the run, or adopt an existing anchor whose identity
        labels (and UID, when given) match; ``IdentityMismatch`` otherwise."""
        ensure_valid(jobset)
        _check_supported(jobset)
        body = build_anchor(jobset, namespace, identity)
        try:
            obj = await self._client.create_config_map(body, namespace=namespace)
            created = True
        except Conflict:
            name = jobset.name
            obj = await self._client.get_config_map(name, namespace=namespace)
            why = identity_mismatch(obj, identity, expected_uid)
            if why is not None:
                raise IdentityMismatch(_KIND, namespace, name, why) from None
            created = False
        handle = _handle(parse_anchor(obj))
        await self._reconcile(handle, create=True)
        return Submission(handle=handle, created=created, identity=dict(identity or {}))

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach to a run by name (+ UID / identity checks)."""
        obj = await self._client.get_config_map(name, namespace=namespace)
        why = identity_mismatch(obj, identity, uid)
        if why is not None:
            raise IdentityMismatch(_KIND, namespace, name, why)
        return _handle(parse_anchor(obj))

    async def _read(self, handle: Handle) -> Anchor:
        obj = await self._client.get_config_map(handle.name, namespace=handle.namespace)
        return _anchor_of(obj, handle)

    # ------------------------------------------------------------------ status

    async def status(self, handle: Handle) -> Outcome:
        """The status last written to the anchor, as an outcome (result once finished)."""
        anchor = await self._read(handle)
        outcome = outcome_of(anchor)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": await self._result(anchor)})
        return outcome

    async def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """Suspend (``True``) or resume the run: set ``spec.suspend`` on the anchor, then run
        one pass so the Jobs follow at once."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = await self._read(handle)
            if bool(anchor.jobset.spec.suspend) == suspend:
                break
            patch = suspend_patch(anchor, suspend)
            try:
                await self._client.patch_config_map(handle.name, patch, namespace=handle.namespace)
                break
            except Conflict:
                continue
        return outcome_of((await self._reconcile(handle, create=True)).anchor)

    # ------------------------------------------------------------------ reconcile

    async def _reconcile(self, handle: Handle, *, create: bool) -> _Pass:
        for _ in range(_CONFLICT_RETRIES):
            anchor = await self._read(handle)
            if anchor.deleting:
                raise _gone(handle, "is being deleted")
            selector = job_selector(anchor.name, anchor.uid)
            listed = await self._client.list_jobs(
                namespace=handle.namespace, label_selector=selector
            )
            step = plan_pass(anchor, listed.items, _now(), create=create, placement=self._placement)
            if step.plan.problem is not None:
                raise JobSetError(f"JobSet {handle.namespace}/{handle.name}: {step.plan.problem}")
            await self._send(anchor, step)
            if step.status_patch is not None:
                try:
                    obj = await self._client.patch_config_map(
                        handle.name, step.status_patch, namespace=handle.namespace
                    )
                except Conflict:
                    continue  # someone else wrote first: plan again from what they wrote
                anchor = _anchor_of(obj, handle)
            if step.delete_anchor:
                await self._delete_anchor(handle)
            return _Pass(anchor, step, listed.resource_version)
        raise Conflict(409, "Conflict", f"anchor {handle.namespace}/{handle.name} keeps changing")

    async def _send(self, anchor: Anchor, step: NativePass) -> None:
        namespace = anchor.namespace
        for deletion in step.delete_jobs:
            with contextlib.suppress(NotFound, Conflict):  # gone, or a namesake: not ours
                await self._client.delete_job(deletion.name, namespace=namespace, uid=deletion.uid)
        if step.service is not None and anchor.uid not in self._services:
            try:
                await self._client.create_service(step.service, namespace=namespace)
            except Conflict:
                pass
            except ApiError as err:
                raise CreationFailed(
                    namespace, anchor.name, "HeadlessServiceCreationFailed", str(err)
                ) from err
            self._services.add(anchor.uid)
        await self._create_jobs(anchor, step.create_jobs)
        for name in step.suspend_jobs:
            await self._patch_job(name, namespace, True)
        for name in step.resume_jobs:
            await self._patch_job(name, namespace, False)

    async def _create_job(self, anchor: Anchor, job: Mapping[str, Any]) -> None:
        try:
            await self._client.create_job(job, namespace=anchor.namespace)
        except Conflict:
            pass  # created by an earlier pass or another process
        except ApiError as err:
            raise CreationFailed(
                anchor.namespace, anchor.name, "JobCreationFailed", str(err)
            ) from err

    async def _create_jobs(self, anchor: Anchor, jobs: tuple[dict[str, Any], ...]) -> None:
        if len(jobs) <= 1:
            for job in jobs:
                await self._create_job(anchor, job)
            return
        gate = asyncio.Semaphore(MAX_CONCURRENT_CREATES)

        async def create(job: dict[str, Any]) -> None:
            async with gate:
                await self._create_job(anchor, job)

        await asyncio.gather(*(create(job) for job in jobs))

    async def _patch_job(self, name: str, namespace: str, suspend: bool) -> None:
        with contextlib.suppress(NotFound):
            await self._client.patch_job(name, {"spec": {"suspend": suspend}}, namespace=namespace)

    async def _delete_anchor(self, handle: Handle) -> None:
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete_config_map(
                handle.name, namespace=handle.namespace, uid=handle.uid
            )

    # ------------------------------------------------------------------ wait

    async def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Run reconcile passes until the run finishes (or restarts, with
        ``on_restart="return"``); ``WaitTimeout`` when ``timeout`` seconds pass first."""
        deadline = None if timeout is None else self._clock() + timeout
        report = _Reporter(on_progress)
        while True:
            remaining = self._remaining(handle, deadline, timeout)
            try:
                done = await self._reconcile(handle, create=True)
            except Unreachable:
                await self._sleep(min(1.0, remaining or 1.0))
                continue
            restart = done.step.restart
            if restart is not None:
                report(_progress(restarting_outcome(done.anchor, restart), "restarting"))
                if on_restart == "return":
                    done = await self._reconcile(handle, create=False)
                    return restarting_outcome(done.anchor, restart)
            outcome = outcome_of(done.anchor)
            report(_progress(outcome))
            if outcome.phase.terminal and done.step.plan.stage == "Finished":
                if done.step.delete_anchor:
                    report(_progress(outcome, "deleted"))
                elif self._linger(done.step, deadline):
                    await self._sleep(done.step.ttl_remaining or 0.0)
                    continue
                return outcome.model_copy(update={"result": await self._result(done.anchor)})
            if done.step.acted or outcome.phase.terminal:
                continue
            await self._wait_for_change(done, remaining)

    def _remaining(
        self, handle: Handle, deadline: float | None, timeout: float | None
    ) -> float | None:
        if deadline is None or timeout is None:
            return None
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise WaitTimeout(handle.namespace, handle.name, timeout)
        return remaining

    def _linger(self, step: NativePass, deadline: float | None) -> bool:
        left = step.ttl_remaining
        if left is None or left > self._ttl_linger:
            return False
        return deadline is None or self._clock() + left < deadline

    async def _wait_for_change(self, done: _Pass, remaining: float | None) -> None:
        seconds = self._poll if remaining is None else min(self._poll, remaining)
        anchor = done.anchor
        events = self._client.watch_jobs(
            namespace=anchor.namespace,
            resource_version=done.resource_version,
            label_selector=job_selector(anchor.name, anchor.uid),
            timeout_seconds=max(1, int(seconds)),
        )
        try:
            async for event in events:
                if event.type is not EventType.BOOKMARK:
                    return
        except Gone:
            return  # the next pass lists again
        except Unreachable:
            await self._sleep(min(1.0, seconds))
        finally:
            close: Callable[[], Awaitable[None]] | None = getattr(events, "aclose", None)
            if close is not None:
                await close()

    # ------------------------------------------------------------------ cleanup

    async def cancel(self, handle: Handle) -> None:
        """One quick DELETE of the anchor (Foreground): everything of the run follows."""
        await self._delete_anchor(handle)

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = None
    ) -> None:
        """Delete the anchor; with ``wait``, return once the anchor, Jobs, pods and Service
        are all gone (``WaitTimeout`` after ``timeout`` seconds)."""
        service = handle.name
        with contextlib.suppress(NotFound, IdentityMismatch):
            service = naming.subdomain((await self._read(handle)).jobset)
        await self._delete_anchor(handle)
        if not wait:
            return
        deadline = None if timeout is None else self._clock() + timeout
        while await self._leftovers(handle, service):
            self._remaining(handle, deadline, timeout)
            await self._sleep(0.5)

    async def _leftovers(self, handle: Handle, service: str) -> list[str]:
        namespace, selector = handle.namespace, job_selector(handle.name, handle.uid)
        left: list[str] = []
        try:
            obj = await self._client.get_config_map(handle.name, namespace=namespace)
            if (obj.get("metadata") or {}).get("uid") == handle.uid:
                left.append(f"configmap/{handle.name}")
        except NotFound:
            pass
        jobs = (await self._client.list_jobs(namespace=namespace, label_selector=selector)).items
        pods = (await self._client.list_pods(namespace=namespace, label_selector=selector)).items
        left += [f"job/{j['metadata']['name']}" for j in jobs]
        left += [f"pod/{p['metadata']['name']}" for p in pods]
        try:
            svc = await self._client.get_service(service, namespace=namespace)
            owners = (svc.get("metadata") or {}).get("ownerReferences") or []
            if any(o.get("uid") == handle.uid for o in owners):
                left.append(f"service/{service}")
        except NotFound:
            pass
        return left

    # ------------------------------------------------------------------ logs and result

    async def _pod(self, anchor: Anchor, choice: PodChoice) -> dict[str, Any] | None:
        listed = await self._client.list_pods(
            namespace=anchor.namespace, label_selector=pod_selector(anchor, choice)
        )
        return pick_pod(listed.items, choice)

    async def _result(self, anchor: Anchor) -> Any:
        choice = default_pod(anchor.jobset)
        pod = None if choice is None else await self._pod(anchor, choice)
        return None if pod is None else decode_result(termination_message(pod))

    async def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> AsyncIterator[str]:
        """Lines of one pod's log (default: the coordinator, else the first pod of the first
        replicated job); waits for the pod to exist first."""
        anchor = await self._read(handle)
        choice = default_pod(anchor.jobset, replicated_job, job_index, pod_index)
        if choice is None:
            return
        pod = await self._pod(anchor, choice)
        while pod is None or (pod.get("status") or {}).get("phase") == "Pending":
            if not follow and pod is None:
                return
            await self._sleep(0.5)
            pod = await self._pod(await self._read(handle), choice)
        lines = self._client.stream_pod_log(
            pod["metadata"]["name"], namespace=handle.namespace, follow=follow
        )
        async for line in lines:
            yield line

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """The last lines of every failed pod of the run, by pod name."""
        selector = job_selector(handle.name, handle.uid)
        listed = await self._client.list_pods(namespace=handle.namespace, label_selector=selector)
        pods = listed.items
        out: dict[str, str] = {}
        for pod in pods:
            if (pod.get("status") or {}).get("phase") != "Failed":
                continue
            name = pod["metadata"]["name"]
            try:
                out[name] = await self._client.read_pod_log(
                    name, namespace=handle.namespace, tail_lines=tail_lines
                )
            except ApiError as err:
                out[name] = f"<log unavailable: {err}>"
        return out
