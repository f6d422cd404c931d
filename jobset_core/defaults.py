"""Defaults the API server and the upstream webhook apply when a JobSet is created.

:func:`with_defaults` returns the object the upstream controller (v0.12.0) would see after
``kubectl create``, in the order the API server applies them:

1. the CRD's structural defaults (``default:`` in
   ``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml``): ``replicas: 1``,
   ``groupName: default``, ``failurePolicy.restartStrategy: Recreate``,
   ``retentionPolicy.whenDeleted: Delete``, and the Kubernetes defaults the CRD embeds inside
   the Job template (:data:`JOB_TEMPLATE_CRD_DEFAULTS`: port protocol ``TCP``, empty
   ``configMapKeyRef.name``, rbd/ceph/scaleIO volume defaults, ...). Like the API server, a
   default is only set inside an object that is present, and a ``null`` counts as absent;
2. the mutating webhook's ``Default`` (``pkg/webhooks/jobset_webhook.go``): successPolicy
   ``All``, startupPolicy ``AnyOrder``, ``completionMode: Indexed``, pod
   ``restartPolicy: OnFailure``, DNS hostnames and publishNotReadyAddresses on, failure rule
   names ``failurePolicyRule<i>``, retentionPolicy ``Delete``.

Not applied here (on purpose):

* the controller-side default of ``network.subdomain`` (the JobSet name; resolved at render
  time because of ``generateName``);
* Kubernetes' own defaulting of the child Job and Pod objects (``SetDefaults_Job``,
  ``SetDefaults_PodSpec``: ``backoffLimit: 6``, ``dnsPolicy``, ``imagePullPolicy``...): the
  API server applies it when the Jobs are created, and it is not part of the stored JobSet;
* defaults of fields this package cannot see: a template value of the wrong type is left as
  it is, for validation to report.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jobset_core.models import JobSet, Network, StartupPolicy, SuccessPolicy
from jobset_core.models.jobset import VolumeClaimRetentionPolicy

__all__ = ["JOB_TEMPLATE_CRD_DEFAULTS", "with_defaults"]

# Inside every container of containers / initContainers / ephemeralContainers.
_CONTAINER_DEFAULTS: Mapping[str, Any] = {
    "env[].valueFrom.configMapKeyRef.name": "",
    "env[].valueFrom.fileKeyRef.optional": False,
    "env[].valueFrom.secretKeyRef.name": "",
    "envFrom[].configMapRef.name": "",
    "envFrom[].secretRef.name": "",
    "livenessProbe.grpc.service": "",
    "ports[].protocol": "TCP",
    "readinessProbe.grpc.service": "",
    "startupProbe.grpc.service": "",
}

# Inside the pod spec (template.spec of the Job spec).
_POD_DEFAULTS: Mapping[str, Any] = {
    "imagePullSecrets[].name": "",
    "volumes[].azureDisk.fsType": "ext4",
    "volumes[].azureDisk.readOnly": False,
    "volumes[].cephfs.secretRef.name": "",
    "volumes[].cinder.secretRef.name": "",
    "volumes[].configMap.name": "",
    "volumes[].csi.nodePublishSecretRef.name": "",
    "volumes[].flexVolume.secretRef.name": "",
    "volumes[].iscsi.iscsiInterface": "default",
    "volumes[].iscsi.secretRef.name": "",
    "volumes[].projected.sources[].configMap.name": "",
    "volumes[].projected.sources[].secret.name": "",
    "volumes[].rbd.keyring": "/etc/ceph/keyring",
    "volumes[].rbd.pool": "rbd",
    "volumes[].rbd.secretRef.name": "",
    "volumes[].rbd.user": "admin",
    "volumes[].scaleIO.fsType": "xfs",
    "volumes[].scaleIO.secretRef.name": "",
    "volumes[].scaleIO.storageMode": "ThinProvisioned",
    "volumes[].storageos.secretRef.name": "",
}


def _expand() -> dict[str, Any]:
    table = {f"template.spec.{path}": value for path, value in _POD_DEFAULTS.items()}
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        for path, value in _CONTAINER_DEFAULTS.items():
            table[f"template.spec.{containers}[].{path}"] = value
    return dict(sorted(table.items()))


#: Every structural default of the JobSet CRD (v0.12.0, Kubernetes 1.36 schema) inside
#: ``replicatedJobs[].template.spec``, as ``path -> value``; ``[]`` marks "every list item".
#: A test compares it with the CRD of the downloaded Go module, so it cannot drift.
JOB_TEMPLATE_CRD_DEFAULTS: Mapping[str, Any] = _expand()

_SEGMENTS: tuple[tuple[tuple[str, ...], Any], ...] = tuple(
    (tuple(path.replace("[]", ".[]").split(".")), value)
    for path, value in JOB_TEMPLATE_CRD_DEFAULTS.items()
)


def with_defaults(jobset: JobSet) -> JobSet:
    """A copy of ``jobset`` with the CRD and mutating-webhook defaults applied.

    Idempotent: ``with_defaults(with_defaults(js)) == with_defaults(js)``. The input is not
    changed.
    """
    out = jobset.model_copy(deep=True)
    _crd_defaults(out)
    _webhook_defaults(out)
    return out


def _crd_defaults(js: JobSet) -> None:
    for rjob in js.replicated_jobs:
        if rjob.replicas is None:
            rjob.replicas = 1
        if rjob.group_name is None:
            rjob.group_name = "default"
        for segments, value in _SEGMENTS:
            _set_default(rjob.template.spec, segments, value)
    policy = js.spec.failure_policy
    if policy is not None and policy.restart_strategy is None:
        policy.restart_strategy = "Recreate"
    for vcp in js.spec.volume_claim_policies or []:
        if vcp.retention_policy is not None and vcp.retention_policy.when_deleted is None:
            vcp.retention_policy.when_deleted = "Delete"


def _set_default(node: Any, segments: tuple[str, ...], value: Any) -> None:
    if not isinstance(node, dict):
        return
    head, rest = segments[0], segments[1:]
    if not rest:
        if node.get(head) is None:
            node[head] = copy.deepcopy(value)
        return
    if rest[0] == "[]":
        items = node.get(head)
        for item in items if isinstance(items, list) else []:
            _set_default(item, rest[1:], value)
    else:
        _set_default(node.get(head), rest, value)


def _webhook_defaults(js: JobSet) -> None:
    # jobset_webhook.go Default(): CREATE only.
    spec = js.spec
    if spec.success_policy is None:
        spec.success_policy = SuccessPolicy(operator="All")
    if spec.startup_policy is None:
        spec.startup_policy = StartupPolicy(startup_policy_order="AnyOrder")
    for rjob in js.replicated_jobs:
        _default_job_template(rjob.template.spec)
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


def _default_job_template(job_spec: dict[str, Any]) -> None:
    if job_spec.get("completionMode") is None:
        job_spec["completionMode"] = "Indexed"
    # Go decodes a missing pod template as a zero struct, so the webhook always sets
    # restartPolicy; a value of the wrong type is left for validation to report.
    pod_template = job_spec.setdefault("template", {})
    if pod_template is None:
        pod_template = job_spec["template"] = {}
    if not isinstance(pod_template, dict):
        return
    pod_spec = pod_template.setdefault("spec", {})
    if pod_spec is None:
        pod_spec = pod_template["spec"] = {}
    if isinstance(pod_spec, dict) and pod_spec.get("restartPolicy") in (None, ""):
        pod_spec["restartPolicy"] = "OnFailure"
