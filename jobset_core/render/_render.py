"""``render``: the headless Service and child Jobs of a JobSet, as the controller builds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from jobset_core import labels, naming
from jobset_core.defaults import with_defaults
from jobset_core.errors import Problem, SpecError
from jobset_core.limits import MAX_RENDERED_JOBS
from jobset_core.models import JobSet, OwnerReference
from jobset_core.render._job import Placement, construct_job
from jobset_core.render._metadata import identities
from jobset_core.render._result import RenderedJobSet
from jobset_core.resources import JOBSET, SERVICE

__all__ = [
    "PLACEMENTS",
    "check_job_count",
    "headless_service",
    "job_count",
    "jobset_owner_reference",
    "render",
]

PLACEMENTS: tuple[str, ...] = get_args(Placement)


def render(
    jobset: JobSet,
    namespace: str,
    restart_attempt: int = 0,
    *,
    uid: str | None = None,
    owner: OwnerReference | Mapping[str, Any] | None = None,
    placement: Placement = "webhook",
    job_restart_attempts: Mapping[str, Sequence[int]] | None = None,
    max_jobs: int | None = None,
) -> RenderedJobSet:
    """The headless Service and every child Job the upstream controller (v0.12.0) would create.

    Pure and order-stable: the same arguments always give equal output, Jobs in spec order
    (replicated jobs as listed, then job index), label and annotation keys sorted. The input
    is not modified; its defaults are applied first (:func:`jobset_core.with_defaults`).

    Args:
        jobset: The JobSet; ``metadata.name`` must be set (a ``generateName`` JobSet is rendered
            after the API server has named it).
        namespace: The namespace the objects are created in (it is part of every ``job-key``).
        restart_attempt: The ``restart-attempt`` label: the JobSet's ``status.restarts`` when
            the Jobs are (re)created.
        uid: The JobSet's UID, for the ``jobset-uid`` label and the owner reference; defaults to
            ``metadata.uid`` (the label is empty when neither is known).
        owner: The owner reference of every object. Defaults to the JobSet as controller (when a
            uid is known, otherwise no owner); the native backend passes its own anchor.
        placement: How exclusive placement (``exclusive-topology``) is expressed. ``"webhook"``
            (upstream): the pod template is left as the controller builds it and the JobSet pod
            webhook places the pods. ``"affinity"``: required pod (anti-)affinity terms are
            added to the pod template, for clusters without the JobSet webhook.
        job_restart_attempts: Per replicated job, the per-Job restart counts
            (``status.replicatedJobsStatus[].jobRestarts``). Passing it mirrors a controller
            with the ``RestartJob`` feature gate on: Jobs get the ``job-restart-attempt``
            label (0 for a missing index). ``None`` (gate off) adds no such label.
        max_jobs: Refuse, before building any, to render more child Jobs than this (``None``:
            no limit; ``jobsetctl render`` passes :data:`jobset_core.limits.MAX_RENDERED_JOBS`).

    Raises:
        SpecError: The JobSet has no name, or more than ``max_jobs`` Jobs.
        ValueError: ``namespace`` is empty, ``restart_attempt`` negative or ``placement``
            unknown.
    """
    if not jobset.name:
        raise SpecError([Problem("metadata.name", "a JobSet needs a name to be rendered", "name")])
    if not namespace:
        raise ValueError("namespace must not be empty")
    if restart_attempt < 0:
        raise ValueError(f"restart_attempt must be >= 0, got {restart_attempt}")
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")

    js = with_defaults(jobset)
    if max_jobs is not None:
        check_job_count(js, max_jobs)
    resolved_uid = uid if uid is not None else (js.metadata.uid or "")
    owner_ref = _owner(owner, js.name, resolved_uid)
    jobs_by_rjob = {rjob.name: rjob for rjob in js.replicated_jobs}
    jobs = tuple(
        construct_job(
            js,
            jobs_by_rjob[identity.replicated_job],
            identity,
            namespace,
            owner=owner_ref,
            placement=placement,
        )
        for identity in identities(
            js,
            namespace,
            uid=resolved_uid,
            restart_attempt=restart_attempt,
            job_restart_attempts=job_restart_attempts,
        )
    )
    return RenderedJobSet(service=_headless_service(js, namespace, owner_ref), jobs=jobs)


def job_count(jobset: JobSet) -> int:
    """How many child Jobs the JobSet has: the sum of its replicas (1 when unset)."""
    return sum(max(r.replicas if r.replicas is not None else 1, 0) for r in jobset.replicated_jobs)


def check_job_count(jobset: JobSet, max_jobs: int = MAX_RENDERED_JOBS) -> None:
    """Refuse a JobSet with more than ``max_jobs`` child Jobs (nothing is built).

    Raises:
        SpecError: naming the replicas of the largest replicated job.
    """
    count = job_count(jobset)
    if count <= max_jobs:
        return
    rjobs = jobset.replicated_jobs
    largest = max(range(len(rjobs)), key=lambda i: rjobs[i].replicas or 0)
    raise SpecError(
        [
            Problem(
                f"spec.replicatedJobs[{largest}].replicas",
                f"the JobSet has {count} child Jobs; rendering builds at most {max_jobs} "
                "(jobset_core.limits.MAX_RENDERED_JOBS)",
                "render-job-count",
            )
        ]
    )


def headless_service(
    jobset: JobSet, namespace: str, *, owner: OwnerReference | Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The headless Service (``createHeadlessSvcIfNecessary``); ``None`` without DNS hostnames.

    Named after the subdomain, selecting every pod of the JobSet, no ports and no labels;
    ``publishNotReadyAddresses`` appears only when true, as on the wire. The defaults are applied
    first (DNS hostnames are on unless the JobSet turns them off). ``owner`` is the Service's
    owner reference (none when ``None``).
    """
    owner_ref = _owner(owner, jobset.name, "") if owner is not None else None
    return _headless_service(with_defaults(jobset), namespace, owner_ref)


def _headless_service(
    jobset: JobSet, namespace: str, owner: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    network = jobset.spec.network
    if network is None or not network.enable_dns_hostnames:
        return None
    meta: dict[str, Any] = {"name": naming.subdomain(jobset), "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    spec: dict[str, Any] = {"clusterIP": "None", "selector": {labels.JOBSET_NAME: jobset.name}}
    # A Go bool with omitempty: the controller sends (and the server returns) only ``true``.
    if network.publish_not_ready_addresses is not False:
        spec["publishNotReadyAddresses"] = True
    return {"apiVersion": SERVICE.api_version, "kind": SERVICE.kind, "metadata": meta, "spec": spec}


def jobset_owner_reference(name: str, uid: str) -> dict[str, Any]:
    """The controller owner reference to a JobSet (``ctrl.SetControllerReference``)."""
    return {
        "apiVersion": JOBSET.api_version,
        "kind": JOBSET.kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _owner(
    owner: OwnerReference | Mapping[str, Any] | None, name: str, uid: str
) -> dict[str, Any] | None:
    if isinstance(owner, OwnerReference):
        return owner.to_dict()
    if owner is not None:
        return dict(owner)
    return jobset_owner_reference(name, uid) if uid else None
