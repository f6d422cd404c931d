"""The labels and annotations the upstream controller stamps on child Jobs and their pods.

Mirrors ``labelAndAnnotateObject`` (``pkg/controllers/jobset_controller.go``): the same
key/value set is written as labels *and* annotations, over the object's own (user) keys, on the
Job and on its pod template alike. The exclusive-placement keys are annotations only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import labels, naming
from jobset_core.models import JobSet, ReplicatedJob

__all__ = ["JobIdentity", "exclusive_annotations", "identities", "identity", "stamp"]


@dataclass(frozen=True)
class JobIdentity:
    """Everything that tells one child Job apart, already as label values."""

    name: str
    replicated_job: str
    values: tuple[tuple[str, str], ...]
    """The shared label/annotation pairs, in upstream's order."""


def identities(
    jobset: JobSet,
    namespace: str,
    *,
    uid: str,
    restart_attempt: int,
    job_restart_attempts: Mapping[str, Sequence[int]] | None,
) -> list[JobIdentity]:
    """One identity per child Job, in spec order (replicated jobs as listed, then job index).

    ``jobset`` must already carry its defaults (replicas and group names set).
    """
    return [
        identity(
            jobset,
            index,
            job_index,
            namespace,
            uid=uid,
            restart_attempt=restart_attempt,
            job_restart_attempts=job_restart_attempts,
        )
        for index, rjob in enumerate(jobset.replicated_jobs)
        for job_index in range(_replicas(rjob))
    ]


def identity(
    jobset: JobSet,
    rjob_index: int,
    job_index: int,
    namespace: str,
    *,
    uid: str,
    restart_attempt: int,
    job_restart_attempts: Mapping[str, Sequence[int]] | None = None,
) -> JobIdentity:
    """The identity of one child Job: Job ``job_index`` of replicated job ``rjob_index``."""
    rjobs = jobset.replicated_jobs
    rjob = rjobs[rjob_index]
    group = _group(rjob)
    global_replicas = sum(_replicas(r) for r in rjobs)
    group_replicas = sum(_replicas(r) for r in rjobs if _group(r) == group)
    global_offset = sum(_replicas(r) for r in rjobs[:rjob_index])
    group_offset = sum(_replicas(r) for r in rjobs[:rjob_index] if _group(r) == group)
    coordinator = naming.coordinator_endpoint(jobset)
    name = naming.job_name(jobset.name, rjob.name, job_index)
    pairs: list[tuple[str, str]] = [
        (labels.JOBSET_NAME, jobset.name),
        (labels.JOBSET_UID, uid),
        (labels.REPLICATED_JOB_NAME, rjob.name),
        (labels.RESTART_ATTEMPT, str(restart_attempt)),
    ]
    if job_restart_attempts is not None:
        attempts = job_restart_attempts.get(rjob.name, ())
        attempt = attempts[job_index] if job_index < len(attempts) else 0
        pairs.append((labels.JOB_RESTART_ATTEMPT, str(attempt)))
    pairs += [
        (labels.REPLICATED_JOB_REPLICAS, str(_replicas(rjob))),
        (labels.GLOBAL_REPLICAS, str(global_replicas)),
        (labels.JOB_INDEX, str(job_index)),
        (labels.JOB_KEY, naming.job_key(namespace, name)),
        (labels.JOB_GLOBAL_INDEX, str(global_offset + job_index)),
        (labels.GROUP_NAME, group),
        (labels.GROUP_REPLICAS, str(group_replicas)),
        (labels.JOB_GROUP_INDEX, str(group_offset + job_index)),
    ]
    if coordinator is not None:
        pairs.append((labels.COORDINATOR, coordinator))
    return JobIdentity(name=name, replicated_job=rjob.name, values=tuple(pairs))


def exclusive_annotations(jobset: JobSet, rjob: ReplicatedJob) -> dict[str, str]:
    """The exclusive-placement annotations a replicated job's Jobs and pods inherit.

    The JobSet's ``exclusive-topology`` annotation applies to every replicated job and the
    replicated job template's own overrides it; ``node-selector`` is copied only together with
    ``exclusive-topology`` from the same level.
    """
    out: dict[str, str] = {}
    template_meta = rjob.template.metadata
    for source in (jobset.metadata.annotations, template_meta and template_meta.annotations):
        if source and labels.EXCLUSIVE_TOPOLOGY in source:
            out[labels.EXCLUSIVE_TOPOLOGY] = source[labels.EXCLUSIVE_TOPOLOGY]
            if labels.NODE_SELECTOR_STRATEGY in source:
                out[labels.NODE_SELECTOR_STRATEGY] = source[labels.NODE_SELECTOR_STRATEGY]
    return out


def stamp(meta: dict[str, Any], identity: JobIdentity, exclusive: Mapping[str, str]) -> None:
    """Write the JobSet labels and annotations into ``meta`` over its own keys (sorted)."""
    own_labels: dict[str, str] = meta.get("labels") or {}
    own_annotations: dict[str, str] = meta.get("annotations") or {}
    new_labels = {**own_labels, **dict(identity.values)}
    new_annotations = {**own_annotations, **dict(identity.values), **exclusive}
    meta["labels"] = dict(sorted(new_labels.items()))
    meta["annotations"] = dict(sorted(new_annotations.items()))


def _replicas(rjob: ReplicatedJob) -> int:
    return rjob.replicas if rjob.replicas is not None else 1


def _group(rjob: ReplicatedJob) -> str:
    return rjob.group_name if rjob.group_name is not None else "default"
