"""What the cluster is asked before a run is created, and how its refusals read.

A server-side dry run (``dryRun=All``) runs a create through everything the target cluster
would apply to it (schema and validation of *its* Kubernetes version, the admission plugins of
*this* namespace: Pod Security, ResourceQuota, LimitRange, ServiceAccount, webhooks and
policies), as the identity that will create it, and stores nothing. The probes are the run's
objects rendered exactly as they will be created: the run object (the JobSet, or the native
backend's anchor), the native backend's Service, one child Job per replicated job and one pod
per replicated job (the pod the Job controller would create for its first index: index 0 is
a leader, which the JobSet pod webhook admits without waiting for a scheduled leader).

Pure: :func:`child_probes` builds the bodies, :func:`refusal_problems` turns a refusal of
one into problems on the **JobSet's** field paths, naming the admission plugin where the
server names it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobset_core import labels
from jobset_core.admission import read_refusal
from jobset_core.defaults import with_defaults
from jobset_core.errors import ApiError, Invalid, Problem
from jobset_core.models import JobSet
from jobset_core.render._job import Placement, construct_job
from jobset_core.render._metadata import identity
from jobset_core.render._render import _headless_service
from jobset_core.resources import JOB, POD, SERVICE, ApiResource

#: The labels the Job controller gives its pods (besides the controller's UID, unknown here).
_JOB_NAME = "batch.kubernetes.io/job-name"
_JOB_NAME_LEGACY = "job-name"

__all__ = [
    "Probe",
    "admission_plugin",
    "cause_of",
    "child_probes",
    "refusal_problems",
    "run_object_probe",
    "unsupported_dry_run",
]


@dataclass(frozen=True)
class Probe:
    """One object to dry-run.

    Attributes:
        resource: Its API resource.
        body: The object, as it will be created (a mapping, or the JobSet model; no owner
            reference: its owner does not exist yet).
        path: The JobSet field path it comes from (``""``: the JobSet itself).
        what: What it is, in words (``the pods of replicated job 'workers'``).
        job_name: The child Job's name, for a Job's ``metadata.name`` (its only source is the
            JobSet's and the replicated job's names).
    """

    resource: ApiResource
    body: Any = field(repr=False)
    path: str
    what: str
    job_name: str | None = None


def run_object_probe(resource: ApiResource, body: Any) -> Probe:
    """The run object: the JobSet (controller backend) or its anchor (native)."""
    what = "the JobSet" if resource.kind == "JobSet" else "the JobSet's anchor ConfigMap"
    return Probe(resource, _without_owners(body), "", what)


def child_probes(
    jobset: JobSet, namespace: str, *, placement: Placement, service: bool
) -> list[Probe]:
    """The Service (``service``: the native backend creates it), then per replicated job its
    first child Job and that Job's first pod, as they will be created in ``namespace``.

    ``jobset`` is the JobSet as the server answered its dry run when it did (the webhook's
    defaults applied), else as prepared; it must be named.
    """
    js = with_defaults(jobset)
    probes: list[Probe] = []
    if service:
        svc = _headless_service(js, namespace, None)
        if svc is not None:
            probes.append(Probe(SERVICE, svc, "spec.network", "the headless Service"))
    uid = js.metadata.uid or ""
    for index, rjob in enumerate(js.replicated_jobs):
        if not _replicas(rjob.replicas):
            continue
        first = identity(
            js, index, 0, namespace, uid=uid, restart_attempt=0, job_restart_attempts=None
        )
        job = construct_job(js, rjob, first, namespace, owner=None, placement=placement)
        where = f"spec.replicatedJobs[{index}]"
        name = job["metadata"]["name"]
        probes.append(
            Probe(JOB, job, f"{where}.template", f"the Jobs of replicated job {rjob.name!r}", name)
        )
        probes.append(
            Probe(
                POD,
                pod_of(job),
                f"{where}.template.spec.template",
                f"the pods of replicated job {rjob.name!r}",
            )
        )
    return probes


def _replicas(value: int | None) -> int:
    return 1 if value is None else value


def pod_of(job: Mapping[str, Any]) -> dict[str, Any]:
    """The pod the Job controller creates first for ``job`` (index 0 of an Indexed Job): its
    template with the controller's labels and annotations, named ``<job>-0-<random>``."""
    name = job["metadata"]["name"]
    template = copy.deepcopy(job["spec"].get("template") or {})
    meta = template.get("metadata") or {}
    pod_labels = {**(meta.get("labels") or {}), _JOB_NAME: name, _JOB_NAME_LEGACY: name}
    annotations = dict(meta.get("annotations") or {})
    spec = template.get("spec") or {}
    indexed = job["spec"].get("completionMode") == "Indexed"
    if indexed:
        pod_labels[labels.JOB_COMPLETION_INDEX] = "0"
        annotations[labels.JOB_COMPLETION_INDEX] = "0"
        if spec.get("subdomain"):
            spec["hostname"] = f"{name}-0"
    pod_meta: dict[str, Any] = {
        "generateName": f"{name}-0-" if indexed else f"{name}-",
        "labels": pod_labels,
        "annotations": annotations,
    }
    spec.setdefault("restartPolicy", "Never")
    return {"apiVersion": POD.api_version, "kind": POD.kind, "metadata": pod_meta, "spec": spec}


def _without_owners(body: Any) -> Any:
    if not isinstance(body, Mapping):  # a model: it has no owner
        return body
    out = dict(body)
    meta = dict(out.get("metadata") or {})
    meta.pop("ownerReferences", None)
    out["metadata"] = meta
    return out


# ---------------------------------------------------------------------- refusals

#: How a cause of the API server's validation ends: the object it was said on.
_SAID_ON = " (the API server, on "
_SUBJECT = re.compile(r'^[\w.-]+ "[^"]*" is (forbidden|invalid): ')
_NO_DRY_RUN = re.compile(r'admission webhook "([^"]+)" does not support dry run')


def admission_plugin(message: str) -> str | None:
    """The admission step a refusal's message names (``PodSecurity "restricted:latest"``,
    ``ResourceQuota compute``, ``LimitRange``, ``ServiceAccount``, ``admission webhook
    "vjobset.kb.io"``, ``ValidatingAdmissionPolicy no-latest``), read as the judge reads the Job
    controller's refusals (:func:`jobset_core.admission.read_refusal`); ``None`` for the API
    server's own validation, or a plugin it does not name."""
    refusal = read_refusal(message)
    if refusal is None or refusal.kind in ("invalid", "admission"):
        return None
    return refusal.plugin


def unsupported_dry_run(error: ApiError) -> str | None:
    """The webhook that cannot take a dry run (``sideEffects`` other than ``None``/
    ``NoneOnDryRun``), when that is why the server answered as it did: the object was not
    judged, so it is not a refusal."""
    found = _NO_DRY_RUN.search(error.message)
    return found.group(1) if found else None


def refusal_problems(probe: Probe, error: ApiError) -> list[Problem]:
    """A refusal of ``probe`` as problems on the JobSet's field paths (each cause of a 422 on
    its own path; a refusal without causes, e.g. an admission plugin's, on the path the
    object comes from), with the server's words and the plugin it names."""
    words = _SUBJECT.sub("", error.message).strip() or str(error)
    plugin = admission_plugin(error.message)
    causes = error.causes if isinstance(error, Invalid) else []
    if causes and plugin is None:
        return [
            Problem(
                jobset_path(probe, cause.path),
                f"{cause.message}{_SAID_ON}{probe.what})",
                "server",
            )
            for cause in causes
        ]
    if plugin is not None and plugin.startswith("PodSecurity"):
        words = words.split(": ", 1)[-1] if words.startswith("violates PodSecurity") else words
    who = plugin or "the API server"
    return [Problem(probe.path, f"{who} refuses {probe.what}: {words}", "server")]


def cause_of(problem: Problem) -> str:
    """A problem's words without the object they were said on: the Job's and the pod's
    refusals of one rule of the pod spec are the same cause."""
    return problem.message.split(_SAID_ON, 1)[0]


def jobset_path(probe: Probe, path: str) -> str:
    """A field path of the probe's object as the JobSet field it comes from."""
    if not probe.path:  # the JobSet itself (its anchor's causes are the anchor's own)
        return path
    if probe.job_name is not None and path == "metadata.name":
        return f"{probe.path.rsplit('.', 1)[0]}.name"  # spec.replicatedJobs[i].name
    if probe.resource == SERVICE and path == "metadata.name":
        return "spec.network.subdomain"
    return f"{probe.path}.{path}" if path else probe.path
