"""How a wait ends, as one value every way in shares (pure).

A :class:`Verdict` is what :meth:`jobset_core.lifecycle.Run.wait` returns, whoever waits (the
worker, the deferrable trigger, the sensor, the KFP step, ``jobsetctl run``): its ``kind``, the
JobSet's :class:`~jobset_core.outcome.Outcome` as last seen, and a message written here once,
so every path reports the same words. It is JSON-able (a trigger event carries it to the
task). :func:`error_for` turns a verdict that is not a success into the core's typed error,
and :func:`should_delete` decides what the one :data:`DeletePolicy` does with it.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from jobset_core.errors import (
    AdmissionTimeout,
    CreationFailed,
    JobSetFailed,
    JobSetGone,
    JobSetPreempted,
    JobSetRestarting,
    PodsCannotStart,
    PodsRefused,
    QueueRefused,
    RunEnded,
    WaitTimeout,
)
from jobset_core.outcome import PODS_CANNOT_START, Backend, Outcome
from jobset_core.policy.pod_create import PODS_REFUSED
from jobset_core.policy.queue import ADMISSION_TIMEOUT, Queue

__all__ = [
    "DELETE_POLICIES",
    "DeletePolicy",
    "Verdict",
    "VerdictKind",
    "error_for",
    "should_delete",
]

#: How a wait ended:
#:
#: * ``completed`` / ``failed``: the JobSet reached that terminal state (``failed`` also when
#:   its pods cannot start: reason :data:`~jobset_core.outcome.PODS_CANNOT_START`, or the API
#:   server refuses to create them: reason :data:`~jobset_core.policy.pod_create.PODS_REFUSED`);
#: * ``restarting``: it restarted and the waiter asked to hand restarts back;
#: * ``reached``: it reached a phase the waiter asked for (sensors);
#: * ``timeout``: the deadline passed first (reason ``AdmissionTimeout``: the wait for a
#:   queue's admission outlasted ``admission_timeout``);
#: * ``creation_failed``: a child object cannot be created;
#: * ``gone``: the JobSet was deleted, or replaced by a namesake;
#: * ``preempted``: its queue (Kueue) preempted it and the waiter asked to hand preemptions
#:   back (``on_preemption="retry"``);
#: * ``refused``: its queue will not run it (a deactivated Workload, a request no quota can
#:   hold, a LocalQueue that does not exist, or a preemption with ``on_preemption="fail"``).
VerdictKind = Literal[
    "completed",
    "failed",
    "restarting",
    "reached",
    "timeout",
    "creation_failed",
    "gone",
    "preempted",
    "refused",
]

#: When a finished run deletes its JobSet (everything it created goes with it):
#:
#: * ``never``: keep it, whatever happened;
#: * ``on_timeout``: delete what the waiter gave up on (timeout, a child that cannot be
#:   created, a run its queue will not run), keep completed and failed runs;
#: * ``on_success``: also delete completed runs; keep failed ones to inspect;
#: * ``always``: delete it whatever happened.
#:
#: A restart or a preemption handed back never deletes (the next try continues with the same
#: JobSet); a cancelled run (task killed, SIGTERM) is deleted by the cancel itself.
DeletePolicy = Literal["never", "on_timeout", "on_success", "always"]
DELETE_POLICIES: tuple[DeletePolicy, ...] = get_args(DeletePolicy)

_GAVE_UP: frozenset[str] = frozenset({"timeout", "creation_failed", "refused"})
_DELETES: dict[str, frozenset[str]] = {
    "never": frozenset(),
    "on_timeout": _GAVE_UP,
    "on_success": _GAVE_UP | {"completed"},
    "always": _GAVE_UP | {"completed", "failed"},
}
_ERRORS: dict[str, type[RunEnded]] = {
    "failed": JobSetFailed,
    "restarting": JobSetRestarting,
    "timeout": WaitTimeout,
    "creation_failed": CreationFailed,
    "gone": JobSetGone,
    "preempted": JobSetPreempted,
    "refused": QueueRefused,
}


class Verdict(BaseModel):
    """How one wait ended.

    Attributes:
        kind: See :data:`VerdictKind`.
        name: The JobSet.
        namespace: Its namespace.
        uid: Its UID (of the anchor for a native run).
        backend: Which backend runs it.
        outcome: The JobSet as last seen (``None`` when it was never seen).
        reason: A machine-readable reason (the condition's or event's reason, or
            ``Deleted``/``Replaced``/``Timeout``).
        message: What happened, in words (the same on every path).
        waited_seconds: How long the wait lasted.
        queue: What Kueue said of the run when the wait ended (``None``: no queue holds
            it): status, queues, reason, evictions (see :class:`~jobset_core.policy.queue.Queue`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: VerdictKind
    name: str
    namespace: str
    uid: str = ""
    backend: Backend
    outcome: Outcome | None = None
    reason: str = ""
    message: str = ""
    waited_seconds: float = 0.0
    queue: Queue | None = None

    @property
    def ok(self) -> bool:
        """Whether the wait ended as asked (completed, or reached a wanted phase)."""
        return self.kind in ("completed", "reached")

    @property
    def pods_cannot_start(self) -> bool:
        """Whether the run failed because its pods cannot start, or cannot even be created
        (the JobSet itself did not reach ``Failed``: it holds no result, and upstream has
        nothing more to do with it)."""
        return self.kind == "failed" and self.reason in (PODS_CANNOT_START, PODS_REFUSED)

    @property
    def result(self) -> Any:
        """The run's result (the coordinator's termination message), if any."""
        return self.outcome.result if self.outcome is not None else None

    def to_payload(self) -> dict[str, Any]:
        """The JSON-able form (a trigger event's payload)."""
        return self.model_dump(mode="json")


def error_for(verdict: Verdict) -> RunEnded | None:
    """The core's error for a verdict that is not :attr:`Verdict.ok` (``None`` when it is)."""
    if verdict.pods_cannot_start:
        refused = verdict.reason == PODS_REFUSED
        return PodsRefused(verdict) if refused else PodsCannotStart(verdict)
    if verdict.kind == "timeout" and verdict.reason == ADMISSION_TIMEOUT:
        return AdmissionTimeout(verdict)
    cls = _ERRORS.get(verdict.kind)
    return cls(verdict) if cls is not None else None


def should_delete(policy: DeletePolicy, verdict: Verdict) -> bool:
    """Whether ``policy`` deletes the JobSet once its wait ended as ``verdict`` says.

    Raises:
        ValueError: an unknown policy.
    """
    if policy not in _DELETES:
        raise ValueError(f"unknown delete policy {policy!r}; use one of {', '.join(_DELETES)}")
    return verdict.kind in _DELETES[policy]
