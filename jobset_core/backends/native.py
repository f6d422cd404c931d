"""The ``native`` backend: run a JobSet on a cluster without the JobSet controller.

The backend does the controller's work itself, in whichever process waits for the run.
``submit`` stores the JobSet in an anchor ConfigMap (:mod:`._anchor`) and runs the first
reconcile pass; every waiter then drives the run with :meth:`NativeBackend.drive`: one pass
(:mod:`._native_exec` over the core planner) whenever the observer shows a change of the
anchor or of a child Job. A pass creates the headless Service and the Jobs from the core
renderer, all owned by the anchor, applies the success, failure, startup and suspend policies,
and writes a status of the JobSet status shape back to the anchor (compare-and-swap on its
``resourceVersion``). Any process can read that status, and a new process resumes where the
last one stopped. Deleting the anchor removes the run through garbage collection.

A status that completes the run as every waiter would complete it (every Job of the attempt
complete: :func:`._native_exec.settled`) needs no race judged: the pass hands the anchor as it
will read to the observer at once, so the verdict comes without waiting for the write, and
the write goes on after it (:meth:`NativeBackend.flush` waits for it; a session does before
it closes).

Passes plan from what the observer holds, not from a fresh list: what a pass writes (created
Jobs, the new anchor) is handed back to the observer at once, a create that finds its Job
already there is fine (Jobs are named deterministically), a deletion carries the Job's UID and
a status write the anchor's ``resourceVersion``, so a stale view can never do harm; it only
costs one more pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobset_core import labels
from jobset_core.backends._anchor import (
    Anchor,
    build_anchor,
    not_an_anchor,
    parse_anchor,
    read_anchor,
    suspend_patch,
    with_patch,
)
from jobset_core.backends._base import Handle, Pass, Remember, Submission
from jobset_core.backends._native_exec import (
    NativePass,
    foreign_job,
    going,
    plan_pass,
    service_going,
)
from jobset_core.backends._run_object import RunObjectBackend
from jobset_core.client import render_selector
from jobset_core.errors import (
    ApiError,
    Conflict,
    JobSetError,
    NotFound,
    Problem,
    ServerError,
    SpecError,
    TooManyRequests,
    Unreachable,
)
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.observe import Kind, Observation, Target, backoff
from jobset_core.outcome import Backend
from jobset_core.policy import outcome as rules
from jobset_core.render import Placement, Probe, check_job_count, child_probes
from jobset_core.resources import CONFIG_MAP, JOB, SERVICE

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["MAX_CONCURRENT_CREATES", "NativeBackend"]

log = logging.getLogger(__name__)

#: Upstream's ``maxParallelism``: Jobs created at the same time.
MAX_CONCURRENT_CREATES = 50
_CONFLICT_RETRIES = 10
#: Anchors whose Service a backend remembers having (see ``NativeBackend._services``).
SERVICES_KEPT = 4096
#: Tries of a settled status write when the API server is away (about 15 s of backoff).
_WRITE_TRIES = 6
_TRANSIENT = (Unreachable, ServerError, TooManyRequests)
#: The settled status writes still going, of every backend: a caller cancelled after its
#: verdict (a triggerer's trigger) leaves them running, not collected.
_WRITING: set[asyncio.Task[None]] = set()


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class _CannotCreate(Exception):
    """A child object cannot be created: ``(reason, message)``."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason, self.message = reason, message
        super().__init__(f"{reason}: {message}")


class NativeBackend(RunObjectBackend):
    """Runs JobSets without the JobSet controller.

    Args:
        client: The API client (not closed by the backend).
        placement: How exclusive placement is rendered; ``"affinity"`` needs no pod webhook.
        ttl_linger: After the run finished, a waiter stays up to this many seconds for
            ``ttlSecondsAfterFinished`` to expire and then deletes the anchor; a longer TTL is
            applied by the first waiter after it expired (no process, no TTL).
    """

    kind: Backend = "native"
    resource = CONFIG_MAP

    def __init__(
        self,
        client: Client,
        *,
        placement: Placement = "affinity",
        ttl_linger: float = 60.0,
    ) -> None:
        super().__init__(client)
        self._placement: Placement = placement
        self._ttl_linger = ttl_linger
        #: The anchors (by UID) whose Service this backend made or found: the newest
        #: :data:`SERVICES_KEPT` (a triggerer's runs share one backend; one that is
        #: forgotten costs a create that finds it, and a read).
        self._services: dict[str, None] = {}
        self._writes: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ the run object

    def _body(self, named: JobSet, namespace: str, marks: Mapping[str, str]) -> Any:
        return build_anchor(named, namespace, marks)

    def _children(self, jobset: JobSet, namespace: str) -> list[Probe]:
        return child_probes(jobset, namespace, placement=self._placement, service=True)

    def _check_supported(self, named: JobSet) -> None:
        check_job_count(named)  # it renders every child Job itself: refuse before the anchor
        if named.spec.volume_claim_policies:
            problem = Problem(
                "spec.volumeClaimPolicies",
                "the native backend does not create volume claims; use the controller backend",
                "native-unsupported",
            )
            raise SpecError([problem])

    def _not_ours(self, obj: Mapping[str, Any]) -> str | None:
        return not_an_anchor(obj)

    def _selector(self, label_selector: Any) -> Any:
        marker = f"{labels.ANCHOR_LABEL}={labels.ANCHOR_VALUE}"
        rendered = render_selector(label_selector)
        return f"{rendered},{marker}" if rendered else marker

    def _submission(
        self, obj: Mapping[str, Any], *, created: bool, marks: Mapping[str, str]
    ) -> Submission:
        anchor = parse_anchor(obj)
        handle = Handle(anchor.name, anchor.namespace, anchor.uid, self.kind)
        outcome = rules.build_outcome(anchor.jobset, self.kind)
        return Submission(handle, created, outcome, dict(marks), obj)

    def target(self, handle: Handle, *, since: str | None = None, seeds: Any = ()) -> Target:
        """Track the anchor, the Jobs, the pods and the Warning Events of the run."""
        return Target("native", handle.namespace, handle.name, since, tuple(seeds), handle.uid)

    def status_of(self, observation: Observation) -> JobSetStatus:
        """The JobSet-shaped status kept on the anchor."""
        anchor = observation.anchor
        return parse_anchor(anchor).status if anchor is not None else JobSetStatus()

    # ------------------------------------------------------------------ driving

    async def drive(
        self, handle: Handle, observation: Observation, *, create: bool, remember: Remember
    ) -> Pass:
        """One reconcile pass from what the observer holds.

        Args:
            handle: The run.
            observation: The run as observed (its anchor and Jobs).
            create: Create the Service and missing Jobs; ``False`` stops after deletions and
                the status write (a restart handed back to the caller).
            remember: Where what the pass writes is handed back to the observer.

        Raises:
            JobSetError: the planner refused the run (upstream stops reconciling it too).
        """
        found = observation.anchor
        if found is None or not observation.synced:
            return Pass()
        anchor = read_anchor(found)  # the judge reads the same object next
        if (handle.uid and anchor.uid != handle.uid) or anchor.deleting:
            return Pass()  # gone or going: the judge says so
        step = plan_pass(anchor, observation.jobs, _now(), create=create, placement=self._placement)
        if step.plan.problem is not None:
            raise JobSetError(f"JobSet {handle.namespace}/{handle.name}: {step.plan.problem}")
        try:
            blocked = await self._send(anchor, step, remember)
        except _CannotCreate as failed:
            return Pass(failure=(failed.reason, failed.message))
        if step.status_patch is not None and step.settled:
            self._write_settled(handle, found, step.status_patch, observation.jobs, remember)
            return Pass(acted=True)  # the next pass plans from the status as written
        if step.status_patch is not None:
            try:
                written = await self._client.patch(
                    CONFIG_MAP, handle.name, step.status_patch, namespace=handle.namespace
                )
            except Conflict:  # someone wrote first: plan again from what they wrote
                fresh = await self._client.get(CONFIG_MAP, handle.name, namespace=handle.namespace)
                remember(Kind.ANCHOR, fresh)
                return Pass(acted=True)
            remember(Kind.ANCHOR, written)
        if step.delete_anchor:
            await self.cancel(handle)
            return Pass(acted=True, finished=True, deleted=True)
        return Pass(
            acted=step.acted and not blocked,
            blocked=blocked,
            restarted=step.restart is not None,
            finished=step.plan.stage == "Finished",
            linger=self._linger(step),
        )

    def _write_settled(
        self,
        handle: Handle,
        found: Mapping[str, Any],
        patch: Mapping[str, Any],
        jobs: Any,
        remember: Remember,
    ) -> None:
        """Hand the anchor as the settled status makes it to the observer, and write it."""
        remember(Kind.ANCHOR, with_patch(found, patch))
        task = asyncio.ensure_future(self._write(handle, patch, tuple(jobs), remember))
        for held in (_WRITING, self._writes):
            held.add(task)
            task.add_done_callback(held.discard)

    async def _write(
        self,
        handle: Handle,
        patch: Mapping[str, Any],
        jobs: tuple[Mapping[str, Any], ...],
        remember: Remember,
    ) -> None:
        """Write a settled status: over a newer anchor (someone wrote first), plan again from
        it and the same Jobs (all complete: the same end), until the anchor holds it."""
        name, namespace, failures = handle.name, handle.namespace, 0
        try:
            for _ in range(_CONFLICT_RETRIES + _WRITE_TRIES):
                try:
                    written = await self._client.patch(CONFIG_MAP, name, patch, namespace=namespace)
                except Conflict:
                    fresh = await self._client.get(CONFIG_MAP, name, namespace=namespace)
                    anchor = parse_anchor(fresh)
                    if (handle.uid and anchor.uid != handle.uid) or anchor.deleting:
                        return  # gone or going: nothing to record
                    again = plan_pass(anchor, jobs, _now(), create=False)
                    if again.status_patch is None or not again.settled:
                        # it holds the end already, or an attempt after these Jobs' (not
                        # this write's to record)
                        remember(Kind.ANCHOR, fresh)
                        return
                    patch = again.status_patch
                    continue
                except _TRANSIENT:
                    failures += 1
                    if failures >= _WRITE_TRIES:
                        raise
                    await asyncio.sleep(backoff(failures, random.random()))
                    continue
                remember(Kind.ANCHOR, written)
                return
            raise Conflict(409, "Conflict", f"anchor {namespace}/{name} keeps changing")
        except NotFound:
            return  # deleted meanwhile (its delete policy, a user): nothing to record
        except JobSetError as err:
            log.warning(
                "the end of JobSet %s/%s (native) is not recorded on its anchor yet: %s; "
                "the next pass of any waiter records it",
                namespace,
                name,
                err,
            )

    @property
    def writing(self) -> bool:
        """Whether a settled status write this backend started is still on its way."""
        return bool(self._writes)

    async def flush(self) -> None:
        """Wait until the settled status writes this backend started are done (a
        cancelled wait leaves them going); raise what one of them raised."""
        while self._writes:
            done, _ = await asyncio.wait(self._writes)
            for task in done:
                if not task.cancelled() and (error := task.exception()) is not None:
                    raise error

    def _linger(self, step: NativePass) -> float | None:
        left = step.ttl_remaining
        return left if left is not None and left <= self._ttl_linger else None

    async def _send(self, anchor: Anchor, step: NativePass, remember: Remember) -> bool:
        """Send the pass; whether a creation met a namesake still going (:func:`going`)."""
        namespace = anchor.namespace
        for deletion in step.delete_jobs:
            with contextlib.suppress(NotFound, Conflict):  # gone, or a namesake: not ours
                answer = await self._client.delete(
                    JOB, deletion.name, namespace=namespace, uid=deletion.uid
                )
                if answer is not None and answer.get("kind") == "Job":
                    remember(Kind.JOB, answer)
        blocked = False
        if step.service is not None and anchor.uid not in self._services:
            blocked = await self._create_service(anchor, step.service)
        blocked = await self._create_jobs(anchor, step.create_jobs, remember) or blocked
        for name in step.suspend_jobs:
            await self._patch_job(name, namespace, True, remember)
        for name in step.resume_jobs:
            await self._patch_job(name, namespace, False, remember)
        return blocked

    async def _create_service(self, anchor: Anchor, service: Mapping[str, Any]) -> bool:
        """Create the headless Service; whether an older run's namesake blocks it (see
        :func:`service_going`; Services are not watched: the waiter's backoff tries again)."""
        namespace = anchor.namespace
        try:
            await self._client.create(SERVICE, service, namespace=namespace)
        except Conflict:  # used as it is, as upstream does, unless an older run's is going
            try:
                existing = await self._client.get(
                    SERVICE, service["metadata"]["name"], namespace=namespace
                )
            except NotFound:
                return True  # gone meanwhile
            if service_going(anchor, existing):
                return True
        except ApiError as err:
            raise _CannotCreate("HeadlessServiceCreationFailed", str(err)) from err
        self._services[anchor.uid] = None
        while len(self._services) > SERVICES_KEPT:
            del self._services[next(iter(self._services))]
        return False

    async def _create_job(self, anchor: Anchor, job: Mapping[str, Any], remember: Remember) -> bool:
        """Create one Job; whether a namesake still going blocks it (its deletion is watched,
        so it is not handed to the observer: a late copy could outlive it there)."""
        name, why = job["metadata"]["name"], "JobCreationFailed"
        try:
            created = await self._client.create(JOB, job, namespace=anchor.namespace)
        except Conflict:  # ours from an earlier pass or process; else it never goes away
            try:
                existing = await self._client.get(JOB, name, namespace=anchor.namespace)
            except NotFound:
                return False  # gone meanwhile: the next pass creates it
            problem = foreign_job(anchor, existing)
            if problem is not None:
                raise _CannotCreate(why, problem) from None
            if going(anchor, existing):
                return True
            remember(Kind.JOB, existing)
            return False
        except ApiError as err:
            raise _CannotCreate(why, str(err)) from err
        remember(Kind.JOB, created)
        return False

    async def _create_jobs(
        self, anchor: Anchor, jobs: tuple[dict[str, Any], ...], remember: Remember
    ) -> bool:
        gate = asyncio.Semaphore(MAX_CONCURRENT_CREATES)

        async def create(job: dict[str, Any]) -> bool:
            async with gate:
                return await self._create_job(anchor, job, remember)

        results = await asyncio.gather(*(create(job) for job in jobs), return_exceptions=True)
        for result in results:  # every create was tried; report the first failure
            if isinstance(result, BaseException):
                raise result
        return any(results)

    async def _patch_job(
        self, name: str, namespace: str, suspend: bool, remember: Remember
    ) -> None:
        with contextlib.suppress(NotFound):
            patched = await self._client.patch(
                JOB, name, {"spec": {"suspend": suspend}}, namespace=namespace
            )
            remember(Kind.JOB, patched)

    # ------------------------------------------------------------------ control

    async def set_suspend(self, handle: Handle, suspend: bool) -> None:
        """Suspend (``True``) or resume the run: set ``spec.suspend`` on the anchor (the
        next pass of any waiter makes the Jobs follow)."""
        for _ in range(_CONFLICT_RETRIES):
            obj = await self._client.get(CONFIG_MAP, handle.name, namespace=handle.namespace)
            anchor = parse_anchor(obj)
            if bool(anchor.jobset.spec.suspend) == suspend:
                return
            with contextlib.suppress(Conflict):
                await self._client.patch(
                    CONFIG_MAP,
                    handle.name,
                    suspend_patch(anchor, suspend),
                    namespace=handle.namespace,
                )
                return
        raise Conflict(409, "Conflict", f"anchor {handle.namespace}/{handle.name} keeps changing")
