"""The outcome rules: what a JobSet-shaped status means, as pure functions.

:func:`build_outcome` reads an :class:`~jobset_core.outcome.Outcome` (phase, reason, counts,
duration) from a JobSet with a JobSet-shaped ``status`` (the controller's, or the one the
native backend keeps); :func:`restart_details` is a restart's outcome, :func:`status_document`
the ``-o json`` shape; :func:`creation_failure` and :func:`job_failure` read why a child object
cannot be created or a child Job failed. Both backends and every waiter read outcomes here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core.models import Condition, JobSet, JobSetStatus
from jobset_core.outcome import Backend, Outcome, Phase, ReplicatedJobCounts
from jobset_core.policy import conditions as cond
from jobset_core.policy._time import parse_time
from jobset_core.policy.terminal import terminal_status

__all__ = [
    "CREATION_FAILURE_REASONS",
    "build_outcome",
    "creation_failure",
    "failed_job_from_message",
    "job_failure",
    "replicated_job_counts",
    "restart_details",
    "restart_failed_job",
    "status_document",
]

#: Warning reasons the upstream controller emits when it cannot create a child object; it
#: never fails the JobSet for them (v0.12.0 ``jobset_controller.go``).
CREATION_FAILURE_REASONS = frozenset(
    {"JobCreationFailed", "HeadlessServiceCreationFailed", "PVCCreationFailed"}
)
#: What a failed request says when it never reached a working API server (Go's net and
#: http errors, client-go's, the API server's own while it starts or is overloaded).
_TRANSIENT = re.compile(
    r"connection refused|connection reset|broken pipe|i/o timeout|\bEOF\b|no route to host"
    r"|TLS handshake timeout|context deadline exceeded|client connection lost"
    r"|request canceled|server is currently unable to handle the request"
    r"|too many requests|etcdserver: |unable to return a response in the time allotted"
    r"|net/http: timeout awaiting response headers",
    re.IGNORECASE,
)
_FIRST_FAILED = re.compile(r"\(first failed job: (?P<job>[^)]+)\)\s*$")


def replicated_job_counts(jobset: JobSet) -> tuple[ReplicatedJobCounts, ...]:
    """Per replicated job counts in spec order, from ``status.replicatedJobsStatus``
    (a replicated job without a status entry counts zeros)."""
    status = (
        {s.name: s for s in (jobset.status.replicated_jobs_status or [])} if jobset.status else {}
    )
    out: list[ReplicatedJobCounts] = []
    for rjob in jobset.replicated_jobs:
        entry = status.get(rjob.name)
        replicas = 1 if rjob.replicas is None else rjob.replicas
        if entry is None:
            out.append(ReplicatedJobCounts(name=rjob.name, replicas=replicas))
            continue
        out.append(
            ReplicatedJobCounts(
                name=rjob.name,
                replicas=replicas,
                ready=entry.ready,
                active=entry.active,
                succeeded=entry.succeeded,
                failed=entry.failed,
                suspended=entry.suspended,
            )
        )
    return tuple(out)


def _condition(status: JobSetStatus | None, type_: str) -> Condition | None:
    for item in (status.conditions or []) if status else []:
        if item.type == type_:
            return item
    return None


def _is_true(status: JobSetStatus | None, type_: str) -> bool:
    found = _condition(status, type_)
    return found is not None and found.status == "True"


def failed_job_from_message(message: str) -> str | None:
    """The Job named by upstream's ``(first failed job: <job>)`` message suffix."""
    match = _FIRST_FAILED.search(message)
    return match.group("job") if match else None


def _phase(jobset: JobSet, counts: Sequence[ReplicatedJobCounts]) -> Phase:
    status = jobset.status
    finished = terminal_status(status)
    if finished.state == "Completed":
        return Phase.COMPLETED
    if finished.state == "Failed":
        return Phase.FAILED
    if jobset.spec.suspend or _is_true(status, cond.SUSPENDED):
        return Phase.SUSPENDED
    if _is_true(status, cond.RESTARTING):
        return Phase.RESTARTING
    if any(c.active or c.ready or c.succeeded or c.failed for c in counts):
        return Phase.RUNNING
    return Phase.PENDING


def _note(jobset: JobSet, phase: Phase) -> tuple[str, str]:
    """The reason and message that explain the phase (the condition behind it)."""
    status = jobset.status
    if phase.terminal:
        finished = terminal_status(status)
        return finished.reason, finished.message
    wanted = {
        Phase.SUSPENDED: (cond.SUSPENDED,),
        Phase.RESTARTING: (cond.RESTARTING,),
        Phase.RUNNING: (cond.STARTUP_POLICY_IN_PROGRESS, cond.STARTUP_POLICY_COMPLETED),
        Phase.PENDING: (cond.STARTUP_POLICY_IN_PROGRESS,),
    }.get(phase, ())
    for type_ in wanted:
        found = _condition(status, type_)
        if found is not None and found.status == "True":
            return found.reason, found.message
    return "", ""


def _duration(start: str | None, end: str | None) -> float | None:
    begin, finish = parse_time(start), parse_time(end)
    if begin is None or finish is None:
        return None
    return max(0.0, (finish - begin).total_seconds())


def build_outcome(jobset: JobSet, backend: Backend, *, result: Any = None) -> Outcome:
    """The outcome a JobSet (with a JobSet-shaped ``status``) shows right now.

    Args:
        jobset: The JobSet as read from the server (or, for the native backend, its spec with
            the status the backend keeps).
        backend: Which backend runs it.
        result: The run's result (see :func:`termination_result`), when already read.
    """
    counts = replicated_job_counts(jobset)
    phase = _phase(jobset, counts)
    reason, message = _note(jobset, phase)
    status = jobset.status
    finished = terminal_status(status)
    finished_at = finished.finished_at if phase.terminal else None
    created_at = jobset.metadata.creation_timestamp
    return Outcome(
        name=jobset.name,
        namespace=jobset.metadata.namespace or "",
        uid=jobset.metadata.uid or "",
        backend=backend,
        phase=phase,
        terminal_state=finished.state if phase.terminal else None,
        reason=reason,
        message=message,
        restarts=(status.restarts or 0) if status else 0,
        restarts_count_towards_max=(status.restarts_count_towards_max or 0) if status else 0,
        failed_job=failed_job_from_message(message) if message else None,
        replicated_jobs=counts,
        created_at=created_at,
        finished_at=finished_at,
        duration_seconds=_duration(created_at, finished_at),
        result=result,
    )


def restart_failed_job(jobset: JobSet) -> str | None:
    """The child Job a ``RestartingJobSet=True`` condition names as the first failed one."""
    found = _condition(jobset.status, cond.RESTARTING)
    if found is None or found.status != "True":
        return None
    return failed_job_from_message(found.message)


def restart_details(outcome: Outcome, jobset: JobSet, job_failure: str = "") -> Outcome:
    """The non-terminal outcome ``wait(on_restart="return")`` returns: phase ``Restarting``,
    the ``RestartingJobSet`` condition's reason and message, and the failed child Job.

    Args:
        outcome: The outcome of the snapshot whose ``status.restarts`` grew.
        jobset: That snapshot.
        job_failure: How the failed Job itself failed (``BackoffLimitExceeded: ...``), when
            the backend could read it; appended to the message.
    """
    found = _condition(jobset.status, cond.RESTARTING)
    reason = found.reason if found is not None and found.status == "True" else ""
    message = found.message if found is not None and found.status == "True" else ""
    failed_job = failed_job_from_message(message) if message else None
    if job_failure:
        message = f"{message}; {job_failure}" if message else job_failure
    return outcome.model_copy(
        update={
            "phase": Phase.RESTARTING,
            "terminal_state": None,
            "reason": reason or "Restarting",
            "message": message,
            "failed_job": failed_job,
        }
    )


def status_document(status: JobSetStatus | None) -> dict[str, Any]:
    """The JobSet status shape (``jobsetctl status -o json``), with every key present."""
    plain = status.to_dict() if status is not None else {}
    return {
        "conditions": plain.get("conditions", []),
        "terminalState": plain.get("terminalState", ""),
        "restarts": plain.get("restarts", 0),
        "restartsCountTowardsMax": plain.get("restartsCountTowardsMax", 0),
        "replicatedJobsStatus": plain.get("replicatedJobsStatus", []),
    }


def creation_failure(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(reason, message)`` of a controller event that reports that a child object cannot be
    created (``JobCreationFailed``, ``HeadlessServiceCreationFailed``, ``PVCCreationFailed``).

    A failure that the controller's next reconcile gets past is ignored: ``AlreadyExists``
    (the controller racing its own cache: the next reconcile finds the object) and a request
    that did not reach, or was not answered by, a working API server (connection refused or
    reset, a timeout, 429, 503, etcd unavailable: an API server restarting; the controller
    tries again with its backoff). What remains is the API server refusing the object
    (invalid, forbidden, over a quota, denied by admission): the same create fails again.
    """
    reason = str(event.get("reason") or "")
    if reason not in CREATION_FAILURE_REASONS or event.get("type") not in (None, "Warning"):
        return None
    message = str(event.get("message") or "")
    parts = [p for p in re.split(r"[\n;]", message) if p.strip()]
    if parts and all("already exists" in p or _TRANSIENT.search(p) for p in parts):
        return None
    return reason, message


def job_failure(job: Mapping[str, Any]) -> str:
    """How a Job failed, from its ``Failed`` condition: ``<name> failed: <reason>: <message>``
    (empty when the Job has not failed)."""
    status = job.get("status") or {}
    for item in (status.get("conditions") or []) if isinstance(status, Mapping) else []:
        if (
            isinstance(item, Mapping)
            and item.get("type") == "Failed"
            and item.get("status") == "True"
        ):
            name = (job.get("metadata") or {}).get("name") or "job"
            detail = ": ".join(str(x) for x in (item.get("reason"), item.get("message")) if x)
            return f"job {name} failed: {detail}" if detail else f"job {name} failed"
    return ""
