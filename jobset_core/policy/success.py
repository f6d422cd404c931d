"""The success policy: when enough child Jobs completed, the JobSet is ``Completed``.

Mirrors ``pkg/controllers/success_policy.go`` and ``executeSuccessPolicy``. ``Any`` needs one
succeeded Job of a targeted replicated job; ``All`` needs as many as the targeted replicated
jobs have replicas (an empty target list targets every replicated job). The reconciler only
asks when no current-attempt Job failed and at least one succeeded, so a JobSet whose
replicas are all 0 never completes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobset_core.models import JobSet, ReplicatedJob, SuccessPolicy
from jobset_core.models.jobset import SuccessPolicyOperator
from jobset_core.policy.child_jobs import ChildJob
from jobset_core.policy.counts import replicas_of

__all__ = [
    "SuccessDecision",
    "evaluate_success",
    "job_matches_success_policy",
    "num_jobs_expected_to_succeed",
    "num_jobs_matching_success_policy",
    "replicated_job_matches_success_policy",
]

#: What the upstream webhook defaults an absent success policy to.
_DEFAULT = SuccessPolicy(operator="All")


def _policy(jobset: JobSet) -> SuccessPolicy:
    return jobset.spec.success_policy or _DEFAULT


def _targeted(policy: SuccessPolicy, replicated_job: str | None) -> bool:
    targets = policy.target_replicated_jobs or []
    return not targets or replicated_job in targets


def job_matches_success_policy(jobset: JobSet, job: ChildJob) -> bool:
    """Mirror ``jobMatchesSuccessPolicy``: the Job's replicated job is targeted."""
    return _targeted(_policy(jobset), job.replicated_job)


def replicated_job_matches_success_policy(jobset: JobSet, rjob: ReplicatedJob) -> bool:
    """Mirror ``replicatedJobMatchesSuccessPolicy``: the replicated job is targeted."""
    return _targeted(_policy(jobset), rjob.name)


def num_jobs_matching_success_policy(jobset: JobSet, jobs: Sequence[ChildJob]) -> int:
    """Mirror ``numJobsMatchingSuccessPolicy``: how many of ``jobs`` are targeted."""
    return sum(1 for job in jobs if job_matches_success_policy(jobset, job))


def num_jobs_expected_to_succeed(jobset: JobSet) -> int:
    """Mirror ``numJobsExpectedToSucceed``: 1 for ``Any``, targeted replicas for ``All``."""
    policy = _policy(jobset)
    if policy.operator == "Any":
        return 1
    replicas = replicas_of(jobset)
    return sum(count for name, count in replicas.items() if _targeted(policy, name))


@dataclass(frozen=True, slots=True)
class SuccessDecision:
    """The outcome of the success policy for the current attempt.

    Attributes:
        operator: ``All`` or ``Any``.
        target_replicated_jobs: The targeted replicated jobs (empty: all).
        needed: Succeeded Jobs required (``numJobsExpectedToSucceed``).
        succeeded: Succeeded Jobs of targeted replicated jobs.
        met: ``succeeded >= needed``: the JobSet is ``Completed``.
    """

    operator: SuccessPolicyOperator
    target_replicated_jobs: tuple[str, ...]
    needed: int
    succeeded: int
    met: bool


def evaluate_success(jobset: JobSet, successful: Sequence[ChildJob]) -> SuccessDecision:
    """Evaluate the success policy; mirrors ``executeSuccessPolicy``.

    Args:
        jobset: The (defaulted) JobSet.
        successful: The current attempt's Jobs with ``Complete=True``.

    Returns:
        The decision; ``met`` means the JobSet completes.
    """
    policy = _policy(jobset)
    needed = num_jobs_expected_to_succeed(jobset)
    succeeded = num_jobs_matching_success_policy(jobset, successful)
    return SuccessDecision(
        operator=policy.operator,
        target_replicated_jobs=tuple(policy.target_replicated_jobs or ()),
        needed=needed,
        succeeded=succeeded,
        met=succeeded >= needed,
    )
