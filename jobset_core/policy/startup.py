"""Which child Jobs may be created now: startup order, dependencies and restart strategy.

Mirrors ``reconcileReplicatedJobs`` and ``constructJobsFromTemplate`` of
``pkg/controllers/jobset_controller.go``, with ``startup_policy.go`` and ``depends_on.go``:

* replicated jobs are visited in spec order; one whose ``dependsOn`` are not reached is
  skipped (``Ready``: ``ready + failed + succeeded == replicas``; ``Complete``:
  ``succeeded == replicas``);
* ``InOrder`` (not suspended): a replicated job whose Jobs have all started
  (``failed + ready + succeeded == replicas``) is skipped; the first one that has not gets its
  missing Jobs and the pass stops there (``StartupPolicyInProgress``); when every one has
  started, ``StartupPolicyCompleted``;
* ``Recreate``: a Job is created only when no owned Job of that name exists in any bucket,
  terminating ones included; ``BlockingRecreate``: nothing is created while any Job of a
  previous attempt still exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from jobset_core.models import JobSet, ReplicatedJob, ReplicatedJobStatus
from jobset_core.naming import job_name
from jobset_core.policy import conditions as c
from jobset_core.policy.child_jobs import ChildJobs

__all__ = [
    "CreationPlan",
    "GateReason",
    "JobCreation",
    "ReplicatedJobGate",
    "all_replicas_started",
    "blocked_by_previous_attempt",
    "dependency_reached_status",
    "in_order_startup_policy",
    "plan_job_creation",
    "should_create_job",
]

GateReason = Literal[
    "Allowed", "BlockingRecreate", "WaitingForDependencies", "AlreadyStarted", "WaitingInOrder"
]


def in_order_startup_policy(jobset: JobSet) -> bool:
    """Mirror ``inOrderStartupPolicy``: ``startupPolicyOrder`` is ``InOrder``."""
    policy = jobset.spec.startup_policy
    return policy is not None and policy.startup_policy_order == "InOrder"


def all_replicas_started(replicas: int, status: ReplicatedJobStatus | None) -> bool:
    """Mirror ``allReplicasStarted``: ``failed + ready + succeeded == replicas``."""
    started = 0 if status is None else status.failed + status.ready + status.succeeded
    return replicas == started


def _status_of(statuses: Sequence[ReplicatedJobStatus], name: str) -> ReplicatedJobStatus | None:
    return next((status for status in statuses if status.name == name), None)


def dependency_reached_status(
    rjob: ReplicatedJob, replicas: Mapping[str, int], statuses: Sequence[ReplicatedJobStatus]
) -> bool:
    """Mirror ``dependencyReachedStatus``: every ``dependsOn`` entry is Ready/Complete.

    Args:
        rjob: The replicated job whose dependencies are checked.
        replicas: ``replicas`` of the replicated jobs visited so far (a missing name counts 0).
        statuses: The current ``replicatedJobsStatus``.
    """
    for dep in rjob.depends_on or []:
        status = _status_of(statuses, dep.name)
        if status is None:
            return False
        wanted = replicas.get(dep.name, 0)
        if dep.status == "Complete" and wanted != status.succeeded:
            return False
        if dep.status == "Ready" and wanted != status.failed + status.ready + status.succeeded:
            return False
    return True


def should_create_job(name: str, jobs: ChildJobs) -> bool:
    """Mirror ``shouldCreateJob``: no owned Job of that name exists (deleting ones count)."""
    return name not in jobs.names()


def blocked_by_previous_attempt(jobset: JobSet, jobs: ChildJobs) -> bool:
    """``BlockingRecreate`` and a Job of a previous attempt still exists: create nothing."""
    policy = jobset.spec.failure_policy
    blocking = policy is not None and policy.restart_strategy == "BlockingRecreate"
    return blocking and bool(jobs.previous)


@dataclass(frozen=True, slots=True)
class JobCreation:
    """One child Job to create (the renderer builds it from the replicated job's template).

    Attributes:
        replicated_job: The replicated job's name.
        job_index: The Job's index in its replicated job (``job-index`` label).
        name: ``<jobset>-<replicatedJob>-<jobIndex>``.
        restart_attempt: The ``restart-attempt`` label value (``status.restarts``).
        suspend: ``spec.suspend`` of the new Job (the JobSet's suspend).
    """

    replicated_job: str
    job_index: int
    name: str
    restart_attempt: int
    suspend: bool


@dataclass(frozen=True, slots=True)
class ReplicatedJobGate:
    """Why a replicated job does or does not get Jobs created in this pass.

    Attributes:
        name: The replicated job.
        reason: ``Allowed`` (its missing Jobs are created), ``BlockingRecreate`` (allowed,
            but previous-attempt Jobs still exist), ``WaitingForDependencies``,
            ``AlreadyStarted`` (``InOrder``: all its Jobs started) or ``WaitingInOrder``
            (``InOrder``: an earlier replicated job is still starting).
        missing: Job indexes with no owned Job of that name.
    """

    name: str
    reason: GateReason
    missing: tuple[int, ...]

    @property
    def may_create(self) -> bool:
        """Whether Jobs of this replicated job are created now."""
        return self.reason == "Allowed"


@dataclass(frozen=True, slots=True)
class CreationPlan:
    """The outcome of the creation step.

    Attributes:
        jobs: The Jobs to create, in spec and index order.
        gates: One gate per replicated job, in spec order.
        startup_condition: ``StartupPolicyInProgress``/``StartupPolicyCompleted`` to set
            (``InOrder`` and not suspended only).
    """

    jobs: tuple[JobCreation, ...]
    gates: tuple[ReplicatedJobGate, ...]
    startup_condition: c.ConditionSpec | None


_IN_PROGRESS = c.ConditionSpec.of(c.STARTUP_POLICY_IN_PROGRESS, "True", c.STARTUP_IN_PROGRESS)
_COMPLETED = c.ConditionSpec.of(c.STARTUP_POLICY_COMPLETED, "True", c.STARTUP_COMPLETED)


def _missing(jobset: JobSet, rjob: ReplicatedJob, jobs: ChildJobs) -> tuple[int, ...]:
    count = 1 if rjob.replicas is None else rjob.replicas
    names = jobs.names()
    return tuple(i for i in range(count) if job_name(jobset.name, rjob.name, i) not in names)


def _gate(
    jobset: JobSet,
    rjob: ReplicatedJob,
    replicas: Mapping[str, int],
    statuses: Sequence[ReplicatedJobStatus],
    jobs: ChildJobs,
) -> ReplicatedJobGate:
    missing = _missing(jobset, rjob, jobs)
    if not dependency_reached_status(rjob, replicas, statuses):
        return ReplicatedJobGate(rjob.name, "WaitingForDependencies", missing)
    ordered = in_order_startup_policy(jobset) and not jobset.spec.suspend
    if ordered and all_replicas_started(replicas[rjob.name], _status_of(statuses, rjob.name)):
        return ReplicatedJobGate(rjob.name, "AlreadyStarted", missing)
    if blocked_by_previous_attempt(jobset, jobs):
        return ReplicatedJobGate(rjob.name, "BlockingRecreate", missing)
    return ReplicatedJobGate(rjob.name, "Allowed", missing)


def plan_job_creation(
    jobset: JobSet, jobs: ChildJobs, statuses: Sequence[ReplicatedJobStatus]
) -> CreationPlan:
    """Decide which missing Jobs to create now; mirrors ``reconcileReplicatedJobs``.

    Args:
        jobset: The (defaulted) JobSet with its current status.
        jobs: The bucketed child Jobs.
        statuses: ``replicatedJobsStatus`` computed in this pass.

    Returns:
        The Jobs to create, the per-replicated-job gates and the startup condition.
    """
    ordered = in_order_startup_policy(jobset) and not jobset.spec.suspend
    restarts = (jobset.status.restarts if jobset.status else None) or 0
    replicas: dict[str, int] = {}
    gates: list[ReplicatedJobGate] = []
    creations: list[JobCreation] = []
    stopped = False
    for rjob in jobset.replicated_jobs:
        if stopped:
            gates.append(
                ReplicatedJobGate(rjob.name, "WaitingInOrder", _missing(jobset, rjob, jobs))
            )
            continue
        replicas[rjob.name] = 1 if rjob.replicas is None else rjob.replicas
        gate = _gate(jobset, rjob, replicas, statuses, jobs)
        gates.append(gate)
        if gate.reason in ("WaitingForDependencies", "AlreadyStarted"):
            continue
        if gate.may_create:
            creations.extend(
                JobCreation(
                    rjob.name,
                    i,
                    job_name(jobset.name, rjob.name, i),
                    restarts,
                    bool(jobset.spec.suspend),
                )
                for i in gate.missing
            )
        stopped = ordered
    condition = (_IN_PROGRESS if stopped else _COMPLETED) if ordered else None
    return CreationPlan(tuple(creations), tuple(gates), condition)
