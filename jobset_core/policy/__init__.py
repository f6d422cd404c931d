"""Pure policy functions of the JobSet core: the upstream controller's decisions as values.

Each module mirrors one file of upstream ``pkg/controllers`` (v0.12.0, feature gates off) and
never performs I/O, logs, sleeps or reads a clock. :func:`next_step` combines them in the
upstream reconcile order and returns a :class:`ReconcilePlan` for an executor to apply.
"""

from jobset_core.policy.child_jobs import ChildJob, ChildJobs, JobCondition, bucket_child_jobs
from jobset_core.policy.conditions import ConditionSpec, PlannedEvent, update_condition
from jobset_core.policy.counts import all_jobs_ready, replicated_jobs_status
from jobset_core.policy.failure import FailedJobRef, FailureDecision, evaluate_failure
from jobset_core.policy.plan import JobDeletion, ReconcilePlan, next_step
from jobset_core.policy.startup import (
    CreationPlan,
    JobCreation,
    ReplicatedJobGate,
    plan_job_creation,
)
from jobset_core.policy.success import SuccessDecision, evaluate_success
from jobset_core.policy.suspend import JobResume, SuspendPlan, plan_resume, plan_suspend
from jobset_core.policy.terminal import TerminalStatus, TtlDecision, evaluate_ttl, terminal_status

__all__ = [
    "ChildJob",
    "ChildJobs",
    "ConditionSpec",
    "CreationPlan",
    "FailedJobRef",
    "FailureDecision",
    "JobCondition",
    "JobCreation",
    "JobDeletion",
    "JobResume",
    "PlannedEvent",
    "ReconcilePlan",
    "ReplicatedJobGate",
    "SuccessDecision",
    "SuspendPlan",
    "TerminalStatus",
    "TtlDecision",
    "all_jobs_ready",
    "bucket_child_jobs",
    "evaluate_failure",
    "evaluate_success",
    "evaluate_ttl",
    "next_step",
    "plan_job_creation",
    "plan_resume",
    "plan_suspend",
    "replicated_jobs_status",
    "terminal_status",
    "update_condition",
]
