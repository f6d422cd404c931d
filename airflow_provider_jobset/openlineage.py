"""What a JobSet task tells OpenLineage, for the ``openlineage`` provider's events.

The operator's ``get_openlineage_facets_on_*`` methods import this module, and nothing else
does: it imports OpenLineage, so importing the provider or a DAG file never does, and a task
without the ``openlineage`` provider never pays for it. Every fact comes from what the
operator already holds (the JobSet as written, the run it created or reattached to, the verdict
of its wait), never from another call to the cluster: the provider builds its events in a
fork of the task's process, after the task ended.

Two run facets:

* ``jobset_execution`` (:class:`JobsetExecutionRunFacet`, this project's; its JSON schema is
  ``docs/openlineage/JobsetExecutionRunFacet.json`` at this version's tag): the JobSet's
  namespace, name and UID, the backend, the replicated jobs (name, replicas, the images of
  their pods' containers) and, once the wait ended, the outcome (verdict, phase, reason,
  restarts);
* ``externalQuery`` (the standard ``ExternalQueryRunFacet``): the JobSet's UID, the id the
  cluster knows the run by, once there is one.

No job type facet: the provider sets its own (``AIRFLOW``, ``TASK``) over any an operator
gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import define
from openlineage.client.facet_v2 import RunFacet, external_query_run

from airflow_provider_jobset import __version__
from jobset_core.lifecycle import Handle, Verdict
from jobset_core.models import JobSet
from jobset_core.policy.counts import replicas_of

__all__ = [
    "FACET",
    "PRODUCER",
    "SCHEMA_URL",
    "JobsetExecutionRunFacet",
    "JobsetOutcome",
    "JobsetReplicatedJob",
    "execution_facet",
    "lineage",
    "run_facets",
]

#: The key of :class:`JobsetExecutionRunFacet` in a run event's facets (``{prefix}_{name}``).
FACET = "jobset_execution"
_REPO = "airflow-provider-jobset/airflow-provider-jobset"
#: Who made the facets: this project at this version's tag.
PRODUCER = f"https://github.com/{_REPO}/tree/v{__version__}"
#: The facet's JSON schema at this version's tag (an immutable URL, as the spec asks).
SCHEMA_URL = (
    f"https://raw.githubusercontent.com/{_REPO}/v{__version__}"
    "/docs/openlineage/JobsetExecutionRunFacet.json#/$defs/JobsetExecutionRunFacet"
)
#: ``ExternalQueryRunFacet.source`` of a run: the UID is a Kubernetes object's.
EXTERNAL_SOURCE = "kubernetes"


@define
class JobsetReplicatedJob:
    """One replicated job as written: ``replicas`` Jobs whose pods run ``images`` (init
    containers' first, each image once)."""

    name: str
    replicas: int
    images: list[str]


@define
class JobsetOutcome:
    """How the wait for the run ended: the verdict (``completed``, ``failed``,
    ``restarting``...), the JobSet's phase as last seen, the reason and the restarts."""

    verdict: str
    phase: str | None = None
    reason: str | None = None
    restarts: int = 0


@define
class JobsetExecutionRunFacet(RunFacet):
    """The JobSet a task ran: where, which, on what backend, what it ran and how it ended.

    Before the run exists (the START event) ``name`` and ``uid`` are absent, ``namespace`` is
    the one asked for if any, and ``backend`` the one asked for (possibly ``auto``).
    """

    backend: str
    replicatedJobs: list[JobsetReplicatedJob]
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    outcome: JobsetOutcome | None = None

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        listed = pod_spec.get(key)
        for container in listed if isinstance(listed, list) else ():
            if isinstance(container, Mapping):
                yield container


def _pod_spec(job_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    template = job_spec.get("template")
    spec = template.get("spec") if isinstance(template, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _images(job_spec: Mapping[str, Any]) -> list[str]:
    """The images a Job spec's pods run, in order, each once."""
    found = (c.get("image") for c in _containers(_pod_spec(job_spec)))
    return list(dict.fromkeys(image for image in found if isinstance(image, str) and image))


def _replicated_jobs(jobset: JobSet | None) -> list[JobsetReplicatedJob]:
    """The replicated jobs of a JobSet as written (none when it could not be read)."""
    if jobset is None:
        return []
    replicas = replicas_of(jobset)
    return [
        JobsetReplicatedJob(
            name=rjob.name, replicas=replicas[rjob.name], images=_images(rjob.template.spec)
        )
        for rjob in jobset.replicated_jobs
    ]


def _outcome(verdict: Verdict) -> JobsetOutcome:
    """The verdict as the facet says it."""
    seen = verdict.outcome
    return JobsetOutcome(
        verdict=verdict.kind,
        phase=seen.phase.value if seen is not None else None,
        reason=verdict.reason or None,
        restarts=seen.restarts if seen is not None else 0,
    )


def execution_facet(
    jobset: JobSet | None,
    *,
    run: Handle | None,
    verdict: Verdict | None,
    backend: str,
    namespace: str | None,
) -> JobsetExecutionRunFacet:
    """The ``jobset_execution`` facet (pure).

    Args:
        jobset: The JobSet as written (``None``: it could not be read).
        run: The run, once created or reattached to.
        verdict: How its wait ended, once it did; it names the run too.
        backend: The backend asked for (said until the run exists).
        namespace: The namespace asked for, if any (said until the run exists).
    """
    if verdict is not None:
        run = Handle(verdict.name, verdict.namespace, verdict.uid, verdict.backend)
    return JobsetExecutionRunFacet(
        backend=run.backend if run is not None else backend,
        replicatedJobs=_replicated_jobs(jobset),
        namespace=run.namespace if run is not None else namespace,
        name=run.name if run is not None else None,
        uid=(run.uid or None) if run is not None else None,
        outcome=_outcome(verdict) if verdict is not None else None,
        producer=PRODUCER,
    )


def run_facets(
    jobset: JobSet | None,
    *,
    run: Handle | None,
    verdict: Verdict | None,
    backend: str,
    namespace: str | None,
) -> dict[str, RunFacet]:
    """The run facets of an event (pure): ``jobset_execution``, and ``externalQuery`` once
    the run has a UID (arguments as :func:`execution_facet`'s)."""
    facet = execution_facet(jobset, run=run, verdict=verdict, backend=backend, namespace=namespace)
    facets: dict[str, RunFacet] = {FACET: facet}
    if facet.uid:
        facets["externalQuery"] = external_query_run.ExternalQueryRunFacet(
            externalQueryId=facet.uid, source=EXTERNAL_SOURCE, producer=PRODUCER
        )
    return facets


def lineage(
    jobset: JobSet | None,
    *,
    run: Handle | None,
    verdict: Verdict | None,
    backend: str,
    namespace: str | None,
) -> OperatorLineage[Any, Any]:
    """What the operator returns to the provider: run facets only (a JobSet's inputs and
    outputs are its containers' business, unknown here)."""
    return OperatorLineage(
        run_facets=run_facets(
            jobset, run=run, verdict=verdict, backend=backend, namespace=namespace
        )
    )
