"""Reading a run's pods, as pure functions over API-shaped pod objects.

Which pod a target names (:func:`choose_log_pod`: replicated job, job index, completion index,
latest restart attempt), the run's result (:func:`termination_result`: the first container's
termination message), failed pods and their containers. The log plan, the judge, the result
and the failed pods' tails read pods here. Nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobset_core import labels as L
from jobset_core.outcome import decode_result

if TYPE_CHECKING:
    from jobset_core.models import JobSet

__all__ = [
    "PodRef",
    "choose_log_pod",
    "failed_pods",
    "log_pod_target",
    "pod_container",
    "termination_message",
    "termination_result",
]

_COMPLETION_INDEX_KEYS = (L.JOB_COMPLETION_INDEX,)


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
