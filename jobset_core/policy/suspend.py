"""Suspending and resuming the child Jobs with their JobSet.

Mirrors ``suspendJobs`` and ``resumeJobsIfNecessary`` of ``pkg/controllers/jobset_controller.go``:

* suspended JobSet: every unfinished Job not yet suspended gets ``suspend: true``;
  ``Suspended=True`` (and ``RestartingJobSet=False/JobSetSuspended`` when present);
* otherwise, replicated job by replicated job in spec order (skipping those whose
  ``dependsOn`` are not reached), suspended Jobs are resumed (their pod template refreshed from
  the JobSet, ``status.startTime`` cleared first); with ``InOrder`` the first replicated job
  that has not fully started stops the pass (``StartupPolicyInProgress``); at the end
  ``Suspended=False/ResumeJobs`` (only flips an existing condition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobset_core.models import JobSet, ReplicatedJobStatus
from jobset_core.policy import conditions as c
from jobset_core.policy.child_jobs import ChildJob
from jobset_core.policy.startup import (
    all_replicas_started,
    dependency_reached_status,
    in_order_startup_policy,
)

__all__ = ["JobResume", "SuspendPlan", "plan_resume", "plan_suspend"]


@dataclass(frozen=True, slots=True)
class JobResume:
    """One suspended Job to resume.

    Attributes:
        name: The Job.
        replicated_job: Its replicated job, whose pod template labels, annotations,
            nodeSelector (merged maps), tolerations and schedulingGates (merged lists) are
            copied onto the Job before ``suspend: false``.
        clear_start_time: ``status.startTime`` is set and must be cleared first (status update).
    """

    name: str
    replicated_job: str
    clear_start_time: bool


@dataclass(frozen=True, slots=True)
class SuspendPlan:
    """Jobs to suspend or resume, and the conditions to set, in upstream order."""

    suspend_jobs: tuple[str, ...] = ()
    resume_jobs: tuple[JobResume, ...] = ()
    conditions: tuple[c.ConditionSpec, ...] = ()


_SUSPENDED = c.ConditionSpec.of(c.SUSPENDED, "True", c.SUSPENDED_JOBS)
_NOT_RESTARTING = c.ConditionSpec.of(c.RESTARTING, "False", c.RESTARTING_JOBSET_SUSPENDED)
_RESUMED = c.ConditionSpec.of(c.SUSPENDED, "False", c.RESUMED)
_IN_PROGRESS = c.ConditionSpec.of(c.STARTUP_POLICY_IN_PROGRESS, "True", c.STARTUP_IN_PROGRESS)


def plan_suspend(active: Sequence[ChildJob]) -> SuspendPlan:
    """Mirror ``suspendJobs``: suspend every unfinished Job that is not suspended yet.

    Args:
        active: The current attempt's unfinished Jobs.
    """
    names = tuple(job.name for job in active if not job.suspend)
    return SuspendPlan(suspend_jobs=names, conditions=(_SUSPENDED, _NOT_RESTARTING))


def plan_resume(
    jobset: JobSet, active: Sequence[ChildJob], statuses: Sequence[ReplicatedJobStatus]
) -> SuspendPlan:
    """Mirror ``resumeJobsIfNecessary``: resume suspended Jobs, respecting the start order.

    Args:
        jobset: The (defaulted, not suspended) JobSet.
        active: The current attempt's unfinished Jobs (as listed at the start of the pass).
        statuses: ``replicatedJobsStatus`` computed in this pass.
    """
    in_order = in_order_startup_policy(jobset)
    replicas: dict[str, int] = {}
    resumes: list[JobResume] = []
    for rjob in jobset.replicated_jobs:
        replicas[rjob.name] = 1 if rjob.replicas is None else rjob.replicas
        if not dependency_reached_status(rjob, replicas, statuses):
            continue
        status = next((s for s in statuses if s.name == rjob.name), None)
        if in_order and all_replicas_started(replicas[rjob.name], status):
            continue
        resumes.extend(
            JobResume(job.name, rjob.name, job.start_time is not None)
            for job in active
            if job.replicated_job == rjob.name and job.suspend
        )
        if in_order:
            return SuspendPlan(resume_jobs=tuple(resumes), conditions=(_IN_PROGRESS,))
    return SuspendPlan(resume_jobs=tuple(resumes), conditions=(_RESUMED,))
