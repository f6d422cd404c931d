"""What both backends decide the same way, as pure functions over API-shaped data.

Nothing here performs I/O, sleeps, logs or reads a clock; the backends fetch objects and hand
them here:

* identity: :func:`identity_labels` turns a caller's identity into label pairs,
  :func:`resolve_name` gives a caller-given or deterministic name, :func:`stamp_identity`
  puts both on a JobSet, :func:`adoption_problem` decides whether an existing object may be
  adopted (labels and, when known, UID);
* outcome: :func:`build_outcome` reads an :class:`~jobset_core.outcome.Outcome` from a
  JobSet-shaped status, :class:`WaitTracker` turns successive snapshots into typed progress
  events and decides when a wait is over, :func:`status_document` is the ``-o json`` shape;
* pods: :func:`choose_log_pod` (coordinator, else the first pod of the first replicated
  job), :func:`termination_result` (the run's result), :func:`failed_pods`;
* events: :func:`creation_failure` recognises the controller's creation-failure warnings;
* cleanup: :func:`leftovers` lists what of a run still exists.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import labels as L
from jobset_core.errors import IdentityMismatch, Problem, SpecError
from jobset_core.models import Condition, JobSet, JobSetStatus
from jobset_core.naming import dns1035_label_errors, label_value_errors
from jobset_core.outcome import (
    Backend,
    Outcome,
    Phase,
    Progress,
    ReplicatedJobCounts,
    decode_result,
)
from jobset_core.policy import conditions as cond
from jobset_core.policy import terminal_status
from jobset_core.policy._time import parse_time

__all__ = [
    "CREATION_FAILURE_REASONS",
    "IDENTITY_PREFIX",
    "NAME_HASH_LENGTH",
    "PodRef",
    "WaitStep",
    "WaitTracker",
    "adoption_problem",
    "build_outcome",
    "choose_log_pod",
    "creation_failure",
    "failed_job_from_message",
    "failed_pods",
    "identity_labels",
    "job_failure",
    "jobset_selector",
    "label_safe",
    "leftovers",
    "log_pod_target",
    "pod_container",
    "replicated_job_counts",
    "resolve_name",
    "restart_details",
    "restart_failed_job",
    "spec_fingerprint",
    "stamp_identity",
    "status_document",
    "termination_message",
    "termination_result",
]

#: Prefix of identity label keys given without one (``run-id`` → ``jobset-core/run-id``).
IDENTITY_PREFIX = "jobset-core/"
#: Hex digits of the identity hash in a deterministic name.
NAME_HASH_LENGTH = 10
#: Warning reasons the upstream controller emits when it cannot create a child object; it
#: never fails the JobSet for them (v0.12.0 ``jobset_controller.go``).
CREATION_FAILURE_REASONS = frozenset(
    {"JobCreationFailed", "HeadlessServiceCreationFailed", "PVCCreationFailed"}
)
#: The longest name derived from an identity: child Job and pod names add to it, and the
#: webhook checks those, so derived names stay short (``<prefix>-<hash>``).
_DERIVED_NAME_MAX = 40
_DEFAULT_NAME_PREFIX = "jobset"
_FIRST_FAILED = re.compile(r"\(first failed job: (?P<job>[^)]+)\)\s*$")
_COMPLETION_INDEX_KEYS = (L.JOB_COMPLETION_INDEX,)

# ------------------------------------------------------------------------------- identity


def label_safe(value: str) -> str:
    """``value`` when it is a valid label value, else a deterministic valid stand-in.

    The stand-in keeps the value's readable characters (up to 40) and appends 10 hex digits of
    its SHA-256, so different values never share a stand-in in practice and the same value
    always gets the same one (an Airflow run id such as ``manual__2024-01-01T00:00:00+00:00``
    has ``:`` and ``+``, which labels do not allow).
    """
    if not label_value_errors(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:NAME_HASH_LENGTH]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", value)[:40].strip("-_.")
    return f"{readable}-{digest}" if readable else f"h-{digest}"


def identity_labels(identity: Mapping[str, str] | None) -> dict[str, str]:
    """The labels that mark an object as made for ``identity``.

    Keys without a ``/`` get :data:`IDENTITY_PREFIX`; values go through :func:`label_safe`.

    Raises:
        ValueError: a key is empty or its name part is not a valid label name.
    """
    out: dict[str, str] = {}
    for key, value in (identity or {}).items():
        full = key if "/" in key else IDENTITY_PREFIX + key
        name = full.rsplit("/", 1)[1]
        if (
            not name
            or len(name) > 63
            or not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name)
        ):
            raise ValueError(f"identity key {key!r} is not a valid label name")
        out[full] = label_safe(str(value))
    return out


def _identity_hash(identity: Mapping[str, str]) -> str:
    canonical = json.dumps(sorted((str(k), str(v)) for k, v in identity.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()[:NAME_HASH_LENGTH]


def resolve_name(jobset: JobSet, identity: Mapping[str, str] | None) -> str:
    """The name to create the JobSet under.

    ``metadata.name`` when given. Otherwise a deterministic name from the identity:
    ``<generateName without its trailing '-', or 'jobset'>-<10 hex of the identity's hash>``,
    so a retry of the same run names the same object (``generateName`` would make a duplicate).

    Raises:
        SpecError: neither a name nor an identity to derive one from.
    """
    if jobset.metadata.name:
        return jobset.metadata.name
    if not identity:
        raise SpecError(
            [
                Problem(
                    "metadata.name",
                    "Required value: give metadata.name, or an identity to derive a "
                    "deterministic name from (generateName alone cannot be retried safely)",
                    "idempotent-name",
                )
            ]
        )
    prefix = (jobset.metadata.generate_name or _DEFAULT_NAME_PREFIX).rstrip("-")
    prefix = prefix[: _DERIVED_NAME_MAX - NAME_HASH_LENGTH - 1].rstrip("-")
    if not prefix or dns1035_label_errors(prefix):
        prefix = _DEFAULT_NAME_PREFIX
    return f"{prefix}-{_identity_hash(identity)}"


def stamp_identity(
    jobset: JobSet, namespace: str, identity: Mapping[str, str] | None
) -> tuple[JobSet, dict[str, str]]:
    """A copy of ``jobset`` named (see :func:`resolve_name`) and labelled with its identity.

    Returns:
        The JobSet to create and the identity labels it carries.

    Raises:
        SpecError: no usable name, or ``metadata.namespace`` differs from ``namespace``.
        ValueError: an identity key is not a valid label name.
    """
    written = jobset.metadata.namespace
    if written and written != namespace:
        raise SpecError(
            [
                Problem(
                    "metadata.namespace",
                    f"the JobSet's namespace {written!r} does not match {namespace!r}",
                    "namespace",
                )
            ]
        )
    name = resolve_name(jobset, identity)
    marks = identity_labels(identity)
    metadata = jobset.metadata.model_copy(
        update={
            "name": name,
            "generate_name": None,
            "namespace": namespace,
            "labels": {**(jobset.metadata.labels or {}), **marks},
        }
    )
    return jobset.model_copy(update={"metadata": metadata}), marks


def spec_fingerprint(jobset: JobSet) -> str:
    """16 hex digits of the SHA-256 of the JobSet's name and spec: a content identity (the
    same manifest run twice is the same run)."""
    data = {
        "name": jobset.metadata.name or jobset.metadata.generate_name,
        "spec": jobset.spec.to_dict(),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def adoption_problem(
    *,
    kind: str,
    namespace: str,
    name: str,
    labels: Mapping[str, str] | None,
    uid: str | None,
    expected_labels: Mapping[str, str],
    expected_uid: str | None,
) -> IdentityMismatch | None:
    """Whether an existing object may be adopted as ours; the error to raise when not.

    It may when every expected identity label has the expected value and, when a UID is
    expected, the UIDs are equal. Without any identity label and without a UID there is
    nothing to prove the object is ours: never adopted.
    """
    if expected_uid and uid != expected_uid:
        why = f"its uid is {uid or 'unknown'}, expected {expected_uid}"
        return IdentityMismatch(kind, namespace, name, why)
    if not expected_labels and not expected_uid:
        why = "no identity was given to prove it was created for this run"
        return IdentityMismatch(kind, namespace, name, why)
    have = labels or {}
    wrong = sorted(k for k, v in expected_labels.items() if have.get(k) != v)
    if wrong:
        shown = ", ".join(f"{k}={have.get(k)!r} (expected {expected_labels[k]!r})" for k in wrong)
        return IdentityMismatch(kind, namespace, name, f"identity labels differ: {shown}")
    return None


def jobset_selector(name: str, uid: str | None = None) -> dict[str, str]:
    """Label selector of a JobSet's Jobs and pods (by UID too when known: no namesake's)."""
    selector = {L.JOBSET_NAME: name}
    if uid:
        selector[L.JOBSET_UID] = uid
    return selector


# ------------------------------------------------------------------------------- outcome


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


@dataclass(frozen=True)
class WaitStep:
    """What one snapshot means to a waiter.

    Attributes:
        outcome: The outcome the snapshot shows.
        progress: The event to report, or ``None`` when nothing a user sees changed.
        done: Whether the wait is over (terminal, or a restart with ``on_restart="return"``).
        restarted: Whether the wait ends because the JobSet restarted (``outcome`` is then
            still the plain snapshot; see :func:`restart_details`).
    """

    outcome: Outcome
    progress: Progress | None
    done: bool
    restarted: bool = False


class WaitTracker:
    """Turns successive snapshots of one JobSet into progress events and the end of a wait.

    Args:
        backend: Which backend runs the JobSet.
        return_on_restart: End the wait as soon as ``status.restarts`` grows beyond its value
            at the first snapshot.
    """

    def __init__(self, backend: Backend, *, return_on_restart: bool = False) -> None:
        self._backend = backend
        self._return_on_restart = return_on_restart
        self.baseline_restarts: int | None = None
        self._last: tuple[Any, ...] | None = None
        self._last_restarts: int | None = None
        self.last: Outcome | None = None

    def observe(self, jobset: JobSet) -> WaitStep:
        """Judge one snapshot (from a list or a watch event)."""
        outcome = build_outcome(jobset, self._backend)
        self.last = outcome
        if self.baseline_restarts is None:
            self.baseline_restarts = outcome.restarts
        grew = self._last_restarts is not None and outcome.restarts > self._last_restarts
        self._last_restarts = outcome.restarts
        key = (
            outcome.phase,
            outcome.restarts,
            outcome.replicated_jobs,
            outcome.reason,
            outcome.message,
        )
        progress = None
        if key != self._last:
            self._last = key
            kind = "restarting" if grew or outcome.phase is Phase.RESTARTING else "status"
            progress = Progress(
                kind=kind,
                phase=outcome.phase,
                restarts=outcome.restarts,
                replicated_jobs=outcome.replicated_jobs,
                reason=outcome.reason,
                message=outcome.message,
            )
        restarted = (
            self._return_on_restart
            and not outcome.phase.terminal
            and outcome.restarts > self.baseline_restarts
        )
        return WaitStep(outcome, progress, outcome.phase.terminal or restarted, restarted)


# ------------------------------------------------------------------------------- pods


@dataclass(frozen=True)
class PodRef:
    """Which pod of a JobSet to read: replicated job, job index, pod (completion) index."""

    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


def log_pod_target(
    jobset: JobSet | None,
    *,
    replicated_job: str | None = None,
    job_index: int = 0,
    pod_index: int = 0,
) -> PodRef | None:
    """The pod to read: the one asked for; else the coordinator (``spec.coordinator``); else
    pod 0 of job 0 of the first replicated job. ``None`` when nothing names one."""
    if replicated_job:
        return PodRef(replicated_job, job_index, pod_index)
    if jobset is None:
        return None
    coordinator = jobset.spec.coordinator
    if coordinator is not None:
        return PodRef(
            coordinator.replicated_job, coordinator.job_index or 0, coordinator.pod_index or 0
        )
    if jobset.replicated_jobs:
        return PodRef(jobset.replicated_jobs[0].name)
    return None


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _label(pod: Mapping[str, Any], key: str) -> str | None:
    labels = _meta(pod).get("labels") or {}
    value = labels.get(key) if isinstance(labels, Mapping) else None
    return str(value) if value is not None else None


def _int_label(pod: Mapping[str, Any], key: str) -> int | None:
    value = _label(pod, key)
    if value is None:
        annotations = _meta(pod).get("annotations") or {}
        value = annotations.get(key) if isinstance(annotations, Mapping) else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _completion_index(pod: Mapping[str, Any]) -> int | None:
    for key in _COMPLETION_INDEX_KEYS:
        found = _int_label(pod, key)
        if found is not None:
            return found
    return None


def _newest_first(pod: Mapping[str, Any]) -> tuple[int, str, str]:
    # Latest restart attempt first, then the newest pod (a retried pod replaces a failed one).
    attempt = _int_label(pod, L.RESTART_ATTEMPT) or 0
    created = str(_meta(pod).get("creationTimestamp") or "")
    return (attempt, created, str(_meta(pod).get("name") or ""))


def choose_log_pod(pods: Iterable[Mapping[str, Any]], target: PodRef) -> Mapping[str, Any] | None:
    """The pod ``target`` names among a JobSet's pods, from its latest restart attempt.

    Pods are matched on the ``replicatedjob-name`` and ``job-index`` labels and the Job's
    completion index; for a Job without completion indexes (NonIndexed), ``pod_index``
    counts the Job's pods ordered by name. Of several matching pods (retries, restarts) the
    newest of the latest attempt wins.
    """
    same_job = [
        pod
        for pod in pods
        if _label(pod, L.REPLICATED_JOB_NAME) == target.replicated_job
        and _int_label(pod, L.JOB_INDEX) == target.job_index
    ]
    if not same_job:
        return None
    indexed = [p for p in same_job if _completion_index(p) is not None]
    if indexed:
        matching = [p for p in indexed if _completion_index(p) == target.pod_index]
        return max(matching, key=_newest_first) if matching else None
    latest = max(_newest_first(p)[0] for p in same_job)
    current = sorted(
        (p for p in same_job if _newest_first(p)[0] == latest),
        key=lambda p: str(_meta(p).get("name") or ""),
    )
    return current[target.pod_index] if target.pod_index < len(current) else None


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    found = status.get("containerStatuses") if isinstance(status, Mapping) else None
    return [s for s in found or [] if isinstance(s, Mapping)]


def _terminated(container: Mapping[str, Any]) -> Mapping[str, Any] | None:
    state = container.get("state") or {}
    term = state.get("terminated") if isinstance(state, Mapping) else None
    return term if isinstance(term, Mapping) else None


def _container_order(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    return [str(c.get("name")) for c in containers or [] if isinstance(c, Mapping)]


def termination_message(pod: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The pod's first container (spec order) that left a termination message, and the
    message as the kubelet kept it; ``None`` without one."""
    if pod is None:
        return None
    messages: dict[str, str] = {}
    for status in _container_statuses(pod):
        term = _terminated(status)
        if term is not None and term.get("message"):
            messages[str(status.get("name"))] = str(term["message"])
    order = _container_order(pod) or sorted(messages)
    for name in order:
        if name in messages:
            return name, messages[name]
    return None


def termination_result(pod: Mapping[str, Any] | None) -> Any:
    """The run's result: the termination message of the pod's first container (spec order)
    that left one, JSON-decoded when it parses; ``None`` without a message."""
    found = termination_message(pod)
    return decode_result(found[1]) if found is not None else None


def _failed(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if isinstance(status, Mapping) and status.get("phase") == "Failed":
        return True
    return any(
        (term := _terminated(s)) is not None and term.get("exitCode", 0) != 0
        for s in _container_statuses(pod)
    )


def failed_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that failed (phase ``Failed``, or a container that exited non-zero), by name."""
    return sorted((p for p in pods if _failed(p)), key=lambda p: str(_meta(p).get("name") or ""))


def pod_container(pod: Mapping[str, Any]) -> str | None:
    """The container whose log to read: the pod's first container."""
    order = _container_order(pod)
    return order[0] if order else None


# ------------------------------------------------------------------------------- events


def creation_failure(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(reason, message)`` of a controller event that reports that a child object cannot be
    created (``JobCreationFailed``, ``HeadlessServiceCreationFailed``, ``PVCCreationFailed``).

    An ``AlreadyExists``-only failure is ignored: it is the controller racing its own cache
    and the next reconcile finds the object.
    """
    reason = str(event.get("reason") or "")
    if reason not in CREATION_FAILURE_REASONS or event.get("type") not in (None, "Warning"):
        return None
    message = str(event.get("message") or "")
    parts = [p for p in re.split(r"[\n;]", message) if p.strip()]
    if parts and all("already exists" in p for p in parts):
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
            name = _meta(job).get("name") or "job"
            detail = ": ".join(str(x) for x in (item.get("reason"), item.get("message")) if x)
            return f"job {name} failed: {detail}" if detail else f"job {name} failed"
    return ""


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = _meta(obj).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs)


def leftovers(
    uid: str,
    *,
    jobsets: Iterable[JobSet] = (),
    jobs: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    services: Iterable[Mapping[str, Any]] = (),
) -> list[str]:
    """What of a run (JobSet ``uid``) still exists, as ``kind/name``, from listed objects.

    Jobs and pods count when they carry the JobSet's ``jobset-uid`` label or an owner
    reference to it (pods are owned by their Job, so the label is what ties them); Services
    when the JobSet owns them (a pre-existing Service of the subdomain's name is not ours).
    """
    out = [f"jobset/{js.name}" for js in jobsets if js.metadata.uid == uid]
    for kind, items in (("job", jobs), ("pod", pods)):
        out.extend(
            f"{kind}/{_meta(o).get('name')}"
            for o in items
            if _label(o, L.JOBSET_UID) == uid or _owned_by(o, uid)
        )
    out.extend(f"service/{_meta(s).get('name')}" for s in services if _owned_by(s, uid))
    return out
