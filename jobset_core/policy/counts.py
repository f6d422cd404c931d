"""Per-replicated-job counters (``status.replicatedJobsStatus``), computed like upstream.

Mirrors ``calculateReplicatedJobStatuses`` in ``pkg/controllers/jobset_controller.go``. Only
Jobs of the current restart attempt count:

* ``ready``: unfinished Jobs with ``status.succeeded + status.ready >= min(parallelism,
  completions)`` (``completions`` only when set; ``parallelism`` defaults to 1);
* ``active``: unfinished Jobs with ``status.active > 0``;
* ``suspended``: unfinished Jobs with ``spec.suspend == true``;
* ``succeeded`` / ``failed``: Jobs with ``Complete=True`` / ``Failed=True``.

Jobs without a ``replicatedjob-name`` label, or naming a replicated job that is not in the
spec, are skipped. The list is ordered by name, descending: upstream writes it after
``replicatedJobStatusesEqual`` has sorted it in place that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jobset_core.models import JobSet, ReplicatedJobStatus
from jobset_core.policy.child_jobs import ChildJob, ChildJobs

__all__ = [
    "all_jobs_ready",
    "job_is_ready",
    "replicas_of",
    "replicated_jobs_status",
    "sort_statuses",
]


def replicas_of(jobset: JobSet) -> dict[str, int]:
    """``replicas`` per replicated job, in spec order (an absent value counts as the default 1)."""
    return {
        rjob.name: 1 if rjob.replicas is None else rjob.replicas for rjob in jobset.replicated_jobs
    }


def job_is_ready(job: ChildJob) -> bool:
    """Whether an unfinished Job counts as ready (``succeeded + ready >= min(P, C)``)."""
    pods = job.parallelism
    if job.completions is not None and job.completions < pods:
        pods = job.completions
    return job.succeeded + job.ready >= pods


def sort_statuses(statuses: Iterable[ReplicatedJobStatus]) -> list[ReplicatedJobStatus]:
    """Order statuses by name, descending (what upstream ends up writing)."""
    return sorted(statuses, key=lambda status: status.name, reverse=True)


def _tally(counts: dict[str, dict[str, int]], jobs: Iterable[ChildJob], field: str) -> None:
    for job in jobs:
        if job.replicated_job is not None and job.replicated_job in counts:
            counts[job.replicated_job][field] += 1


def replicated_jobs_status(jobset: JobSet, jobs: ChildJobs) -> list[ReplicatedJobStatus]:
    """Compute ``status.replicatedJobsStatus``; mirrors ``calculateReplicatedJobStatuses``.

    Args:
        jobset: The JobSet (its ``spec.replicatedJobs`` name the entries).
        jobs: The bucketed child Jobs.

    Returns:
        One status per replicated job of the spec, ordered by name descending.
    """
    fields = ("ready", "succeeded", "failed", "active", "suspended")
    counts = {rjob.name: dict.fromkeys(fields, 0) for rjob in jobset.replicated_jobs}
    _tally(counts, (job for job in jobs.active if job_is_ready(job)), "ready")
    _tally(counts, (job for job in jobs.active if job.active > 0), "active")
    _tally(counts, (job for job in jobs.active if job.suspend), "suspended")
    _tally(counts, jobs.successful, "succeeded")
    _tally(counts, jobs.failed, "failed")
    return sort_statuses(ReplicatedJobStatus(name=name, **c) for name, c in counts.items())


def all_jobs_ready(jobset: JobSet, statuses: Sequence[ReplicatedJobStatus]) -> bool:
    """Mirror ``allJobsReady``: ready + succeeded over all replicated jobs equals all replicas."""
    total = sum(replicas_of(jobset).values())
    return total == sum(status.ready + status.succeeded for status in statuses)
