"""Airflow-only decisions, without I/O (pure functions): how many retries a JobSet task
needs, and how long a trigger's event waits before it resumes its task.

How a run ends (its verdict, the delete policy) is decided by the core
(:mod:`jobset_core.lifecycle`), the same for every way in.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobset_core.models import JobSet

__all__ = [
    "LOOK_AGAIN",
    "MAX_DERIVED_RETRIES",
    "RESUME_MARGIN",
    "ResumeGuard",
    "RetriesPlan",
    "max_restarts",
    "plan_retries",
]


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


#: The ``kind`` of the event that sends a deferrable sensor to look again (no JobSet it
#: watches existed).
LOOK_AGAIN = "look_again"

#: Added to ``[workers] min_heartbeat_interval`` for a :class:`ResumeGuard`'s window: the
#: deferring process still has to exit after it chose to defer, and the scheduler to take in
#: that exit.
RESUME_MARGIN = 2.0


@dataclass(frozen=True)
class ResumeGuard:
    """How long a trigger's event waits before it may resume its task.

    Airflow's worker learns that a task process which deferred has exited at its next check,
    up to ``[workers] min_heartbeat_interval`` (5 s) later: the process closes its sockets a
    moment before it ends, and the worker, seeing them closed, sleeps out the interval. If
    the trigger fires within that time, the task resumes in a new process before the old
    one's exit is reported, and the scheduler takes that late report for the end of the
    resumed try and fails it ("finished with state success, but the task instance's state
    attribute is running"). So the event of a run that ends that soon waits out the window
    from the moment the task deferred; a run that ends later is not held. Nothing waits when
    the trigger runs in the process that deferred (``dag.test()``): no exit to be seen.

    Attributes:
        deferred_at: When the task deferred (epoch seconds, the worker's clock).
        window: The seconds from then that an event waits; also the most it waits, whatever
            the clocks of the worker and the triggerer say.
        deferred_by: The process that deferred (``host:pid``).
    """

    deferred_at: float
    window: float
    deferred_by: str

    def hold(self, now: float, here: str) -> float:
        """Seconds the event waits, fired at ``now`` by the process ``here``."""
        if here == self.deferred_by:
            return 0.0
        return min(max(self.deferred_at + self.window - now, 0.0), self.window)
