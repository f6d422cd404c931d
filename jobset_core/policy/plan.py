"""One reconcile pass of the upstream JobSet controller, as a pure function returning a plan.

:func:`next_step` mirrors ``reconcile`` in ``pkg/controllers/jobset_controller.go`` (v0.12.0,
feature gates off), in its order:

1. skip a JobSet being deleted or managed by another controller;
2. bucket the owned child Jobs and recompute ``replicatedJobsStatus``;
3. already ``Completed``/``Failed``: delete the unfinished Jobs, apply the TTL, stop;
4. delete the Jobs of previous restart attempts (Foreground);
5. not suspended and every Job ready or succeeded: ``RestartingJobSet=False/JobsReady``;
6. a current-attempt Job failed: apply the failure policy, stop;
7. a Job succeeded: apply the success policy; stop when it is met;
8. headless Service and volume claims; create the missing Jobs the startup gates allow;
9. suspend or resume the Jobs.

The plan carries everything an executor needs: Jobs to delete, create, suspend and resume,
the new ``status`` (exactly the JobSet status shape) and whether it must be written, and the
events upstream emits after a successful status write. Nothing here reads a clock, logs or
performs I/O: the caller passes ``now``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobset_core import labels
from jobset_core.models import JobSet, JobSetStatus, ReplicatedJobStatus
from jobset_core.naming import subdomain
from jobset_core.policy import conditions as c
from jobset_core.policy._time import format_time
from jobset_core.policy.child_jobs import ChildJob, ChildJobs, bucket_child_jobs
from jobset_core.policy.counts import all_jobs_ready, replicated_jobs_status, sort_statuses
from jobset_core.policy.failure import FailureDecision, evaluate_failure
from jobset_core.policy.startup import CreationPlan, JobCreation, plan_job_creation
from jobset_core.policy.success import SuccessDecision, evaluate_success
from jobset_core.policy.suspend import JobResume, SuspendPlan, plan_resume, plan_suspend
from jobset_core.policy.terminal import TtlDecision, evaluate_ttl, terminal_status

__all__ = ["DeletionReason", "JobDeletion", "ReconcilePlan", "Stage", "next_step"]

Stage = Literal[
    "Skipped", "InvalidChildJobs", "Finished", "FailurePolicy", "Completed", "Reconciled"
]
DeletionReason = Literal["PreviousAttempt", "JobSetFinished"]


@dataclass(frozen=True, slots=True)
class JobDeletion:
    """One child Job to delete with ``propagationPolicy: Foreground`` (not found is fine)."""

    name: str
    uid: str | None
    reason: DeletionReason


@dataclass(frozen=True, slots=True)
class ReconcilePlan:
    """What one reconcile pass does.

    Attributes:
        stage: Where the pass stopped: ``Skipped`` (deleting, or managed elsewhere),
            ``InvalidChildJobs`` (a Job's ``restart-attempt`` label is unusable: upstream
            errors and retries), ``Finished`` (already terminal), ``FailurePolicy``,
            ``Completed`` (success policy met) or ``Reconciled`` (ran to the end).
        status: The JobSet status to write.
        status_changed: Whether ``status`` differs from the current one (write it if so).
        delete_jobs: Jobs to delete, in this order.
        create_jobs: Jobs to create.
        suspend_jobs: Jobs to set ``spec.suspend: true``.
        resume_jobs: Jobs to resume.
        events: Events to emit on the JobSet after the status write succeeded.
        headless_service: Name of the headless Service to create if missing.
        ensure_volume_claims: Create the missing PVCs of ``spec.volumeClaimPolicies``.
        failure: The failure-policy decision, when one was made.
        success: The success-policy decision, when one was made.
        creation: The creation gates, when the pass got that far.
        ttl: The ``ttlSecondsAfterFinished`` decision for a finished JobSet.
        problem: Why nothing could be done (``InvalidChildJobs``, unsupported action).
    """

    stage: Stage
    status: JobSetStatus
    status_changed: bool
    delete_jobs: tuple[JobDeletion, ...] = ()
    create_jobs: tuple[JobCreation, ...] = ()
    suspend_jobs: tuple[str, ...] = ()
    resume_jobs: tuple[JobResume, ...] = ()
    events: tuple[c.PlannedEvent, ...] = ()
    headless_service: str | None = None
    ensure_volume_claims: bool = False
    failure: FailureDecision | None = None
    success: SuccessDecision | None = None
    creation: CreationPlan | None = None
    ttl: TtlDecision | None = None
    problem: str | None = None


@dataclass
class _Pass:
    """The mutable working state of one pass (never leaves this module)."""

    jobset: JobSet
    jobs: ChildJobs
    now: _dt.datetime
    status: JobSetStatus
    statuses: list[ReplicatedJobStatus] = field(default_factory=list)
    events: list[c.PlannedEvent] = field(default_factory=list)
    deletions: list[JobDeletion] = field(default_factory=list)

    def set_condition(self, spec: c.ConditionSpec) -> None:
        update = c.update_condition(self.status.conditions or [], spec, format_time(self.now))
        if not update.changed:
            return
        self.status.conditions = list(update.conditions)
        if spec.emit_event:
            self.events.append(c.PlannedEvent(spec.event_type, spec.reason, spec.message))

    def delete(self, jobs: Iterable[ChildJob], reason: DeletionReason) -> None:
        self.deletions.extend(JobDeletion(j.name, j.uid, reason) for j in jobs if not j.deleting)

    def plan(self, stage: Stage, **details: Any) -> ReconcilePlan:
        return ReconcilePlan(
            stage=stage,
            status=self.status,
            status_changed=_normalized(self.status) != _normalized(self.jobset.status),
            delete_jobs=tuple(self.deletions),
            events=tuple(self.events),
            **details,
        )


def _normalized(status: JobSetStatus | None) -> dict[str, Any]:
    if status is None:
        return {}
    out = status.model_copy(deep=True)
    if out.replicated_jobs_status is not None:
        out.replicated_jobs_status = sort_statuses(out.replicated_jobs_status)
    return out.to_dict()


def _unchanged(jobset: JobSet, stage: Stage, problem: str | None = None) -> ReconcilePlan:
    status = (jobset.status or JobSetStatus()).model_copy(deep=True)
    return ReconcilePlan(stage, status, False, problem=problem)


def _owned(jobset: JobSet, jobs: Iterable[ChildJob | Mapping[str, Any]]) -> list[ChildJob]:
    views = [job if isinstance(job, ChildJob) else ChildJob.from_api(job) for job in jobs]
    uid = jobset.metadata.uid
    return [job for job in views if uid is None or job.owner_uid == uid]


def _finished(step: _Pass) -> ReconcilePlan:
    step.delete(step.jobs.active, "JobSetFinished")
    return step.plan("Finished", ttl=evaluate_ttl(step.jobset, step.now))


def _apply_failure(step: _Pass, decision: FailureDecision) -> ReconcilePlan:
    if decision.outcome == "Unsupported":
        # Upstream errors out of the pass: nothing is written, the deletions already happened.
        return ReconcilePlan(
            stage="FailurePolicy",
            status=(step.jobset.status or JobSetStatus()).model_copy(deep=True),
            status_changed=False,
            delete_jobs=tuple(step.deletions),
            failure=decision,
            problem=f"failure policy action {decision.action} needs the RestartJob feature gate",
        )
    if decision.condition is not None:
        step.set_condition(decision.condition)
    if decision.terminal:
        step.set_condition(c.ConditionSpec.of(c.RESTARTING, "False", c.RESTARTING_JOBSET_FAILED))
        step.status.terminal_state = "Failed"
    else:
        step.status.restarts = decision.restarts
        if decision.restarts_count_towards_max or step.status.restarts_count_towards_max:
            step.status.restarts_count_towards_max = decision.restarts_count_towards_max
    if decision.event is not None:
        step.events.append(decision.event)
    return step.plan("FailurePolicy", failure=decision)


def _complete(step: _Pass, decision: SuccessDecision) -> ReconcilePlan:
    step.set_condition(c.ConditionSpec.of(c.COMPLETED, "True", c.ALL_JOBS_COMPLETED))
    step.set_condition(c.ConditionSpec.of(c.RESTARTING, "False", c.RESTARTING_JOBSET_COMPLETED))
    step.status.terminal_state = "Completed"
    return step.plan("Completed", success=decision)


def _headless_service(jobset: JobSet) -> str | None:
    network = jobset.spec.network
    if network is None or network.enable_dns_hostnames is not True:
        return None
    return subdomain(jobset)


def _progress(step: _Pass, success: SuccessDecision | None) -> ReconcilePlan:
    jobset = step.jobset
    creation = plan_job_creation(jobset, step.jobs, step.statuses)
    if creation.startup_condition is not None:
        step.set_condition(creation.startup_condition)
    moves: SuspendPlan
    if jobset.spec.suspend:
        moves = plan_suspend(step.jobs.active)
    else:
        moves = plan_resume(jobset, step.jobs.active, step.statuses)
    for spec in moves.conditions:
        step.set_condition(spec)
    return step.plan(
        "Reconciled",
        create_jobs=creation.jobs,
        suspend_jobs=moves.suspend_jobs,
        resume_jobs=moves.resume_jobs,
        headless_service=_headless_service(jobset),
        ensure_volume_claims=bool(jobset.spec.volume_claim_policies),
        success=success,
        creation=creation,
    )


def _skipped(jobset: JobSet, controller_name: str) -> bool:
    managed_by = jobset.spec.managed_by
    external = managed_by is not None and managed_by != controller_name
    return jobset.metadata.deletion_timestamp is not None or external


def next_step(
    jobset: JobSet,
    jobs: Iterable[ChildJob | Mapping[str, Any]],
    now: _dt.datetime,
    *,
    controller_name: str = labels.JOBSET_CONTROLLER_NAME,
) -> ReconcilePlan:
    """Plan one reconcile pass of a JobSet; mirrors upstream ``Reconcile``/``reconcile``.

    Args:
        jobset: The (defaulted) JobSet as read from the API server, status included.
        jobs: Its child Jobs (``ChildJob`` views or API dicts). When the JobSet has a UID,
            only Jobs whose controller owner is that JobSet are considered.
        now: The current time (aware); stamps changed conditions and drives the TTL.
        controller_name: The ``spec.managedBy`` value this planner acts for; a JobSet
            managed by another controller is skipped.

    Returns:
        The plan for this pass.
    """
    if _skipped(jobset, controller_name):
        return _unchanged(jobset, "Skipped")
    restarts = (jobset.status.restarts if jobset.status else None) or 0
    buckets = bucket_child_jobs(_owned(jobset, jobs), restarts)
    if buckets.invalid:
        names = ", ".join(job.name for job in buckets.invalid)
        problem = f"invalid value for label {labels.RESTART_ATTEMPT}, must be integer: {names}"
        return _unchanged(jobset, "InvalidChildJobs", problem)
    status = (jobset.status or JobSetStatus()).model_copy(deep=True)
    status.restarts = restarts  # upstream always serializes it (not omitempty since v0.9)
    step = _Pass(jobset, buckets, now, status)
    step.statuses = replicated_jobs_status(jobset, buckets)
    step.status.replicated_jobs_status = list(step.statuses)
    if terminal_status(jobset.status).finished:
        return _finished(step)
    step.delete(buckets.previous, "PreviousAttempt")
    if not jobset.spec.suspend and all_jobs_ready(jobset, step.statuses):
        step.set_condition(c.ConditionSpec.of(c.RESTARTING, "False", c.RESTARTING_JOBS_READY))
    failure = evaluate_failure(jobset, buckets.failed)
    if failure is not None:
        return _apply_failure(step, failure)
    success = evaluate_success(jobset, buckets.successful) if buckets.successful else None
    if success is not None and success.met:
        return _complete(step, success)
    return _progress(step, success)
