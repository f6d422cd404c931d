"""Render a JobSet into the headless Service and child Jobs the upstream controller creates.

Pure and order-stable: :func:`render` mirrors the JobSet controller v0.12.0
(``constructJob``, ``labelAndAnnotateObject``, ``createHeadlessSvcIfNecessary``) so that the
native backend, which creates the objects itself on clusters without the controller, creates
exactly what the controller would.

One deliberate option differs from upstream: exclusive placement. Upstream leaves the pod
template alone and a pod webhook adds, per pod, required podAffinity/podAntiAffinity (leader)
or a nodeSelector copied from the leader's node (followers). ``placement="affinity"`` instead
renders required podAffinity ``job-key In [own]`` and podAntiAffinity ``job-key Exists,
NotIn [own]`` on the topology key into the pod template of every pod of the Job, which the
scheduler alone enforces. ``docs/rendering.md`` lists the differences.
"""

from jobset_core.render._job import Placement
from jobset_core.render._metadata import exclusive_annotations, identity
from jobset_core.render._placement import exclusive_affinity_terms
from jobset_core.render._probes import (
    Probe,
    admission_plugin,
    cause_of,
    child_probes,
    refusal_problems,
    run_object_probe,
    unsupported_dry_run,
)
from jobset_core.render._render import (
    PLACEMENTS,
    check_job_count,
    headless_service,
    job_count,
    jobset_owner_reference,
    render,
)
from jobset_core.render._result import RenderedJobSet

__all__ = [
    "PLACEMENTS",
    "Placement",
    "Probe",
    "RenderedJobSet",
    "admission_plugin",
    "cause_of",
    "check_job_count",
    "child_probes",
    "exclusive_affinity_terms",
    "exclusive_annotations",
    "headless_service",
    "identity",
    "job_count",
    "jobset_owner_reference",
    "refusal_problems",
    "render",
    "run_object_probe",
    "unsupported_dry_run",
]
