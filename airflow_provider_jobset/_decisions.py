"""What the operator does with an outcome, decided without I/O (pure functions).

The operator's shell (``operators.py``) performs the effects: returning the result, raising a
retryable error when the JobSet restarted, failing without retry when it failed for good,
deleting it according to the delete policy.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Literal

from jobset_core.models import JobSet
from jobset_core.outcome import Outcome, Phase

__all__ = [
    "MAX_DERIVED_RETRIES",
    "DeletePolicy",
    "RetriesPlan",
    "Verdict",
    "deadline",
    "judge",
    "plan_retries",
    "should_delete",
]

DeletePolicy = Literal["always", "on_success", "never"]
DELETE_POLICIES: tuple[DeletePolicy, ...] = ("always", "on_success", "never")


@dataclass(frozen=True)
class Verdict:
    """How a try ends.

    Attributes:
        kind: ``success`` (return the result), ``retry`` (the JobSet restarted: end the try
            with a retryable error, the next try reattaches), ``fail`` (terminal failure: no
            retry), ``wait`` (not finished: keep waiting).
        message: What to tell the user.
    """

    kind: Literal["success", "retry", "fail", "wait"]
    message: str = ""


def _failed_job(outcome: Outcome) -> str:
    return f" (failed child Job: {outcome.failed_job})" if outcome.failed_job else ""


def judge(outcome: Outcome) -> Verdict:
    """Turn an outcome into the end of a try."""
    where = f"JobSet {outcome.namespace}/{outcome.name}"
    if outcome.terminal_state == "Completed":
        return Verdict("success", f"{where} completed ({outcome.reason or 'Completed'})")
    if outcome.terminal_state == "Failed":
        reason = outcome.reason or "Failed"
        detail = f": {outcome.message}" if outcome.message else ""
        return Verdict("fail", f"{where} failed for good: {reason}{detail}{_failed_job(outcome)}")
    if outcome.phase is Phase.RESTARTING:
        reason = outcome.reason or "RestartJobSet"
        detail = f": {outcome.message}" if outcome.message else ""
        return Verdict(
            "retry",
            f"{where} is restarting (restart {outcome.restarts}){_failed_job(outcome)}, "
            f"{reason}{detail}; the next try continues with the restarted JobSet",
        )
    return Verdict("wait", f"{where} is {outcome.phase.value}")


def should_delete(policy: DeletePolicy, verdict: Verdict) -> bool:
    """Whether to delete the JobSet once its try has ended this way.

    A restart (``retry``) never deletes: the next try continues with the same JobSet.
    """
    if verdict.kind in ("retry", "wait"):
        return False
    if policy == "always":
        return True
    return policy == "on_success" and verdict.kind == "success"


#: The most task retries derived from ``failurePolicy.maxRestarts`` (``retries`` set by the user
#: is taken as it is): a larger maxRestarts is a sentinel for "many", not a plan of tries.
MAX_DERIVED_RETRIES = 1000


@dataclass(frozen=True)
class RetriesPlan:
    """The task's retries, reconciled with the JobSet's restart budget.

    Attributes:
        retries: The retries to give the task.
        problem: A message when the user's retries cannot mirror the restarts.
    """

    retries: int | None
    problem: str | None = None


def max_restarts(jobset: JobSet) -> int | None:
    """``failurePolicy.maxRestarts`` (0 when there is no failure policy), or ``None`` when a
    rule restarts without counting (``...AndIgnoreMaxRestarts``): the restarts are unbounded."""
    policy = jobset.spec.failure_policy
    if policy is None:
        return 0
    for rule in policy.rules or []:
        if str(rule.action).endswith("AndIgnoreMaxRestarts"):
            return None
    return policy.max_restarts or 0


def plan_retries(restarts: int | None, retries: int | None) -> RetriesPlan:
    """Each restart of the JobSet ends one try, so ``maxRestarts`` restarts need as many retries.

    Args:
        restarts: ``maxRestarts`` (``None``: unbounded restarts).
        retries: What the user set (``None``: nothing).
    """
    if retries is None:
        if restarts is not None and restarts < 0:
            return RetriesPlan(
                0,
                f"failurePolicy.maxRestarts={restarts} is below 0: the controller never "
                "restarts the JobSet (as with 0), so the task gets retries=0",
            )
        if restarts is not None and restarts > MAX_DERIVED_RETRIES:
            return RetriesPlan(
                MAX_DERIVED_RETRIES,
                f"failurePolicy.maxRestarts={restarts} would give as many task retries; the "
                f"task gets retries={MAX_DERIVED_RETRIES} (set retries to allow more)",
            )
        return RetriesPlan(restarts)
    if restarts is not None and retries < restarts:
        return RetriesPlan(
            retries,
            f"retries={retries} is less than the JobSet's failurePolicy.maxRestarts={restarts}: "
            f"every restart ends a try, so the task fails after {retries} restart(s) while the "
            f"JobSet could still restart; set retries={restarts} (or leave retries unset)",
        )
    return RetriesPlan(retries)


def deadline(
    now: _dt.datetime,
    timeout: _dt.timedelta | None,
    execution_timeout: _dt.timedelta | None,
    started: _dt.datetime | None = None,
) -> _dt.datetime | None:
    """The moment the try must end: the earliest of ``now + timeout`` and
    ``started + execution_timeout`` (``started`` defaults to ``now``)."""
    ends = []
    if timeout is not None:
        ends.append(now + timeout)
    if execution_timeout is not None:
        ends.append((started or now) + execution_timeout)
    return min(ends) if ends else None
