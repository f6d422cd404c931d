"""A typed view of the child Jobs, and their buckets, as the upstream reconciler sees them.

:class:`ChildJob` keeps only what the JobSet controller reads from a ``batch/v1`` Job (labels,
``spec.parallelism/completions/suspend``, ``status`` counts, the ``Complete``/``Failed``
conditions, ``deletionTimestamp``). :func:`bucket_child_jobs` mirrors ``getChildJobs`` in
``pkg/controllers/jobset_controller.go``: a Job whose ``restart-attempt`` label is below
``status.restarts`` belongs to a *previous* attempt; the others are *active*, *successful*
(``Complete=True``) or *failed* (``Failed=True``).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jobset_core import labels
from jobset_core.models import to_plain
from jobset_core.policy._time import ZERO_TIME, parse_time
from jobset_core.resources import JOBSET

__all__ = ["ChildJob", "ChildJobs", "JobCondition", "JobFinishedType", "bucket_child_jobs"]

JobFinishedType = Literal["Complete", "Failed"]

_GO_INT = re.compile(r"^[+-]?[0-9]+$")


def _go_atoi(value: Any) -> int | None:
    """Go ``strconv.Atoi``: an optional sign and decimal digits, nothing else."""
    if isinstance(value, str) and _GO_INT.match(value):
        return int(value)
    return None


def _count(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _controller_jobset_uid(owners: Iterable[Mapping[str, Any]]) -> str | None:
    """UID of the controller owner reference when it is a JobSet (``metav1.GetControllerOf``)."""
    for owner in owners:
        if owner.get("controller") is True:
            is_jobset = (
                owner.get("kind") == "JobSet" and owner.get("apiVersion") == JOBSET.api_version
            )
            return str(owner.get("uid")) if is_jobset else None
    return None


@dataclass(frozen=True, slots=True)
class JobCondition:
    """A ``Complete`` or ``Failed`` condition of a child Job whose status is ``True``."""

    type: JobFinishedType
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None

    @property
    def time(self) -> _dt.datetime:
        """``lastTransitionTime`` as a datetime (Go's zero time when absent or unparsable)."""
        return parse_time(self.last_transition_time) or ZERO_TIME

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> JobCondition | None:
        """The condition if it is a ``Complete``/``Failed`` one with status ``True``."""
        kind = data.get("type")
        if kind not in ("Complete", "Failed") or data.get("status") != "True":
            return None
        return cls(
            type=kind,
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            last_transition_time=data.get("lastTransitionTime") or None,
        )


@dataclass(frozen=True, slots=True)
class ChildJob:
    """What the JobSet controller reads from one child ``batch/v1`` Job.

    Attributes:
        name: ``metadata.name``.
        namespace: ``metadata.namespace``.
        uid: ``metadata.uid`` (for delete preconditions).
        owner_uid: UID of the controller owner reference when it is a JobSet.
        replicated_job: The ``replicatedjob-name`` label (``None`` when missing or empty).
        job_index: The ``job-index`` label as an integer.
        restart_attempt: The ``restart-attempt`` label; ``None`` when missing or not an
            integer (upstream then aborts the reconcile).
        parallelism: ``spec.parallelism`` (the API server defaults it to 1).
        completions: ``spec.completions`` (``None`` when unset).
        suspend: ``spec.suspend``.
        active: ``status.active``.
        ready: ``status.ready``.
        succeeded: ``status.succeeded``.
        failed: ``status.failed``.
        conditions: The ``Complete``/``Failed`` conditions with status ``True``, in order.
        start_time: ``status.startTime`` (cleared before a suspended Job is resumed).
        deletion_timestamp: ``metadata.deletionTimestamp`` (set while being deleted).
    """

    name: str
    namespace: str | None = None
    uid: str | None = None
    owner_uid: str | None = None
    replicated_job: str | None = None
    job_index: int | None = None
    restart_attempt: int | None = 0
    parallelism: int = 1
    completions: int | None = None
    suspend: bool = False
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: tuple[JobCondition, ...] = ()
    start_time: str | None = None
    deletion_timestamp: str | None = None

    @classmethod
    def from_api(cls, job: Any) -> ChildJob:
        """Build from a Job as the API server returns it (a dict, or an official client object).

        Args:
            job: The ``batch/v1`` Job.

        Returns:
            The typed view.
        """
        data: Mapping[str, Any] = to_plain(job) or {}
        meta = data.get("metadata") or {}
        job_labels = meta.get("labels") or {}
        spec = data.get("spec") or {}
        status = data.get("status") or {}
        found = (JobCondition.from_api(c) for c in status.get("conditions") or [])
        completions = spec.get("completions")
        return cls(
            name=str(meta.get("name") or ""),
            namespace=meta.get("namespace"),
            uid=meta.get("uid"),
            owner_uid=_controller_jobset_uid(meta.get("ownerReferences") or []),
            replicated_job=job_labels.get(labels.REPLICATED_JOB_NAME) or None,
            job_index=_go_atoi(job_labels.get(labels.JOB_INDEX)),
            restart_attempt=_go_atoi(job_labels.get(labels.RESTART_ATTEMPT)),
            parallelism=_count(spec.get("parallelism"), 1),
            completions=completions if isinstance(completions, int) else None,
            suspend=spec.get("suspend") is True,
            active=_count(status.get("active")),
            ready=_count(status.get("ready")),
            succeeded=_count(status.get("succeeded")),
            failed=_count(status.get("failed")),
            conditions=tuple(c for c in found if c is not None),
            start_time=status.get("startTime") or None,
            deletion_timestamp=meta.get("deletionTimestamp") or None,
        )

    @property
    def finished_type(self) -> JobFinishedType | None:
        """Mirror ``JobFinished``: the first ``Complete``/``Failed`` condition that is ``True``."""
        return self.conditions[0].type if self.conditions else None

    @property
    def failure(self) -> JobCondition | None:
        """Mirror ``findJobFailureCondition``: the first ``Failed=True`` condition."""
        return next((c for c in self.conditions if c.type == "Failed"), None)

    @property
    def deleting(self) -> bool:
        """Whether the Job is being deleted (``deletionTimestamp`` set)."""
        return self.deletion_timestamp is not None


@dataclass(frozen=True, slots=True)
class ChildJobs:
    """Child Jobs bucketed like upstream ``childJobs``.

    Attributes:
        active: Current attempt, not finished.
        successful: Current attempt, ``Complete=True``.
        failed: Current attempt, ``Failed=True``.
        previous: From an earlier restart attempt (to be deleted).
        invalid: Jobs whose ``restart-attempt`` label is missing or not an integer; upstream
            stops the reconcile with an error when it meets one.
    """

    active: tuple[ChildJob, ...] = ()
    successful: tuple[ChildJob, ...] = ()
    failed: tuple[ChildJob, ...] = ()
    previous: tuple[ChildJob, ...] = ()
    invalid: tuple[ChildJob, ...] = ()

    def names(self) -> frozenset[str]:
        """Names of every Job in any bucket (what ``shouldCreateJob`` checks against)."""
        every = (*self.active, *self.successful, *self.failed, *self.previous, *self.invalid)
        return frozenset(job.name for job in every)


def bucket_child_jobs(jobs: Iterable[ChildJob], restarts: int) -> ChildJobs:
    """Bucket the Jobs owned by a JobSet; mirrors ``getChildJobs`` (RestartJob gate off).

    Args:
        jobs: The Jobs whose controller owner is the JobSet, in API list order.
        restarts: ``status.restarts`` of the JobSet.

    Returns:
        The buckets, each keeping the input order.
    """
    buckets: dict[str, list[ChildJob]] = {
        "active": [],
        "successful": [],
        "failed": [],
        "previous": [],
        "invalid": [],
    }
    for job in jobs:
        if job.restart_attempt is None:
            buckets["invalid"].append(job)
        elif job.restart_attempt < restarts:
            buckets["previous"].append(job)
        elif job.finished_type == "Complete":
            buckets["successful"].append(job)
        elif job.finished_type == "Failed":
            buckets["failed"].append(job)
        else:
            buckets["active"].append(job)
    return ChildJobs(**{key: tuple(value) for key, value in buckets.items()})
