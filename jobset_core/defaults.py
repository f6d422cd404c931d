"""Defaults the API server and the upstream webhook apply when a JobSet is created.

:func:`with_defaults` returns the object the upstream controller (v0.12.0) would see after
``kubectl create``: first the CRD's structural defaults (the API server), then the mutating
webhook's ``Default`` (``pkg/webhooks/jobset_webhook.go``). The native backend renders from
this object, so both backends start from the same spec.

Not applied here (on purpose): the controller-side default of ``network.subdomain`` (the
JobSet name; resolved at render time because of ``generateName``), and Kubernetes' own
defaulting of the Job and Pod objects (done by the API server when the Jobs are created).
"""

from __future__ import annotations

from typing import Any

from jobset_core.models import JobSet, Network, StartupPolicy, SuccessPolicy
from jobset_core.models.jobset import VolumeClaimRetentionPolicy

__all__ = ["with_defaults"]


def with_defaults(jobset: JobSet) -> JobSet:
    """A copy of ``jobset`` with the CRD and mutating-webhook defaults applied.

    Idempotent: ``with_defaults(with_defaults(js)) == with_defaults(js)``.
    """
    out = jobset.model_copy(deep=True)
    _crd_defaults(out)
    _webhook_defaults(out)
    return out


def _crd_defaults(js: JobSet) -> None:
    # Structural defaults of config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml.
    for rjob in js.replicated_jobs:
        if rjob.replicas is None:
            rjob.replicas = 1
        if rjob.group_name is None:
            rjob.group_name = "default"
        _template_crd_defaults(rjob.template.spec)
    policy = js.spec.failure_policy
    if policy is not None and policy.restart_strategy is None:
        policy.restart_strategy = "Recreate"
    for vcp in js.spec.volume_claim_policies or []:
        if vcp.retention_policy is not None and vcp.retention_policy.when_deleted is None:
            vcp.retention_policy.when_deleted = "Delete"


def _template_crd_defaults(job_spec: dict[str, Any]) -> None:
    # The CRD embeds the Kubernetes schema, whose only structural defaults inside a Job
    # template are the port protocols (``+default="TCP"`` on ContainerPort.Protocol).
    pod_spec = (job_spec.get("template") or {}).get("spec") or {}
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in pod_spec.get(key) or []:
            for port in container.get("ports") or []:
                if isinstance(port, dict) and "protocol" not in port:
                    port["protocol"] = "TCP"


def _webhook_defaults(js: JobSet) -> None:
    # jobset_webhook.go Default(): CREATE only.
    spec = js.spec
    if spec.success_policy is None:
        spec.success_policy = SuccessPolicy(operator="All")
    if spec.startup_policy is None:
        spec.startup_policy = StartupPolicy(startup_policy_order="AnyOrder")
    for rjob in js.replicated_jobs:
        job_spec = rjob.template.spec
        if job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"
        pod_template = job_spec.setdefault("template", {})
        pod_spec = pod_template.setdefault("spec", {})
        if not pod_spec.get("restartPolicy"):
            pod_spec["restartPolicy"] = "OnFailure"
    if spec.network is None:
        spec.network = Network()
    if spec.network.enable_dns_hostnames is None:
        spec.network.enable_dns_hostnames = True
    if spec.network.publish_not_ready_addresses is None:
        spec.network.publish_not_ready_addresses = True
    if spec.failure_policy is not None:
        for index, rule in enumerate(spec.failure_policy.rules or []):
            if not rule.name:
                rule.name = f"failurePolicyRule{index}"
    for vcp in spec.volume_claim_policies or []:
        if vcp.retention_policy is None:
            vcp.retention_policy = VolumeClaimRetentionPolicy(when_deleted="Delete")
