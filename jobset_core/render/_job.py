"""One child Job, built as ``constructJob`` (``pkg/controllers/jobset_controller.go``) does."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

from jobset_core import labels, naming
from jobset_core.models import JobSet, ReplicatedJob
from jobset_core.render._metadata import JobIdentity, exclusive_annotations, stamp
from jobset_core.render._placement import add_exclusive_affinity, add_node_selector_strategy
from jobset_core.resources import JOB

__all__ = ["Placement", "construct_job"]

Placement = Literal["webhook", "affinity"]


def construct_job(
    jobset: JobSet,
    rjob: ReplicatedJob,
    identity: JobIdentity,
    namespace: str,
    *,
    owner: Mapping[str, Any] | None,
    placement: Placement,
) -> dict[str, Any]:
    """The child Job ``identity`` of ``rjob``; ``jobset`` must already carry its defaults."""
    template_meta = rjob.template.metadata
    meta: dict[str, Any] = {
        "name": identity.name,
        "namespace": namespace,
        "labels": dict((template_meta and template_meta.labels) or {}),
        "annotations": dict((template_meta and template_meta.annotations) or {}),
    }
    spec = copy.deepcopy(rjob.template.spec)
    exclusive = exclusive_annotations(jobset, rjob)
    stamp(meta, identity, exclusive)
    pod_template = spec.setdefault("template", {})
    if pod_template.get("metadata") is None:  # keep the API's key order: metadata first
        rest = {key: value for key, value in pod_template.items() if key != "metadata"}
        spec["template"] = pod_template = {"metadata": {}, **rest}
    pod_meta = pod_template["metadata"]
    stamp(pod_meta, identity, exclusive)
    pod_spec = pod_template.setdefault("spec", {})

    network = jobset.spec.network
    if network is not None and network.enable_dns_hostnames:
        pod_spec["subdomain"] = naming.subdomain(jobset)
    job_annotations = meta["annotations"]
    if labels.EXCLUSIVE_TOPOLOGY in job_annotations and (
        labels.NODE_SELECTOR_STRATEGY in job_annotations
    ):
        add_node_selector_strategy(pod_spec, namespace, identity.name)
    spec["suspend"] = bool(jobset.spec.suspend)
    if jobset.spec.volume_claim_policies:
        _add_claim_volumes(pod_spec, jobset)
    if placement == "affinity":
        pod_annotations = pod_meta["annotations"]
        topology_key = pod_annotations.get(labels.EXCLUSIVE_TOPOLOGY)
        if topology_key is not None and labels.NODE_SELECTOR_STRATEGY not in pod_annotations:
            add_exclusive_affinity(pod_spec, pod_meta["labels"][labels.JOB_KEY], topology_key)

    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": JOB.api_version, "kind": JOB.kind, "metadata": meta, "spec": spec}


def _add_claim_volumes(pod_spec: dict[str, Any], jobset: JobSet) -> None:
    # addVolumes: a claim volume for each policy template some container mounts.
    mounted = {
        mount.get("name")
        for key in ("containers", "initContainers")
        for container in pod_spec.get(key) or []
        for mount in container.get("volumeMounts") or []
    }
    for policy in jobset.spec.volume_claim_policies or []:
        for template in policy.templates or []:
            name = (template.get("metadata") or {}).get("name", "")
            if name in mounted:
                pod_spec.setdefault("volumes", []).append(
                    {
                        "name": name,
                        "persistentVolumeClaim": {"claimName": naming.pvc_name(name, jobset.name)},
                    }
                )
