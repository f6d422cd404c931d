"""What Kueue says of a run (pure): queued and why, admitted with which flavors, evicted how
often, or refused for good.

Read from the run's Kueue ``Workload`` (``kueue.x-k8s.io/v1beta2``, Kueue v0.17) when the
waiter may read it; otherwise from the JobSet alone (``spec.suspend``, the queue label, its
``Suspended`` condition) and the Events Kueue writes on it. Nothing here performs I/O or reads
a clock: times are epoch seconds taken from the objects.

What a Workload says (Kueue v0.17.0, ``apis/kueue/v1beta2/workload_types.go`` and
``pkg/controller/core/workload_controller.go``):

======================================  ===============================================
``QuotaReserved=False``                 queued: reason ``Pending`` (the flavor assigner's
                                        words: ``insufficient unused quota ...`` waits;
                                        ``... > maximum capacity (...)`` never fits the
                                        ClusterQueue as it is), ``Inadmissible`` (``LocalQueue
                                        X doesn't exist``, ``... is inactive``), ``Waiting``
``QuotaReserved=True, Admitted=False``  quota reserved, admission checks pending
``Admitted=True``                       admitted (its ``lastTransitionTime``); the JobSet is
                                        unsuspended with the flavors' node selectors
``Evicted=True``                        admission withdrawn: ``Preempted``,
                                        ``PodsReadyTimeout``, ``Deactivated``, ...; the
                                        JobSet is suspended again and requeued
``spec.active: false``                  deactivated (requeuing limit, maximum execution time,
                                        or by hand): never runs again unless reactivated
``status.schedulingStats.evictions``    eviction counts per reason
``accumulatedPastExecutionTimeSeconds``  seconds admitted in earlier admit/evict cycles
======================================  ===============================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from jobset_core import labels as L
from jobset_core.policy._time import parse_time

__all__ = [
    "ADMISSION_TIMEOUT",
    "Queue",
    "QueueStatus",
    "kueue_event",
    "read_queue",
]

#: The verdict reason of a run whose wait for admission outlasted ``admission_timeout``.
ADMISSION_TIMEOUT = "AdmissionTimeout"

QueueStatus = Literal["queued", "admitted", "refused"]
Source = Literal["workload", "jobset"]

#: Reasons of the Events Kueue's job reconciler writes on the JobSet (all ``Normal``).
KUEUE_EVENT_REASONS = frozenset(
    {"CreatedWorkload", "Started", "Stopped", "Suspended", "UpdatedWorkload", "DeletedWorkload"}
)
#: The flavor assigner's words, per flavor it tried: a request above what the ClusterQueue (and
#: its cohort) can ever lend there (``insufficient quota ... > maximum capacity (...)``), or
#: quota that is only in use now (``insufficient unused quota``: waiting helps).
_NEVER_FITS = re.compile(r">\s*maximum capacity")
_MAY_FIT = re.compile(r"insufficient unused quota")
#: ``Inadmissible`` words for a queue that is missing, not one that is merely stopped.
_MISSING_QUEUE = re.compile(r"(LocalQueue|ClusterQueue) \S+ doesn't exist")


class Queue(BaseModel):
    """A run as Kueue sees it at one observation.

    Attributes:
        status: ``queued`` (waiting for admission: first, or again after an eviction),
            ``admitted`` (running), ``refused`` (Kueue will not run it: deactivated, a
            request no quota can ever hold, a queue that does not exist).
        local_queue: The LocalQueue (the label, or the Workload's ``spec.queueName``).
        cluster_queue: The ClusterQueue that admitted it (when it was).
        reason: Kueue's reason for the status (``Pending``, ``Inadmissible``,
            ``Preempted``, ``Deactivated``, ...; ``Admitted`` when admitted).
        message: Kueue's words.
        flavors: ``pod set: resource=flavor, ...`` per pod set, once admitted.
        since: Epoch seconds the status began: the admission, or the eviction that requeued
            the run (``None`` for a first wait: it began when the run was submitted).
        past_running: Seconds the run was admitted in earlier admit/evict cycles.
        evictions: Evictions so far (every reason).
        preemptions: Evictions to make room for another workload.
        last_eviction: The last eviction's reason and words (``""``: none).
        source: ``workload`` (its Workload was read), ``jobset`` (only the JobSet and
            Kueue's Events on it: the identity may not read Workloads).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: QueueStatus
    local_queue: str = ""
    cluster_queue: str = ""
    reason: str = ""
    message: str = ""
    flavors: tuple[str, ...] = ()
    since: float | None = None
    past_running: float = 0.0
    evictions: int = 0
    preemptions: int = 0
    last_eviction: str = ""
    source: Source = "workload"

    @property
    def refused(self) -> bool:
        """Whether Kueue will not run it."""
        return self.status == "refused"

    def running_seconds(self, now: float) -> float:
        """Seconds the run has been admitted in all, at ``now``."""
        current = max(0.0, now - self.since) if self.status == "admitted" and self.since else 0.0
        return self.past_running + current

    def shown(self) -> tuple[Any, ...]:
        """What a user sees of it (a progress line is written when this changes)."""
        return (self.status, self.local_queue, self.reason, self.message, self.evictions)

    def line(self) -> str:
        """One line for a log: where it waits and why, or what admitted it."""
        where = f"LocalQueue {self.local_queue}" if self.local_queue else "its queue"
        if self.cluster_queue:
            where += f" (ClusterQueue {self.cluster_queue})"
        words = f"{self.reason}: {self.message}" if self.message else self.reason
        if self.status == "admitted":
            text = f"admitted by {where}"
            if self.flavors:
                text += f" with flavors {'; '.join(self.flavors)}"
        elif self.status == "refused":
            text = f"refused by {where}: {words}"
        else:
            text = f"queued in {where}" + (f": {words}" if words else "")
        if self.evictions:
            text += f"; evicted {self.evictions}x ({self.preemptions} preempted)"
        if self.source == "jobset":
            text += " [read from the JobSet and Kueue's Events: Workloads cannot be read]"
        return text


# ------------------------------------------------------------------------------ reading


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = _mapping(obj.get("status")).get("conditions")
    out: dict[str, Mapping[str, Any]] = {}
    for cond in found if isinstance(found, list) else []:
        if isinstance(cond, Mapping) and isinstance(cond.get("type"), str):
            out[cond["type"]] = cond
    return out


def _true(cond: Mapping[str, Any] | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def _epoch(value: Any) -> float | None:
    parsed = parse_time(value if isinstance(value, str) else None)
    return parsed.timestamp() if parsed is not None else None


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _mapping(_mapping(_mapping(obj).get("metadata")).get("labels"))


def _flavors(workload: Mapping[str, Any]) -> tuple[str, ...]:
    admission = _mapping(_mapping(workload.get("status")).get("admission"))
    out = []
    for assignment in admission.get("podSetAssignments") or []:
        if not isinstance(assignment, Mapping):
            continue
        flavors = _mapping(assignment.get("flavors"))
        shown = ", ".join(f"{res}={flavor}" for res, flavor in sorted(flavors.items()))
        if shown:
            out.append(f"{assignment.get('name')}: {shown}")
    return tuple(out)


def _evictions(workload: Mapping[str, Any]) -> tuple[int, int]:
    stats = _mapping(_mapping(workload.get("status")).get("schedulingStats"))
    evictions = preemptions = 0
    for item in stats.get("evictions") or []:
        if not isinstance(item, Mapping):
            continue
        count = item.get("count")
        number = count if isinstance(count, int) and not isinstance(count, bool) else 0
        evictions += number
        if item.get("reason") == "Preempted":
            preemptions += number
    return evictions, preemptions


def _words(cond: Mapping[str, Any] | None) -> tuple[str, str]:
    if cond is None:
        return "", ""
    return str(cond.get("reason") or ""), str(cond.get("message") or "")


def _from_workload(workload: Mapping[str, Any]) -> Queue:
    spec, status = _mapping(workload.get("spec")), _mapping(workload.get("status"))
    conds = _conditions(workload)
    evicted = conds.get("Evicted")
    evictions, preemptions = _evictions(workload)
    if _true(evicted) and not evictions:
        evictions = 1  # an eviction Kueue has not counted yet
        preemptions = int(_words(evicted)[0] == "Preempted")
    past = status.get("accumulatedPastExecutionTimeSeconds")
    last = ": ".join(w for w in _words(evicted) if w) if evicted is not None else ""
    common: dict[str, Any] = {
        "local_queue": str(spec.get("queueName") or _labels(workload).get(L.KUEUE_QUEUE) or ""),
        "cluster_queue": str(_mapping(status.get("admission")).get("clusterQueue") or ""),
        "past_running": float(past) if isinstance(past, (int, float)) else 0.0,
        "evictions": evictions,
        "preemptions": preemptions,
        "last_eviction": last,
    }
    if spec.get("active") is False:
        reason, message = _deactivation(*_words(conds.get("DeactivationTarget") or evicted))
        return Queue(
            status="refused",
            reason=reason,
            message=message or "the Workload was deactivated (spec.active: false)",
            **common,
        )
    admitted = conds.get("Admitted")
    if _true(admitted) and not _true(evicted):
        assert admitted is not None
        return Queue(
            status="admitted",
            reason="Admitted",
            message=str(admitted.get("message") or ""),
            flavors=_flavors(workload),
            since=_epoch(admitted.get("lastTransitionTime")),
            **common,
        )
    reserved = conds.get("QuotaReserved")
    reason, message = _words(reserved)
    if not _true(reserved) and reason == "Pending" and _never_fits(message):
        return Queue(status="refused", reason="ExceedsMaximumQuota", message=message, **common)
    if not _true(reserved) and reason == "Inadmissible" and _MISSING_QUEUE.search(message):
        return Queue(status="refused", reason=reason, message=message, **common)
    if _true(evicted):  # admission withdrawn: requeued from then on
        assert evicted is not None
        since = _epoch(evicted.get("lastTransitionTime"))
        judged = _epoch(_mapping(reserved).get("lastTransitionTime")) or 0.0
        if _true(reserved) or judged < (since or 0.0):  # the eviction is the newest news
            reason, message = _words(evicted)
        return Queue(status="queued", reason=reason, message=message, since=since, **common)
    if _true(reserved):  # held, not admitted: admission checks (or a delayed topology)
        reason, message = _words(admitted)
        return Queue(
            status="queued",
            reason=reason or "QuotaReserved",
            message=message or "quota reserved, waiting for admission checks",
            **common,
        )
    return Queue(status="queued", reason=reason, message=message, **common)


def _never_fits(message: str) -> bool:
    """Whether a pod set of the Workload can never fit its ClusterQueue: its part of the
    message (``couldn't assign flavors to pod set P: ...``, parts joined by ``; ``) names a
    request above the maximum capacity and no flavor where quota is only in use now."""
    return any(
        _NEVER_FITS.search(part) and not _MAY_FIT.search(part) for part in message.split("; ")
    )


def _deactivation(reason: str, message: str) -> tuple[str, str]:
    """Kueue's words for a deactivation: the cause it names (``DeactivatedDueTo<cause>``, or
    the ``DeactivationTarget`` condition's reason), else ``Deactivated``."""
    cause = reason.removeprefix("DeactivatedDueTo")
    if reason.startswith("DeactivatedDueTo") and cause:
        return cause, message
    return reason or "Deactivated", message


def kueue_event(event: Mapping[str, Any]) -> bool:
    """Whether an Event is one Kueue's job reconciler wrote about a JobSet."""
    about = _mapping(event.get("involvedObject"))
    return about.get("kind") == "JobSet" and event.get("reason") in KUEUE_EVENT_REASONS


def _event_time(event: Mapping[str, Any]) -> float | None:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        found = _epoch(event.get(key))
        if found is not None:
            return found
    return None


def _count(event: Mapping[str, Any]) -> int:
    count = event.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def _from_jobset(jobset: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> Queue:
    """The queue read without the Workload: the JobSet's suspension, and Kueue's Events."""
    local = str(_labels(jobset).get(L.KUEUE_QUEUE) or "")
    uid = str(_mapping(jobset.get("metadata")).get("uid") or "")
    mine = [
        e
        for e in events
        if kueue_event(e) and _mapping(e.get("involvedObject")).get("uid") in (None, "", uid)
    ]
    mine.sort(key=lambda e: _event_time(e) or 0.0)
    stopped = [e for e in mine if e.get("reason") == "Stopped"]
    evictions = sum(_count(e) for e in stopped)
    preemptions = sum(_count(e) for e in stopped if str(e.get("message", "")).startswith("Preempt"))
    last = stopped[-1] if stopped else None
    common: dict[str, Any] = {
        "local_queue": local,
        "evictions": evictions,
        "preemptions": preemptions,
        "last_eviction": str(last.get("message") or "") if last is not None else "",
        "source": "jobset",
    }
    suspended = _mapping(jobset.get("spec")).get("suspend") is True
    if not suspended:
        resumed = _conditions(jobset).get("Suspended")
        since = _epoch(resumed.get("lastTransitionTime")) if resumed is not None else None
        started = [e for e in mine if e.get("reason") == "Started"]
        message = str(started[-1].get("message") or "") if started else ""
        return Queue(status="admitted", reason="Admitted", message=message, since=since, **common)
    if last is not None and "deactivated" in str(last.get("message") or "").lower():
        return Queue(
            status="refused", reason="Deactivated", message=str(last.get("message")), **common
        )
    if last is not None:
        since = _event_time(last)
        return Queue(
            status="queued",
            reason="Evicted",
            message=str(last.get("message")),
            since=since,
            **common,
        )
    return Queue(status="queued", reason="", message="", **common)


def read_queue(
    jobset: Mapping[str, Any] | None,
    workload: Mapping[str, Any] | None,
    events: Iterable[Mapping[str, Any]] = (),
    *,
    workload_readable: bool = True,
) -> Queue | None:
    """What Kueue says of a run (``None``: the run is not Kueue's).

    Args:
        jobset: The run's JobSet (as the API or the observer holds it).
        workload: Its Workload, when one was seen.
        events: Events about the run (Kueue's ``Normal`` Events on the JobSet are read when
            the Workload cannot be).
        workload_readable: Whether the waiter may read Workloads (``False``: read the JobSet
            and the Events instead).
    """
    if workload is not None:
        return _from_workload(workload)
    if jobset is None or not _labels(jobset).get(L.KUEUE_QUEUE):
        return None
    if not workload_readable:
        return _from_jobset(jobset, list(events))
    if _mapping(jobset.get("spec")).get("suspend") is True:
        # Kueue's webhook suspended it at creation; its Workload is on its way.
        return Queue(status="queued", local_queue=str(_labels(jobset).get(L.KUEUE_QUEUE)))
    return None
