"""What the workload sees of its place in the JobSet: environment variables from the Downward
API (pure).

Every container (and init container) of every child Job gets:

==========================  ===================================================================
variable                    from
==========================  ===================================================================
``JOBSET_NAME``             label ``jobset.sigs.k8s.io/jobset-name``
``JOBSET_REPLICATED_JOB``   label ``jobset.sigs.k8s.io/replicatedjob-name``
``JOBSET_JOB_INDEX``        label ``jobset.sigs.k8s.io/job-index``
``JOBSET_POD_INDEX``        annotation ``batch.kubernetes.io/job-completion-index`` (the pod's
                            completion index; empty in a ``NonIndexed`` Job)
``JOBSET_RESTART_ATTEMPT``  label ``jobset.sigs.k8s.io/restart-attempt`` (0, then 1 after the
                            first restart of the whole JobSet...)
==========================  ===================================================================

The controller (and the native backend, which creates the same Jobs) labels every pod so; the
kubelet resolves the references when the container starts. :func:`inject_workload_env` writes
them into the pod templates of the JobSet itself, so the submitted JobSet carries them and the
controller's Jobs copy them from there: ``jobsetctl render`` shows them, and both backends
submit the same. The entries come first (a variable of the user's own may refer to them as
``$(JOBSET_RESTART_ATTEMPT)``), after any of them the container lists first itself; a
container that defines one of the names itself (``env``) keeps its own. Variables from
``envFrom`` are overridden by ``env`` entries (Kubernetes' rule): to set one of these names
from a ConfigMap, turn the injection off.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jobset_core import labels as L
from jobset_core.models import JobSet

__all__ = ["WORKLOAD_ENV", "inject_workload_env", "workload_env"]

#: The variables and their Downward API field paths.
WORKLOAD_ENV: tuple[tuple[str, str], ...] = (
    ("JOBSET_NAME", f"metadata.labels['{L.JOBSET_NAME}']"),
    ("JOBSET_REPLICATED_JOB", f"metadata.labels['{L.REPLICATED_JOB_NAME}']"),
    ("JOBSET_JOB_INDEX", f"metadata.labels['{L.JOB_INDEX}']"),
    ("JOBSET_POD_INDEX", f"metadata.annotations['{L.JOB_COMPLETION_INDEX}']"),
    ("JOBSET_RESTART_ATTEMPT", f"metadata.labels['{L.RESTART_ATTEMPT}']"),
)


def workload_env(defined: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The env entries, without the names in ``defined``."""
    taken = set(defined or ())
    return [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in WORKLOAD_ENV
        if name not in taken
    ]


def _inject(container: Any) -> None:
    if not isinstance(container, dict):
        return  # not a container: validation reports it
    env = container.get("env")
    if env is not None and not isinstance(env, list):
        return
    entries = list(env or [])
    own = {str(e.get("name")): e for e in entries if isinstance(e, Mapping)}
    added = workload_env(own)
    if not added:
        return
    names = {name for name, _ in WORKLOAD_ENV}
    lead = 0  # the container's own leading workload variables stay first
    while lead < len(entries) and isinstance(entries[lead], Mapping):
        if entries[lead].get("name") not in names:
            break
        lead += 1
    container["env"] = [*entries[:lead], *added, *entries[lead:]]


def inject_workload_env(jobset: JobSet) -> JobSet:
    """The JobSet with the workload's variables in every container of every replicated job
    (a copy; the same JobSet again when it carries them already)."""
    rjobs = []
    changed = False
    for rjob in jobset.replicated_jobs:
        spec = copy.deepcopy(rjob.template.spec)
        pod = (spec.get("template") or {}).get("spec") if isinstance(spec, dict) else None
        if isinstance(pod, dict):
            for key in ("initContainers", "containers"):
                items = pod.get(key)
                for container in items if isinstance(items, list) else []:
                    _inject(container)
        if spec != rjob.template.spec:
            changed = True
            template = rjob.template.model_copy(update={"spec": spec})
            rjobs.append(rjob.model_copy(update={"template": template}))
        else:
            rjobs.append(rjob)
    if not changed:
        return jobset
    return jobset.model_copy(
        update={"spec": jobset.spec.model_copy(update={"replicated_jobs": rjobs})}
    )
