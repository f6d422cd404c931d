"""Whether a JobSet has finished, how, and when a finished one is deleted (TTL).

Mirrors ``jobSetFinished``/``jobSetFinishTime`` (``pkg/controllers/jobset_controller.go``,
``ttl_after_finished.go``): a JobSet is finished when a ``Completed`` or ``Failed`` condition
is ``True``; the first such condition gives the outcome and its ``lastTransitionTime`` the
finish time. With ``ttlSecondsAfterFinished`` the JobSet is deleted (Foreground, with UID and
resourceVersion preconditions) once ``finish + ttl <= now``; until then the reconcile is
requeued for the remaining time.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Literal

from jobset_core.models import JobSet, JobSetStatus
from jobset_core.policy import conditions as c
from jobset_core.policy._time import format_time, parse_time

__all__ = ["TerminalPhase", "TerminalStatus", "TtlDecision", "evaluate_ttl", "terminal_status"]

TerminalPhase = Literal["Completed", "Failed", "Running"]


@dataclass(frozen=True, slots=True)
class TerminalStatus:
    """The outcome a JobSet status shows.

    Attributes:
        state: ``Completed``, ``Failed`` or ``Running`` (not finished, suspended included).
        reason: The finishing condition's reason (empty while running).
        message: The finishing condition's message (empty while running).
        finished_at: The finishing condition's ``lastTransitionTime``.
    """

    state: TerminalPhase
    reason: str = ""
    message: str = ""
    finished_at: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the JobSet completed or failed."""
        return self.state != "Running"


def terminal_status(status: JobSetStatus | None) -> TerminalStatus:
    """Read the outcome from a JobSet status; mirrors ``jobSetFinished``.

    A ``terminalState`` written without a matching condition (not something upstream does)
    still counts, with empty reason and message.

    Args:
        status: ``JobSet.status`` (``None`` for a JobSet never reconciled).

    Returns:
        The outcome.
    """
    if status is None:
        return TerminalStatus("Running")
    for cond in status.conditions or []:
        if cond.type in (c.COMPLETED, c.FAILED) and cond.status == "True":
            state: TerminalPhase = "Completed" if cond.type == c.COMPLETED else "Failed"
            return TerminalStatus(state, cond.reason, cond.message, cond.last_transition_time)
    if status.terminal_state in ("Completed", "Failed"):
        return TerminalStatus(status.terminal_state)
    return TerminalStatus("Running")


@dataclass(frozen=True, slots=True)
class TtlDecision:
    """What ``ttlSecondsAfterFinished`` asks of a finished JobSet right now.

    Attributes:
        ttl_seconds: ``spec.ttlSecondsAfterFinished``.
        expire_at: Finish time + TTL (``None`` when the finish time is unknown: upstream
            then reports an error and does nothing).
        delete_jobset: Delete the JobSet now (Foreground propagation).
        requeue_after_seconds: Check again after this long (``None`` when deleting or unknown).
    """

    ttl_seconds: int
    expire_at: str | None
    delete_jobset: bool
    requeue_after_seconds: float | None


def evaluate_ttl(jobset: JobSet, now: _dt.datetime) -> TtlDecision | None:
    """Mirror ``executeTTLAfterFinishedPolicy`` for a finished JobSet.

    Args:
        jobset: The JobSet.
        now: The current time (aware).

    Returns:
        The decision, or ``None`` without a TTL or when the JobSet has not finished.
    """
    ttl = jobset.spec.ttl_seconds_after_finished
    outcome = terminal_status(jobset.status)
    if ttl is None or not outcome.finished:
        return None
    finished_at = parse_time(outcome.finished_at)
    if finished_at is None:
        return TtlDecision(ttl, None, False, None)
    expire_at = finished_at + _dt.timedelta(seconds=ttl)
    remaining = (expire_at - now).total_seconds()
    deleting = jobset.metadata.deletion_timestamp is not None
    if remaining <= 0 and not deleting:
        return TtlDecision(ttl, format_time(expire_at), True, None)
    return TtlDecision(ttl, format_time(expire_at), False, remaining)
