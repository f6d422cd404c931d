"""Airflow-only decisions, without I/O (pure functions): how many retries a JobSet task
needs.

How a run ends (its verdict, the delete policy) is decided by the core
(:mod:`jobset_core.lifecycle`), the same for every way in.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobset_core.models import JobSet

__all__ = ["MAX_DERIVED_RETRIES", "RetriesPlan", "max_restarts", "plan_retries"]


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
