"""The failure policy: what a failed child Job does to its JobSet.

Mirrors ``pkg/controllers/failure_policy.go`` (v0.12.0, RestartJob gate off):

* no ``failurePolicy``: the first failure fails the JobSet (``FailedJobs``);
* otherwise the rules are tried in order; a rule matches a failed Job when its
  ``onJobFailureReasons`` (empty: any) holds the Job's ``Failed`` reason, one of its
  ``onJobFailureMessagePatterns`` (empty: any; invalid patterns skipped) matches the message,
  and the Job's replicated job is among ``targetReplicatedJobs`` (empty: all). The first rule
  with a match wins, applied to the earliest-failing matching Job;
* no rule matches: ``RestartJobSet`` on the earliest-failing Job;
* ``RestartJobSet`` fails the JobSet (``ReachedMaxRestarts``) once ``restartsCountTowardsMax
  >= maxRestarts``, else bumps ``restarts`` and ``restartsCountTowardsMax``;
  ``RestartJobSetAndIgnoreMaxRestarts`` bumps ``restarts`` only; ``FailJobSet`` fails.

``RestartJob``/``RestartJobAndIgnoreMaxRestarts`` need upstream's alpha ``RestartJob`` gate
(off by default, so the webhook rejects them and the controller errors): they are reported
as ``Unsupported`` and change nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jobset_core.models import FailurePolicyRule, JobSet, JobSetStatus
from jobset_core.models.jobset import FailurePolicyAction
from jobset_core.policy import conditions as c
from jobset_core.policy._re2 import any_match
from jobset_core.policy.child_jobs import ChildJob

__all__ = [
    "DEFAULT_FAILURE_POLICY_ACTION",
    "FailedJobRef",
    "FailureDecision",
    "FailureOutcome",
    "RuleMatch",
    "evaluate_failure",
    "find_first_failed_job",
    "find_first_failed_policy_rule_and_job",
    "rule_is_applicable",
]

FailureOutcome = Literal["Fail", "Restart", "Unsupported"]

#: ``defaultFailurePolicyRuleAction``: what happens when no rule matches.
DEFAULT_FAILURE_POLICY_ACTION: FailurePolicyAction = "RestartJobSet"

_RESTART_EVENTS: dict[str, c.Reason] = {
    "RestartJobSet": c.RESTART_JOBSET_ACTION,
    "RestartJobSetAndIgnoreMaxRestarts": c.RESTART_JOBSET_IGNORE_MAX_ACTION,
}


@dataclass(frozen=True, slots=True)
class FailedJobRef:
    """The failed Job a decision was made on (upstream's "first failed job")."""

    name: str
    replicated_job: str | None
    reason: str
    message: str
    failed_at: str | None

    @classmethod
    def of(cls, job: ChildJob) -> FailedJobRef:
        """Describe ``job`` by its ``Failed`` condition."""
        failure = job.failure
        return cls(
            name=job.name,
            replicated_job=job.replicated_job,
            reason=failure.reason if failure else "",
            message=failure.message if failure else "",
            failed_at=failure.last_transition_time if failure else None,
        )


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The first failure-policy rule matching a failed Job, and that Job."""

    index: int
    rule: FailurePolicyRule
    job: ChildJob


@dataclass(frozen=True, slots=True)
class FailureDecision:
    """What the failure policy does with the current attempt's failed Jobs.

    Attributes:
        outcome: ``Fail`` (terminal), ``Restart`` (new attempt) or ``Unsupported``.
        action: The action applied (the default ``RestartJobSet`` when no rule matched);
            ``None`` when the JobSet has no failure policy.
        rule_name: The matched rule's name (``None``: no rule matched or no policy).
        rule_index: The matched rule's position in ``failurePolicy.rules``.
        failed_job: The Job the decision is about.
        restarts: ``status.restarts`` after the decision.
        restarts_count_towards_max: ``status.restartsCountTowardsMax`` after the decision.
        condition: ``Failed=True`` or ``RestartingJobSet=True`` to set (``None``: unsupported).
        event: The Warning event upstream emits for a restart (``None`` otherwise: a failure
            is reported by the condition's own event).
    """

    outcome: FailureOutcome
    action: FailurePolicyAction | None
    rule_name: str | None
    rule_index: int | None
    failed_job: FailedJobRef
    restarts: int
    restarts_count_towards_max: int
    condition: c.ConditionSpec | None
    event: c.PlannedEvent | None

    @property
    def terminal(self) -> bool:
        """Whether the JobSet fails."""
        return self.outcome == "Fail"


def find_first_failed_job(failed: Sequence[ChildJob]) -> ChildJob | None:
    """Mirror ``findFirstFailedJob``: the Job whose ``Failed`` condition is oldest.

    Ties keep the earlier Job of ``failed``; a missing time counts as the earliest.
    """
    first: ChildJob | None = None
    first_time = None
    for job in failed:
        failure = job.failure
        if failure is None:
            continue
        if first_time is None or failure.time < first_time:
            first, first_time = job, failure.time
    return first


def rule_is_applicable(rule: FailurePolicyRule, job: ChildJob) -> bool:
    """Mirror ``ruleIsApplicable``: reason, message pattern and target replicated job match."""
    failure = job.failure
    reason = failure.reason if failure else ""
    message = failure.message if failure else ""
    reasons = rule.on_job_failure_reasons or []
    if reasons and reason not in reasons:
        return False
    patterns = rule.on_job_failure_message_patterns or []
    if patterns and not any_match(patterns, message):
        return False
    if job.replicated_job is None:
        return False
    targets = rule.target_replicated_jobs or []
    return not targets or job.replicated_job in targets


def find_first_failed_policy_rule_and_job(
    rules: Sequence[FailurePolicyRule], failed: Sequence[ChildJob]
) -> RuleMatch | None:
    """Mirror ``findFirstFailedPolicyRuleAndJob``: first matching rule, earliest matching Job."""
    for index, rule in enumerate(rules):
        matching = [job for job in failed if job.failure and rule_is_applicable(rule, job)]
        job = find_first_failed_job(matching)
        if job is not None:
            return RuleMatch(index, rule, job)
    return None


def _counters(status: JobSetStatus | None) -> tuple[int, int]:
    if status is None:
        return 0, 0
    return status.restarts or 0, status.restarts_count_towards_max or 0


@dataclass(frozen=True, slots=True)
class _Why:
    """Which action applies, and because of which rule."""

    action: FailurePolicyAction | None
    match: RuleMatch | None = None

    def decide(
        self,
        outcome: FailureOutcome,
        job: ChildJob,
        counters: tuple[int, int],
        condition: c.ConditionSpec | None = None,
        event: c.PlannedEvent | None = None,
    ) -> FailureDecision:
        return FailureDecision(
            outcome=outcome,
            action=self.action,
            rule_name=self.match.rule.name if self.match else None,
            rule_index=self.match.index if self.match else None,
            failed_job=FailedJobRef.of(job),
            restarts=counters[0],
            restarts_count_towards_max=counters[1],
            condition=condition,
            event=event,
        )


def _fail(why: _Why, reason: c.Reason, job: ChildJob, counters: tuple[int, int]) -> FailureDecision:
    """Mirror ``setJobSetFailedCondition`` with the first failed Job in the message."""
    message = c.message_with_first_failed_job(reason.message, job.name)
    condition = c.ConditionSpec(c.FAILED, "True", reason.reason, message, "Warning")
    return why.decide("Fail", job, counters, condition)


def _restart(why: _Why, job: ChildJob, counters: tuple[int, int]) -> FailureDecision:
    """Mirror ``failurePolicyRecreateAll``: a new attempt, ``RestartingJobSet=True``."""
    event = _RESTART_EVENTS[str(why.action)]
    message = c.message_with_first_failed_job(event.message, job.name)
    reason = c.failure_policy_reason((why.match.rule.name or "") if why.match else None)
    condition = c.ConditionSpec(c.RESTARTING, "True", reason, message, "Warning", False)
    planned = c.PlannedEvent("Warning", event.reason, message)
    return why.decide("Restart", job, counters, condition, planned)


def _apply(jobset: JobSet, why: _Why, job: ChildJob) -> FailureDecision:
    """Mirror ``applyFailurePolicyRuleAction`` and the action appliers."""
    restarts, towards_max = _counters(jobset.status)
    if why.action == "FailJobSet":
        return _fail(why, c.FAIL_JOBSET_ACTION, job, (restarts, towards_max))
    if why.action == "RestartJobSetAndIgnoreMaxRestarts":
        return _restart(why, job, (restarts + 1, towards_max))
    if why.action != "RestartJobSet":
        return why.decide("Unsupported", job, (restarts, towards_max))
    policy = jobset.spec.failure_policy
    max_restarts = (policy.max_restarts if policy else None) or 0
    if towards_max >= max_restarts:
        return _fail(why, c.REACHED_MAX_RESTARTS, job, (restarts, towards_max))
    return _restart(why, job, (restarts + 1, towards_max + 1))


def evaluate_failure(jobset: JobSet, failed: Sequence[ChildJob]) -> FailureDecision | None:
    """Decide what the failed Jobs do to the JobSet; mirrors ``executeFailurePolicy``.

    Args:
        jobset: The (defaulted) JobSet, with its current ``status``.
        failed: The current attempt's Jobs with ``Failed=True``.

    Returns:
        The decision, or ``None`` when no Job has failed.
    """
    first = find_first_failed_job(failed)
    if first is None:
        return None
    policy = jobset.spec.failure_policy
    if policy is None:
        return _fail(_Why(None), c.FAILED_JOBS, first, _counters(jobset.status))
    match = find_first_failed_policy_rule_and_job(policy.rules or [], failed)
    if match is None:
        return _apply(jobset, _Why(DEFAULT_FAILURE_POLICY_ACTION), first)
    return _apply(jobset, _Why(match.rule.action, match), match.job)
