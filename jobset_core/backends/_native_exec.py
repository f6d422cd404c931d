"""One reconcile pass of the native backend, as ordered calls described by a value.

:func:`plan_pass` runs the core planner (:func:`jobset_core.policy.next_step`) on an anchor and
the Jobs it owns, and turns the :class:`~jobset_core.policy.ReconcilePlan` into a
:class:`NativePass`: what to delete, the rendered Service and Jobs to create, the Jobs to
suspend or resume, the status patch and whether the anchor itself goes (TTL), in the order the
upstream controller acts. The sync and async backends only send it.

Two things the controller reads from its own JobSet object come from the anchor here: the
owner of the child Jobs (a controller reference to the anchor ConfigMap, where upstream has the
JobSet) and the JobSet's UID (the anchor's).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core import labels
from jobset_core.backends._anchor import ANCHOR_KIND, Anchor, owner_reference, status_patch
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Outcome, Phase, ReplicatedJobCounts
from jobset_core.policy import (
    ChildJob,
    FailureDecision,
    JobDeletion,
    ReconcilePlan,
    next_step,
    terminal_status,
)
from jobset_core.policy import conditions as c
from jobset_core.policy._time import parse_time
from jobset_core.render import Placement, headless_service, render

__all__ = [
    "NativePass",
    "PodChoice",
    "child_views",
    "controller_owner_uid",
    "default_pod",
    "outcome_of",
    "pick_pod",
    "plan_pass",
    "pod_selector",
    "restarting_outcome",
    "termination_message",
]


def controller_owner_uid(obj: Mapping[str, Any]) -> str | None:
    """UID of the anchor ConfigMap that controls ``obj`` (``None``: not owned by an anchor)."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller") is True:
            if owner.get("kind") == ANCHOR_KIND and owner.get("apiVersion") == "v1":
                return str(owner.get("uid"))
            return None
    return None


def child_views(anchor: Anchor, jobs: Iterable[Mapping[str, Any]]) -> list[ChildJob]:
    """The Jobs the anchor controls, as the planner's views (owner = the anchor's UID).

    Jobs controlled by anything else (another anchor of an older run of the same name, a
    JobSet) are left out, like upstream ignores Jobs it does not own.
    """
    views = []
    for job in jobs:
        if controller_owner_uid(job) == anchor.uid:
            views.append(dataclasses.replace(ChildJob.from_api(job), owner_uid=anchor.uid))
    return views


@dataclass(frozen=True)
class NativePass:
    """What one native reconcile pass sends, in this order.

    Attributes:
        plan: The core plan the pass was made from.
        delete_jobs: Jobs to delete (Foreground, UID precondition; not found is fine).
        service: The headless Service to create when missing.
        create_jobs: Rendered Jobs to create (at most 50 at a time).
        suspend_jobs: Jobs to patch ``spec.suspend: true``.
        resume_jobs: Jobs to patch ``spec.suspend: false``.
        status_patch: The compare-and-swap merge patch of the anchor's status, if it changed.
        delete_anchor: ``ttlSecondsAfterFinished`` expired: delete the anchor (Foreground).
        ttl_remaining: Seconds until the TTL expires (finished, TTL set, not expired yet).
    """

    plan: ReconcilePlan
    delete_jobs: tuple[JobDeletion, ...] = ()
    service: dict[str, Any] | None = None
    create_jobs: tuple[dict[str, Any], ...] = ()
    suspend_jobs: tuple[str, ...] = ()
    resume_jobs: tuple[str, ...] = ()
    status_patch: dict[str, Any] | None = None
    delete_anchor: bool = False
    ttl_remaining: float | None = None

    @property
    def restart(self) -> FailureDecision | None:
        """The failure policy's restart decision made in this pass, if any."""
        failure = self.plan.failure
        return failure if failure is not None and failure.outcome == "Restart" else None

    @property
    def acted(self) -> bool:
        """Whether the pass changes anything on the cluster (then another pass follows)."""
        return bool(
            self.delete_jobs
            or self.create_jobs
            or self.suspend_jobs
            or self.resume_jobs
            or self.status_patch is not None
            or self.delete_anchor
        )


def _created_jobs(
    anchor: Anchor, plan: ReconcilePlan, placement: Placement
) -> tuple[dict[str, Any], ...]:
    if not plan.create_jobs:
        return ()
    wanted = {creation.name for creation in plan.create_jobs}
    rendered = render(
        anchor.jobset,
        anchor.namespace,
        plan.create_jobs[0].restart_attempt,
        uid=anchor.uid,
        owner=owner_reference(anchor),
        placement=placement,
    )
    return tuple(job for job in rendered.jobs if job["metadata"]["name"] in wanted)


def plan_pass(
    anchor: Anchor,
    jobs: Iterable[Mapping[str, Any]],
    now: _dt.datetime,
    *,
    create: bool = True,
    placement: Placement = "affinity",
) -> NativePass:
    """Plan one reconcile pass of a native run; mirrors the controller's ``reconcile``.

    Args:
        anchor: The anchor as just read (its status is the current one).
        jobs: The Jobs listed by the run's selector (API dicts; others are filtered out).
        now: The current time (aware).
        create: Create the headless Service and missing Jobs. ``False`` stops after the
            deletions and the status write (a restart handed back to the caller).
        placement: How exclusive placement is rendered; ``"affinity"`` (default) needs no
            pod webhook.

    Returns:
        The pass to send.
    """
    plan = next_step(
        anchor.jobset,
        child_views(anchor, jobs),
        now,
        controller_name=anchor.jobset.spec.managed_by or "",
    )
    patch = status_patch(plan.status, anchor.resource_version) if plan.status_changed else None
    ttl = plan.ttl
    service = None
    if create and plan.headless_service is not None:
        service = headless_service(anchor.jobset, anchor.namespace, owner=owner_reference(anchor))
    return NativePass(
        plan=plan,
        delete_jobs=plan.delete_jobs,
        service=service,
        create_jobs=_created_jobs(anchor, plan, placement) if create else (),
        suspend_jobs=plan.suspend_jobs if create else (),
        resume_jobs=tuple(r.name for r in plan.resume_jobs) if create else (),
        status_patch=patch,
        delete_anchor=ttl is not None and ttl.delete_jobset,
        ttl_remaining=None if ttl is None else ttl.requeue_after_seconds,
    )


# --------------------------------------------------------------------------- outcome and pods
# Interim: the shared versions belong to ``jobset_core.backends._common`` (controller backend
# colleague); these are used until it lands and then replaced by it.

_FIRST_FAILED = re.compile(r"\(first failed job: (?P<job>[^)]+)\)\s*$")


def _counts(jobset: JobSet, status: JobSetStatus) -> tuple[ReplicatedJobCounts, ...]:
    found = {s.name: s for s in status.replicated_jobs_status or []}
    out = []
    for rjob in jobset.replicated_jobs:
        s = found.get(rjob.name)
        out.append(
            ReplicatedJobCounts(
                name=rjob.name,
                replicas=1 if rjob.replicas is None else rjob.replicas,
                ready=s.ready if s else 0,
                active=s.active if s else 0,
                succeeded=s.succeeded if s else 0,
                failed=s.failed if s else 0,
                suspended=s.suspended if s else 0,
            )
        )
    return tuple(out)


def _phase(status: JobSetStatus, counts: Iterable[ReplicatedJobCounts]) -> Phase:
    finished = terminal_status(status)
    if finished.finished:
        return Phase(finished.state)
    for kind, phase in ((c.SUSPENDED, Phase.SUSPENDED), (c.RESTARTING, Phase.RESTARTING)):
        cond = status.condition(kind)
        if cond is not None and cond.status == "True":
            return phase
    if any(n.ready or n.active or n.succeeded or n.failed for n in counts):
        return Phase.RUNNING
    return Phase.PENDING


def _seconds_between(start: str | None, end: str | None) -> float | None:
    begin, finish = parse_time(start), parse_time(end)
    return None if begin is None or finish is None else (finish - begin).total_seconds()


def outcome_of(anchor: Anchor, *, result: Any = None) -> Outcome:
    """The run's :class:`~jobset_core.outcome.Outcome`, read from the anchor's status."""
    status = anchor.status
    counts = _counts(anchor.jobset, status)
    phase = _phase(status, counts)
    finished = terminal_status(status)
    reason, message = finished.reason, finished.message
    if not finished.finished:
        shown = status.condition(c.RESTARTING) if phase is Phase.RESTARTING else None
        shown = shown or (status.condition(c.SUSPENDED) if phase is Phase.SUSPENDED else None)
        reason, message = (shown.reason or "", shown.message or "") if shown else ("", "")
    failed = _FIRST_FAILED.search(message)
    return Outcome(
        name=anchor.name,
        namespace=anchor.namespace,
        uid=anchor.uid,
        backend="native",
        phase=phase,
        terminal_state=finished.state if finished.finished else None,
        reason=reason,
        message=message,
        restarts=status.restarts or 0,
        restarts_count_towards_max=status.restarts_count_towards_max or 0,
        failed_job=failed.group("job") if failed else None,
        replicated_jobs=counts,
        created_at=anchor.created_at,
        finished_at=finished.finished_at,
        duration_seconds=_seconds_between(anchor.created_at, finished.finished_at),
        result=result,
    )


def restarting_outcome(anchor: Anchor, decision: FailureDecision) -> Outcome:
    """The non-terminal outcome of a restart handed back to the caller (``on_restart="return"``):
    phase ``Restarting``, the failed Job, the restart's reason and message."""
    base = outcome_of(anchor)
    condition = decision.condition
    return base.model_copy(
        update={
            "phase": Phase.RESTARTING,
            "reason": condition.reason if condition else decision.failed_job.reason,
            "message": condition.message if condition else decision.failed_job.message,
            "failed_job": decision.failed_job.name,
        }
    )


@dataclass(frozen=True)
class PodChoice:
    """Which pod's log or termination message is read: replicated job, job and pod index."""

    replicated_job: str
    job_index: int
    pod_index: int


def default_pod(
    jobset: JobSet, replicated_job: str | None = None, job_index: int = 0, pod_index: int = 0
) -> PodChoice | None:
    """The pod asked for, else the coordinator, else the first pod of the first replicated job."""
    if replicated_job is not None:
        return PodChoice(replicated_job, job_index, pod_index)
    coordinator = jobset.spec.coordinator
    if coordinator is not None:
        return PodChoice(
            coordinator.replicated_job, coordinator.job_index or 0, coordinator.pod_index or 0
        )
    rjobs = jobset.replicated_jobs
    return PodChoice(rjobs[0].name, 0, 0) if rjobs else None


def pod_selector(anchor: Anchor, choice: PodChoice) -> dict[str, str]:
    """Label selector of the chosen pod's candidates (every restart attempt and retry)."""
    return {
        labels.JOBSET_NAME: anchor.name,
        labels.JOBSET_UID: anchor.uid,
        labels.REPLICATED_JOB_NAME: choice.replicated_job,
        labels.JOB_INDEX: str(choice.job_index),
    }


def pick_pod(pods: Iterable[Mapping[str, Any]], choice: PodChoice) -> dict[str, Any] | None:
    """The newest pod of that completion index, preferring the latest restart attempt."""
    best: tuple[int, str] | None = None
    chosen: dict[str, Any] | None = None
    for pod in pods:
        meta = pod.get("metadata") or {}
        pod_labels = meta.get("labels") or {}
        index = pod_labels.get(labels.JOB_COMPLETION_INDEX) or (meta.get("annotations") or {}).get(
            labels.JOB_COMPLETION_INDEX, "0"
        )
        if str(index) != str(choice.pod_index):
            continue
        attempt = pod_labels.get(labels.RESTART_ATTEMPT, "0")
        key = (int(attempt) if str(attempt).isdigit() else 0, meta.get("creationTimestamp") or "")
        if best is None or key > best:
            best, chosen = key, dict(pod)
    return chosen


def termination_message(pod: Mapping[str, Any]) -> str | None:
    """The first non-empty termination message of the pod's containers."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated.get("message"):
            return str(terminated["message"])
    return None
