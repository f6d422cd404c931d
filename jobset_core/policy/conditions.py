"""JobSet condition types, reasons and messages, and how a condition lands in the status.

The strings are upstream's (``pkg/constants/constants.go`` and the condition helpers of
``pkg/controllers``), so a JobSet driven by this package reads exactly like one driven by the
upstream controller. :func:`update_condition` mirrors ``updateCondition``: a condition type is
only *added* when its status is ``True``; an existing one changes in place; the
``lastTransitionTime`` moves only when the status flips; ``StartupPolicyInProgress`` and
``StartupPolicyCompleted`` exclude each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jobset_core.models import Condition

__all__ = [
    "ALL_JOBS_COMPLETED",
    "COMPLETED",
    "FAILED",
    "FAILED_JOBS",
    "FAIL_JOBSET_ACTION",
    "REACHED_MAX_RESTARTS",
    "RESTARTING",
    "RESTARTING_DEFAULT_FAILURE_POLICY",
    "RESTARTING_JOBSET_COMPLETED",
    "RESTARTING_JOBSET_FAILED",
    "RESTARTING_JOBSET_SUSPENDED",
    "RESTARTING_JOBS_READY",
    "RESTART_JOBSET_ACTION",
    "RESTART_JOBSET_IGNORE_MAX_ACTION",
    "RESTART_JOB_ACTION",
    "RESTART_JOB_IGNORE_MAX_ACTION",
    "RESUMED",
    "STARTUP_COMPLETED",
    "STARTUP_IN_PROGRESS",
    "STARTUP_POLICY_COMPLETED",
    "STARTUP_POLICY_IN_PROGRESS",
    "SUSPENDED",
    "SUSPENDED_JOBS",
    "ConditionSpec",
    "ConditionStatus",
    "ConditionsUpdate",
    "EventType",
    "PlannedEvent",
    "Reason",
    "failure_policy_reason",
    "message_with_first_failed_job",
    "update_condition",
]

EventType = Literal["Normal", "Warning"]
ConditionStatus = Literal["True", "False"]

# Condition types (``api/jobset/v1alpha2/jobset_types.go``).
COMPLETED = "Completed"
FAILED = "Failed"
SUSPENDED = "Suspended"
STARTUP_POLICY_IN_PROGRESS = "StartupPolicyInProgress"
STARTUP_POLICY_COMPLETED = "StartupPolicyCompleted"
RESTARTING = "RestartingJobSet"


@dataclass(frozen=True, slots=True)
class Reason:
    """An upstream reason with its base message (``<X>Reason`` / ``<X>Message`` constants)."""

    reason: str
    message: str


ALL_JOBS_COMPLETED = Reason("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = Reason("FailedJobs", "jobset failed due to one or more job failures")
FAIL_JOBSET_ACTION = Reason(
    "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action"
)
REACHED_MAX_RESTARTS = Reason(
    "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
)
SUSPENDED_JOBS = Reason("SuspendedJobs", "jobset is suspended")
RESUMED = Reason("ResumeJobs", "jobset is resumed")
STARTUP_IN_PROGRESS = Reason(
    "InOrderStartupPolicyInProgress", "in order startup policy is in progress"
)
STARTUP_COMPLETED = Reason("InOrderStartupPolicyCompleted", "in order startup policy has completed")
RESTART_JOBSET_ACTION = Reason(
    "RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action"
)
RESTART_JOBSET_IGNORE_MAX_ACTION = Reason(
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
)
RESTART_JOB_ACTION = Reason(
    "RestartJobFailurePolicyAction", "applying RestartJob failure policy action"
)
RESTART_JOB_IGNORE_MAX_ACTION = Reason(
    "RestartJobAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobAndIgnoreMaxRestarts failure policy action",
)
RESTARTING_DEFAULT_FAILURE_POLICY = "DefaultFailurePolicy"
RESTARTING_JOBS_READY = Reason("JobsReady", "all jobs are ready")
RESTARTING_JOBSET_FAILED = Reason("JobSetFailed", "jobset failed")
RESTARTING_JOBSET_COMPLETED = Reason("JobSetCompleted", ALL_JOBS_COMPLETED.message)
RESTARTING_JOBSET_SUSPENDED = Reason("JobSetSuspended", SUSPENDED_JOBS.message)


def message_with_first_failed_job(message: str, job_name: str) -> str:
    """Mirror ``messageWithFirstFailedJob``: ``<message> (first failed job: <job>)``."""
    return f"{message} (first failed job: {job_name})"


def failure_policy_reason(rule_name: str | None) -> str:
    """The ``RestartingJobSet`` reason for a restart: ``FailurePolicy_<rule>`` or the default.

    Args:
        rule_name: The matched rule's name; ``None`` when no rule matched.
    """
    if rule_name is None:
        return RESTARTING_DEFAULT_FAILURE_POLICY
    return f"FailurePolicy_{rule_name}"


@dataclass(frozen=True, slots=True)
class ConditionSpec:
    """A condition to set, with the event upstream emits when it changes.

    Mirrors upstream ``conditionOpts`` (condition + event type). ``emit_event`` is off where
    upstream reports the change with a dedicated event instead (restarts).
    """

    type: str
    status: ConditionStatus
    reason: str
    message: str
    event_type: EventType = "Normal"
    emit_event: bool = True

    @classmethod
    def of(
        cls, type_: str, status: ConditionStatus, reason: Reason, event_type: EventType = "Normal"
    ) -> ConditionSpec:
        """Build from an upstream :class:`Reason` (reason and base message)."""
        return cls(type_, status, reason.reason, reason.message, event_type)


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """A Kubernetes event upstream emits on the JobSet once the status write succeeded."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ConditionsUpdate:
    """The conditions after :func:`update_condition`, and whether anything changed."""

    conditions: tuple[Condition, ...]
    changed: bool


_EXCLUSIVE = frozenset({STARTUP_POLICY_IN_PROGRESS, STARTUP_POLICY_COMPLETED})


def _exclusive(existing: str, new: str) -> bool:
    return existing != new and existing in _EXCLUSIVE and new in _EXCLUSIVE


def update_condition(
    conditions: Sequence[Condition], spec: ConditionSpec, now: str
) -> ConditionsUpdate:
    """Set one condition the way upstream ``updateCondition`` does.

    Args:
        conditions: The current ``status.conditions`` (not modified).
        spec: The condition to set.
        now: The RFC 3339 time used as ``lastTransitionTime`` of a new or flipped condition.

    Returns:
        The new condition list and whether it differs from the old one.
    """
    out: list[Condition] = []
    found = changed = False
    new = Condition(
        type=spec.type,
        status=spec.status,
        reason=spec.reason,
        message=spec.message,
        last_transition_time=now,
    )
    for cond in conditions:
        if cond.type == spec.type:
            found = True
            if cond.status != spec.status:
                out.append(new)
                changed = True
            elif cond.reason != spec.reason or cond.message != spec.message:
                kept = cond.last_transition_time
                out.append(new.model_copy(update={"last_transition_time": kept}))
                changed = True
            else:
                out.append(cond)
        elif _exclusive(cond.type, spec.type) and cond.status == "True" and spec.status == "True":
            out.append(cond.model_copy(update={"status": "False"}))
            changed = True
        else:
            out.append(cond)
    if not found and spec.status == "True":
        out.append(new)
        changed = True
    return ConditionsUpdate(tuple(out), changed)
