"""The ``native`` backend: run a JobSet on a cluster without the JobSet controller.

The backend does the controller's work itself, in the calling process. ``submit`` stores the
JobSet in an anchor ConfigMap (:mod:`._anchor`) and runs the first reconcile pass; ``wait``
keeps running passes (:mod:`._native_exec` over the core planner) whenever a child Job
changes: it creates the headless Service and the Jobs from the core renderer, all owned by the
anchor, applies the success, failure, startup and suspend policies, and writes a status of the
JobSet status shape back to the anchor after every change (compare-and-swap on its
``resourceVersion``). Any process can read that status, and a new process resumes where the
last one stopped. Deleting the anchor removes the run through garbage collection.

Tracking: each pass lists the run's Jobs (label selector ``jobset-name`` + ``jobset-uid``);
between passes a watch from the list's resourceVersion waits for the next Job event (a 410
Gone or a dropped stream just leads to the next pass, which lists again). A pass that changed
something is followed by another at once, like the controller's requeue.

:class:`NativeBackend` (sync) and :class:`AsyncNativeBackend` are textual twins; every
decision is made in the pure modules they share (:mod:`._native_exec`, :mod:`._anchor`,
:mod:`._common`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from jobset_core import labels
from jobset_core.backends import _common as common
from jobset_core.backends._anchor import (
    ANCHOR_KIND,
    Anchor,
    build_anchor,
    not_an_anchor,
    parse_anchor,
    suspend_patch,
)
from jobset_core.backends._base import Handle, OnRestart, ProgressCallback, Submission
from jobset_core.backends._native_exec import NativePass, foreign_job, plan_pass
from jobset_core.backends._pods import AsyncPodAccess, PodAccess
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
    ServerError,
    SpecError,
    TooManyRequests,
    WaitTimeout,
)
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome, Phase, Progress
from jobset_core.render import Placement
from jobset_core.validation import ensure_valid

__all__ = ["MAX_CONCURRENT_CREATES", "AsyncNativeBackend", "NativeBackend"]

#: Upstream's ``maxParallelism``: Jobs created at the same time.
MAX_CONCURRENT_CREATES = 50
#: Server-side length of one watch between passes, in seconds: the longest time a change of
#: the anchor made elsewhere (suspend, cancel) goes unnoticed while no Job changes.
WATCH_WINDOW = 10
_CONFLICT_RETRIES = 10
_TRANSIENT = (Unreachable, ServerError, TooManyRequests)


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


def _adoption_problem(
    obj: Mapping[str, Any],
    namespace: str,
    name: str,
    marks: Mapping[str, str],
    uid: str | None,
) -> IdentityMismatch | None:
    why = not_an_anchor(obj)
    if why is not None:
        return IdentityMismatch(ANCHOR_KIND, namespace, name, why)
    meta = obj.get("metadata") or {}
    return common.adoption_problem(
        kind=ANCHOR_KIND,
        namespace=namespace,
        name=name,
        labels=meta.get("labels"),
        uid=meta.get("uid"),
        expected_labels=marks,
        expected_uid=uid,
    )


def _gone(handle: Handle) -> NotFound:
    return NotFound(
        404, "NotFound", f"JobSet {handle.namespace}/{handle.name} (uid {handle.uid}) is gone"
    )


def _anchor_of(obj: Mapping[str, Any], handle: Handle) -> Anchor:
    """The handle's anchor; a namesake (another UID) means the run is gone."""
    meta = obj.get("metadata") or {}
    why = not_an_anchor(obj)
    if why is not None:
        raise IdentityMismatch(ANCHOR_KIND, handle.namespace, handle.name, why)
    if handle.uid and meta.get("uid") != handle.uid:
        raise _gone(handle)
    return parse_anchor(obj)


def _creation_progress(error: CreationFailed, restarts: int) -> Progress:
    return Progress(
        kind="creation-failed",
        phase=Phase.PENDING,
        restarts=restarts,
        reason=error.reason,
        message=error.message,
    )


def _handle(anchor: Anchor) -> Handle:
    return Handle(name=anchor.name, namespace=anchor.namespace, uid=anchor.uid, backend="native")


def _failed_job(listed: list[dict[str, Any]], name: str) -> str:
    job = next((j for j in listed if (j.get("metadata") or {}).get("name") == name), None)
    return common.job_failure(job) if job is not None else ""


@dataclass(frozen=True)
class _Pass:
    """One sent pass: the anchor after it, the pass, the Jobs it saw and where to watch on."""

    anchor: Anchor
    step: NativePass
    jobs: list[dict[str, Any]]
    resource_version: str

    @property
    def finished(self) -> bool:
        """The run is terminal and this pass already cleaned up after it (upstream's
        ``Finished`` stage: unfinished Jobs deleted, TTL applied)."""
        return self.step.plan.stage == "Finished"

    def restart_outcome(self, before: _Pass) -> Outcome:
        """The ``on_restart="return"`` outcome; ``before`` is the pass that decided it."""
        decision = before.step.restart
        job = decision.failed_job.name if decision is not None else ""
        outcome = common.build_outcome(self.anchor.jobset, "native")
        return common.restart_details(outcome, self.anchor.jobset, _failed_job(before.jobs, job))


class NativeBackend:
    """Runs JobSets without the JobSet controller (synchronous).

    Args:
        client: The API client (not closed by the backend).
        validate: Check every JobSet with :func:`~jobset_core.validation.validate` before
            creating anything.
        feature_gates: The feature gates validation assumes.
        poll_interval: Seconds between checks while waiting for deletion or a log pod.
        watch_window: Server-side length of one watch between passes, in seconds.
        ttl_linger: After the run finished, ``wait`` stays up to this many seconds for
            ``ttlSecondsAfterFinished`` to expire and then deletes the anchor; a longer TTL is
            applied by the first ``wait`` after it expired (no process, no TTL).
        placement: How exclusive placement is rendered; ``"affinity"`` needs no pod webhook.
    """

    kind: Backend = "native"

    def __init__(
        self,
        client: JobSetClient,
        *,
        validate: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        poll_interval: float = 0.5,
        watch_window: int = WATCH_WINDOW,
        ttl_linger: float = 60.0,
        placement: Placement = "affinity",
    ) -> None:
        self._client = client
        self._validate = validate
        self._gates = dict(feature_gates or {})
        self._window = watch_window
        self._access = PodAccess(client, read_jobset=self._jobset, poll_interval=poll_interval)
        self._ttl_linger = ttl_linger
        self._placement: Placement = placement
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
        """Validate, create the anchor and run the first pass (Service and Jobs); or adopt
        the existing anchor when its identity labels (and UID, when given) match (the run
        then moves on in :meth:`wait`).

        Raises:
            SpecError: the JobSet is invalid, or uses what the native backend cannot do.
            IdentityMismatch: an object of that name exists but is not this run's anchor.
        """
        named, marks = common.stamp_identity(jobset, namespace, identity)
        if self._validate:
            ensure_valid(named, feature_gates=self._gates)
        _check_supported(named)
        try:
            obj = self._client.create_config_map(
                build_anchor(named, namespace, marks), namespace=namespace
            )
            created = True
        except Conflict:
            obj = self._client.get_config_map(named.name, namespace=namespace)
            problem = _adoption_problem(obj, namespace, named.name, marks, expected_uid)
            if problem is not None:
                raise problem from None
            created = False
        handle = _handle(parse_anchor(obj))
        if created:  # an adopted run moves on in wait(), where a restart can be handed back
            # A cancel meanwhile or a child that cannot be created is reported by wait(), as
            # the controller backend does.
            with contextlib.suppress(NotFound, CreationFailed):
                self._reconcile(handle, create=True)
        return Submission(handle, created=created, identity=marks)

    def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach by name; with ``uid`` or ``identity`` the anchor must match them."""
        obj = self._client.get_config_map(name, namespace=namespace)
        why = not_an_anchor(obj)
        if why is not None:
            raise IdentityMismatch(ANCHOR_KIND, namespace, name, why)
        if uid or identity:
            marks = common.identity_labels(identity)
            problem = _adoption_problem(obj, namespace, name, marks, uid)
            if problem is not None:
                raise problem
        return _handle(parse_anchor(obj))

    # ------------------------------------------------------------------ state

    def _read(self, handle: Handle) -> Anchor:
        try:
            obj = self._client.get_config_map(handle.name, namespace=handle.namespace)
        except NotFound:
            raise _gone(handle) from None
        return _anchor_of(obj, handle)

    def _jobset(self, handle: Handle) -> JobSet:
        return self._read(handle).jobset

    def status(self, handle: Handle) -> Outcome:
        """The status last written to the anchor; a finished run carries its result."""
        anchor = self._read(handle)
        outcome = common.build_outcome(anchor.jobset, self.kind)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": self._result(anchor)})
        return outcome

    def jobset_status(self, handle: Handle) -> JobSetStatus:
        """The JobSet-shaped status kept on the anchor."""
        return self._read(handle).status

    def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """Suspend (``True``) or resume the run: set ``spec.suspend`` on the anchor, then run
        one pass so the Jobs follow at once (a waiting process follows too)."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = self._read(handle)
            if bool(anchor.jobset.spec.suspend) == suspend:
                break
            patch = suspend_patch(anchor, suspend)
            with contextlib.suppress(Conflict):
                self._client.patch_config_map(handle.name, patch, namespace=handle.namespace)
                break
        return common.build_outcome(self._reconcile(handle, create=True).anchor.jobset, self.kind)

    # ------------------------------------------------------------------ reconcile

    def _reconcile(self, handle: Handle, *, create: bool) -> _Pass:
        """One pass: read the anchor and its Jobs, plan, send; again when the status write
        loses a race (someone else wrote first: plan again from what they wrote)."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = self._read(handle)
            if anchor.deleting:
                raise _gone(handle)
            selector = common.jobset_selector(anchor.name, anchor.uid)
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
                    continue
                anchor = _anchor_of(obj, handle)
            if step.delete_anchor:
                self.cancel(handle)
            return _Pass(anchor, step, listed.items, listed.resource_version)
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
                pass  # exists: upstream uses any Service of that name too
            except ApiError as err:
                why = "HeadlessServiceCreationFailed"
                raise CreationFailed(namespace, anchor.name, why, str(err)) from err
            self._services.add(anchor.uid)
        self._create_jobs(anchor, step.create_jobs)
        for name in step.suspend_jobs:
            self._patch_job(name, namespace, True)
        for name in step.resume_jobs:
            self._patch_job(name, namespace, False)

    def _create_job(self, anchor: Anchor, job: Mapping[str, Any]) -> None:
        name, why = job["metadata"]["name"], "JobCreationFailed"
        try:
            self._client.create_job(job, namespace=anchor.namespace)
        except Conflict:  # ours from an earlier pass or process; else it never goes away
            with contextlib.suppress(NotFound):
                existing = self._client.get_job(name, namespace=anchor.namespace)
                problem = foreign_job(anchor, existing)
                if problem is not None:
                    raise CreationFailed(anchor.namespace, anchor.name, why, problem) from None
        except ApiError as err:
            raise CreationFailed(anchor.namespace, anchor.name, why, str(err)) from err

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

    # ------------------------------------------------------------------ wait

    def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Run reconcile passes until the run is ``Completed``/``Failed``. With
        ``on_restart="return"``, a restart decided by this wait is recorded (counters bumped,
        the attempt's Jobs deleted) and returned as a ``Restarting`` outcome; the next
        ``wait``, from any process, creates the next attempt.

        Raises:
            WaitTimeout: ``timeout`` seconds passed first (the run stays as it is).
            CreationFailed: a child object cannot be created.
            NotFound: the run was deleted before it finished.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        tracker = common.WaitTracker(self.kind)
        failures = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0)
            try:
                done = self._reconcile(handle, create=True)
                failures = 0
            except _TRANSIENT:
                failures += 1
                time.sleep(min(5.0, 0.5 * 2**failures))
                continue
            except CreationFailed as failure:
                if on_progress is not None:
                    on_progress(_creation_progress(failure, tracker.baseline_restarts or 0))
                raise
            step = tracker.observe(done.anchor.jobset)
            if step.progress is not None and on_progress is not None:
                on_progress(step.progress)
            if done.step.restart is not None and on_restart == "return":
                return self._reconcile(handle, create=False).restart_outcome(done)
            if done.finished:
                linger = self._linger(done.step, remaining)
                if linger is not None:
                    time.sleep(linger)
                    continue
                return step.outcome.model_copy(update={"result": self._result(done.anchor)})
            if not (done.step.acted or step.outcome.phase.terminal):
                self._wait_for_change(done, remaining)

    def _linger(self, step: NativePass, remaining: float | None) -> float | None:
        """How long to stay for the TTL to expire (``None``: do not stay)."""
        left = step.ttl_remaining
        if left is None or left > self._ttl_linger:
            return None
        return left if remaining is None or left < remaining else None

    def _wait_for_change(self, done: _Pass, remaining: float | None) -> None:
        """Block until a Job of the run changes (or the watch window ends)."""
        window = self._window if remaining is None else min(self._window, remaining)
        anchor = done.anchor
        events = self._client.watch_jobs(
            namespace=anchor.namespace,
            resource_version=done.resource_version,
            label_selector=common.jobset_selector(anchor.name, anchor.uid),
            timeout_seconds=max(1, int(window)),
        )
        try:
            for event in events:
                if event.type is not EventType.BOOKMARK:
                    return
        except Gone:
            return  # the next pass lists again
        except _TRANSIENT:
            time.sleep(min(1.0, window))
        finally:
            close: Callable[[], None] | None = getattr(events, "close", None)
            if close is not None:
                close()

    # ------------------------------------------------------------------ cleanup

    def cancel(self, handle: Handle) -> None:
        """One DELETE of the anchor (Foreground, UID precondition): everything of the run
        follows by garbage collection. Already gone is fine."""
        with contextlib.suppress(NotFound, Conflict):
            self._client.delete_config_map(
                handle.name, namespace=handle.namespace, propagation="Foreground", uid=handle.uid
            )

    def delete(self, handle: Handle, *, wait: bool = False, timeout: float | None = None) -> None:
        """Delete the anchor (Foreground); with ``wait``, until it, its Jobs, pods and
        Service are gone.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        self.cancel(handle)
        if wait:
            self._access.wait_gone(handle, self._leftovers, timeout)

    def _leftovers(self, handle: Handle) -> list[str]:
        ns, selector = handle.namespace, {labels.JOBSET_NAME: handle.name}
        by_name = {"metadata.name": handle.name}
        anchors = self._client.list_config_maps(namespace=ns, field_selector=by_name).items
        left = [
            f"configmap/{handle.name}"
            for obj in anchors
            if (obj.get("metadata") or {}).get("uid") == handle.uid
        ]
        return left + common.leftovers(
            handle.uid,
            jobs=self._client.list_jobs(namespace=ns, label_selector=selector).items,
            pods=self._client.list_pods(namespace=ns, label_selector=selector).items,
            services=self._client.list_services(namespace=ns).items,
        )

    # ------------------------------------------------------------------ logs and result

    def _result(self, anchor: Anchor) -> Any:
        return self._access.result(_handle(anchor), anchor.jobset)

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


class AsyncNativeBackend:
    """Runs JobSets without the JobSet controller (asynchronous twin of
    :class:`NativeBackend`: same names, same behaviour).

    Args:
        client: The API client (not closed by the backend).
        validate: Check every JobSet with :func:`~jobset_core.validation.validate` before
            creating anything.
        feature_gates: The feature gates validation assumes.
        poll_interval: Seconds between checks while waiting for deletion or a log pod.
        watch_window: Server-side length of one watch between passes, in seconds.
        ttl_linger: After the run finished, ``wait`` stays up to this many seconds for
            ``ttlSecondsAfterFinished`` to expire and then deletes the anchor; a longer TTL is
            applied by the first ``wait`` after it expired (no process, no TTL).
        placement: How exclusive placement is rendered; ``"affinity"`` needs no pod webhook.
    """

    kind: Backend = "native"

    def __init__(
        self,
        client: AsyncJobSetClient,
        *,
        validate: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        poll_interval: float = 0.5,
        watch_window: int = WATCH_WINDOW,
        ttl_linger: float = 60.0,
        placement: Placement = "affinity",
    ) -> None:
        self._client = client
        self._validate = validate
        self._gates = dict(feature_gates or {})
        self._window = watch_window
        self._access = AsyncPodAccess(client, read_jobset=self._jobset, poll_interval=poll_interval)
        self._ttl_linger = ttl_linger
        self._placement: Placement = placement
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
        """Validate, create the anchor and run the first pass (Service and Jobs); or adopt
        the existing anchor when its identity labels (and UID, when given) match (the run
        then moves on in :meth:`wait`).

        Raises:
            SpecError: the JobSet is invalid, or uses what the native backend cannot do.
            IdentityMismatch: an object of that name exists but is not this run's anchor.
        """
        named, marks = common.stamp_identity(jobset, namespace, identity)
        if self._validate:
            ensure_valid(named, feature_gates=self._gates)
        _check_supported(named)
        try:
            obj = await self._client.create_config_map(
                build_anchor(named, namespace, marks), namespace=namespace
            )
            created = True
        except Conflict:
            obj = await self._client.get_config_map(named.name, namespace=namespace)
            problem = _adoption_problem(obj, namespace, named.name, marks, expected_uid)
            if problem is not None:
                raise problem from None
            created = False
        handle = _handle(parse_anchor(obj))
        if created:  # an adopted run moves on in wait(), where a restart can be handed back
            # A cancel meanwhile or a child that cannot be created is reported by wait(), as
            # the controller backend does.
            with contextlib.suppress(NotFound, CreationFailed):
                await self._reconcile(handle, create=True)
        return Submission(handle, created=created, identity=marks)

    async def attach(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        identity: Mapping[str, str] | None = None,
    ) -> Handle:
        """Reattach by name; with ``uid`` or ``identity`` the anchor must match them."""
        obj = await self._client.get_config_map(name, namespace=namespace)
        why = not_an_anchor(obj)
        if why is not None:
            raise IdentityMismatch(ANCHOR_KIND, namespace, name, why)
        if uid or identity:
            marks = common.identity_labels(identity)
            problem = _adoption_problem(obj, namespace, name, marks, uid)
            if problem is not None:
                raise problem
        return _handle(parse_anchor(obj))

    # ------------------------------------------------------------------ state

    async def _read(self, handle: Handle) -> Anchor:
        try:
            obj = await self._client.get_config_map(handle.name, namespace=handle.namespace)
        except NotFound:
            raise _gone(handle) from None
        return _anchor_of(obj, handle)

    async def _jobset(self, handle: Handle) -> JobSet:
        return (await self._read(handle)).jobset

    async def status(self, handle: Handle) -> Outcome:
        """The status last written to the anchor; a finished run carries its result."""
        anchor = await self._read(handle)
        outcome = common.build_outcome(anchor.jobset, self.kind)
        if outcome.phase.terminal:
            outcome = outcome.model_copy(update={"result": await self._result(anchor)})
        return outcome

    async def jobset_status(self, handle: Handle) -> JobSetStatus:
        """The JobSet-shaped status kept on the anchor."""
        return (await self._read(handle)).status

    async def set_suspend(self, handle: Handle, suspend: bool) -> Outcome:
        """Suspend (``True``) or resume the run: set ``spec.suspend`` on the anchor, then run
        one pass so the Jobs follow at once (a waiting process follows too)."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = await self._read(handle)
            if bool(anchor.jobset.spec.suspend) == suspend:
                break
            patch = suspend_patch(anchor, suspend)
            with contextlib.suppress(Conflict):
                await self._client.patch_config_map(handle.name, patch, namespace=handle.namespace)
                break
        return common.build_outcome(
            (await self._reconcile(handle, create=True)).anchor.jobset, self.kind
        )

    # ------------------------------------------------------------------ reconcile

    async def _reconcile(self, handle: Handle, *, create: bool) -> _Pass:
        """One pass: read the anchor and its Jobs, plan, send; again when the status write
        loses a race (someone else wrote first: plan again from what they wrote)."""
        for _ in range(_CONFLICT_RETRIES):
            anchor = await self._read(handle)
            if anchor.deleting:
                raise _gone(handle)
            selector = common.jobset_selector(anchor.name, anchor.uid)
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
                    continue
                anchor = _anchor_of(obj, handle)
            if step.delete_anchor:
                await self.cancel(handle)
            return _Pass(anchor, step, listed.items, listed.resource_version)
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
                pass  # exists: upstream uses any Service of that name too
            except ApiError as err:
                why = "HeadlessServiceCreationFailed"
                raise CreationFailed(namespace, anchor.name, why, str(err)) from err
            self._services.add(anchor.uid)
        await self._create_jobs(anchor, step.create_jobs)
        for name in step.suspend_jobs:
            await self._patch_job(name, namespace, True)
        for name in step.resume_jobs:
            await self._patch_job(name, namespace, False)

    async def _create_job(self, anchor: Anchor, job: Mapping[str, Any]) -> None:
        name, why = job["metadata"]["name"], "JobCreationFailed"
        try:
            await self._client.create_job(job, namespace=anchor.namespace)
        except Conflict:  # ours from an earlier pass or process; else it never goes away
            with contextlib.suppress(NotFound):
                existing = await self._client.get_job(name, namespace=anchor.namespace)
                problem = foreign_job(anchor, existing)
                if problem is not None:
                    raise CreationFailed(anchor.namespace, anchor.name, why, problem) from None
        except ApiError as err:
            raise CreationFailed(anchor.namespace, anchor.name, why, str(err)) from err

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

    # ------------------------------------------------------------------ wait

    async def wait(
        self,
        handle: Handle,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_restart: OnRestart = "continue",
    ) -> Outcome:
        """Run reconcile passes until the run is ``Completed``/``Failed``. With
        ``on_restart="return"``, a restart decided by this wait is recorded (counters bumped,
        the attempt's Jobs deleted) and returned as a ``Restarting`` outcome; the next
        ``wait``, from any process, creates the next attempt.

        Raises:
            WaitTimeout: ``timeout`` seconds passed first (the run stays as it is).
            CreationFailed: a child object cannot be created.
            NotFound: the run was deleted before it finished.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        tracker = common.WaitTracker(self.kind)
        failures = 0
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(handle.namespace, handle.name, timeout or 0.0)
            try:
                done = await self._reconcile(handle, create=True)
                failures = 0
            except _TRANSIENT:
                failures += 1
                await asyncio.sleep(min(5.0, 0.5 * 2**failures))
                continue
            except CreationFailed as failure:
                if on_progress is not None:
                    on_progress(_creation_progress(failure, tracker.baseline_restarts or 0))
                raise
            step = tracker.observe(done.anchor.jobset)
            if step.progress is not None and on_progress is not None:
                on_progress(step.progress)
            if done.step.restart is not None and on_restart == "return":
                return (await self._reconcile(handle, create=False)).restart_outcome(done)
            if done.finished:
                linger = self._linger(done.step, remaining)
                if linger is not None:
                    await asyncio.sleep(linger)
                    continue
                return step.outcome.model_copy(update={"result": await self._result(done.anchor)})
            if not (done.step.acted or step.outcome.phase.terminal):
                await self._wait_for_change(done, remaining)

    def _linger(self, step: NativePass, remaining: float | None) -> float | None:
        """How long to stay for the TTL to expire (``None``: do not stay)."""
        left = step.ttl_remaining
        if left is None or left > self._ttl_linger:
            return None
        return left if remaining is None or left < remaining else None

    async def _wait_for_change(self, done: _Pass, remaining: float | None) -> None:
        """Block until a Job of the run changes (or the watch window ends)."""
        window = self._window if remaining is None else min(self._window, remaining)
        anchor = done.anchor
        events = self._client.watch_jobs(
            namespace=anchor.namespace,
            resource_version=done.resource_version,
            label_selector=common.jobset_selector(anchor.name, anchor.uid),
            timeout_seconds=max(1, int(window)),
        )
        try:
            async for event in events:
                if event.type is not EventType.BOOKMARK:
                    return
        except Gone:
            return  # the next pass lists again
        except _TRANSIENT:
            await asyncio.sleep(min(1.0, window))
        finally:
            close: Callable[[], Awaitable[None]] | None = getattr(events, "aclose", None)
            if close is not None:
                await close()

    # ------------------------------------------------------------------ cleanup

    async def cancel(self, handle: Handle) -> None:
        """One DELETE of the anchor (Foreground, UID precondition): everything of the run
        follows by garbage collection. Already gone is fine."""
        with contextlib.suppress(NotFound, Conflict):
            await self._client.delete_config_map(
                handle.name, namespace=handle.namespace, propagation="Foreground", uid=handle.uid
            )

    async def delete(
        self, handle: Handle, *, wait: bool = False, timeout: float | None = None
    ) -> None:
        """Delete the anchor (Foreground); with ``wait``, until it, its Jobs, pods and
        Service are gone.

        Raises:
            WaitTimeout: something was still there after ``timeout`` seconds.
        """
        await self.cancel(handle)
        if wait:
            await self._access.wait_gone(handle, self._leftovers, timeout)

    async def _leftovers(self, handle: Handle) -> list[str]:
        ns, selector = handle.namespace, {labels.JOBSET_NAME: handle.name}
        by_name = {"metadata.name": handle.name}
        anchors = (await self._client.list_config_maps(namespace=ns, field_selector=by_name)).items
        left = [
            f"configmap/{handle.name}"
            for obj in anchors
            if (obj.get("metadata") or {}).get("uid") == handle.uid
        ]
        return left + common.leftovers(
            handle.uid,
            jobs=(await self._client.list_jobs(namespace=ns, label_selector=selector)).items,
            pods=(await self._client.list_pods(namespace=ns, label_selector=selector)).items,
            services=(await self._client.list_services(namespace=ns)).items,
        )

    # ------------------------------------------------------------------ logs and result

    async def _result(self, anchor: Anchor) -> Any:
        return await self._access.result(_handle(anchor), anchor.jobset)

    async def stream_logs(
        self,
        handle: Handle,
        *,
        replicated_job: str | None = None,
        job_index: int = 0,
        pod_index: int = 0,
        follow: bool = True,
    ) -> AsyncIterator[str]:
        """Lines of one pod's first container (default: the coordinator, else pod 0 of job 0
        of the first replicated job). With ``follow``, waits for the pod to start.

        Raises:
            NotFound: no such pod (without ``follow``).
        """
        async for line in self._access.stream_logs(
            handle,
            replicated_job=replicated_job,
            job_index=job_index,
            pod_index=pod_index,
            follow=follow,
        ):
            yield line

    async def failed_pod_logs(self, handle: Handle, *, tail_lines: int = 50) -> dict[str, str]:
        """The last ``tail_lines`` lines of every failed pod's first container, by pod name."""
        return await self._access.failed_pod_logs(handle, tail_lines=tail_lines)
