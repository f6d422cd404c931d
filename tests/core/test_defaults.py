"""with_defaults(): the upstream mutating webhook and the CRD's structural defaults.

``WEBHOOK_CASES`` mirrors ``TestJobSetDefaulting`` of upstream
``pkg/webhooks/jobset_webhook_test.go`` (v0.12.0) under the same names. The CRD tests read
``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml`` from the downloaded JobSet Go
module at test time (nothing upstream is copied here), so a drift of our fact table fails.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
import yaml

from jobset_core.defaults import JOB_TEMPLATE_CRD_DEFAULTS, with_defaults
from jobset_core.models import JobSet, load_jobset
from tests.core.conftest import locate_jobset_module

C0 = "spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
CRD_PATH = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
POD = {
    "restartPolicy": "Never",
    "containers": [{"name": "test-container", "image": "busybox:latest"}],
}


def rj(name: str = "rj", **job: Any) -> dict[str, Any]:
    pod = job.pop("pod", POD)
    return {"name": name, "template": {"spec": {**job, "template": {"spec": copy.deepcopy(pod)}}}}


def js(*rjobs: dict[str, Any], **spec: Any) -> JobSet:
    return load_jobset(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js"},
            "spec": {"replicatedJobs": list(rjobs) or [rj()], **spec},
        }
    )


def get(data: Any, path: str) -> Any:
    """``a.b[0].c`` inside plain data."""
    for part in path.replace("[", ".[").split("."):
        data = data[int(part[1:-1])] if part.startswith("[") else data[part]
    return data


@dataclass(frozen=True)
class Case:
    id: str
    jobset: JobSet
    expected: dict[str, Any]


WEBHOOK_CASES = [
    Case(
        "job completion mode is unset",
        js(),
        {"spec.replicatedJobs[0].template.spec.completionMode": "Indexed"},
    ),
    Case(
        "job completion mode is set to non-indexed",
        js(rj(completionMode="NonIndexed")),
        {"spec.replicatedJobs[0].template.spec.completionMode": "NonIndexed"},
    ),
    Case(
        "enableDNSHostnames is unset",
        js(),
        {"spec.network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True}},
    ),
    Case(
        "enableDNSHostnames is false",
        js(network={"enableDNSHostnames": False}),
        {"spec.network": {"enableDNSHostnames": False, "publishNotReadyAddresses": True}},
    ),
    Case(
        "PublishNotReadyNetworkAddresess is false",
        js(network={"publishNotReadyAddresses": False}),
        {"spec.network": {"enableDNSHostnames": True, "publishNotReadyAddresses": False}},
    ),
    Case(
        "PublishNotReadyNetworkAddresess is true",
        js(
            network={"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": "s"}
        ),
        {
            "spec.network": {
                "enableDNSHostnames": True,
                "publishNotReadyAddresses": True,
                "subdomain": "s",
            }
        },
    ),
    Case(
        "pod restart policy unset",
        js(rj(pod={"containers": POD["containers"]})),
        {"spec.replicatedJobs[0].template.spec.template.spec.restartPolicy": "OnFailure"},
    ),
    Case(
        "pod restart policy set",
        js(),
        {"spec.replicatedJobs[0].template.spec.template.spec.restartPolicy": "Never"},
    ),
    Case("success policy unset", js(), {"spec.successPolicy": {"operator": "All"}}),
    Case(
        "success policy operator set, replicatedJobNames unset",
        js(successPolicy={"operator": "Any"}),
        {"spec.successPolicy": {"operator": "Any"}},
    ),
    Case(
        "startup policy order InOrder set",
        js(startupPolicy={"startupPolicyOrder": "InOrder"}),
        {"spec.startupPolicy": {"startupPolicyOrder": "InOrder"}},
    ),
    Case("startup policy unset", js(), {"spec.startupPolicy": {"startupPolicyOrder": "AnyOrder"}}),
    Case("managedBy field is left nil", js(), {"spec.managedBy": None}),
    Case(
        "when provided, managedBy field is preserved",
        js(managedBy="example.com/other-controller"),
        {"spec.managedBy": "example.com/other-controller"},
    ),
    Case(
        "failure policy rule name is defaulted when: there is one rule and it does not have a name",
        js(failurePolicy={"rules": [{"action": "FailJobSet"}]}),
        {"spec.failurePolicy.rules[0].name": "failurePolicyRule0"},
    ),
    Case(
        "failure policy rule name is defaulted when: there are two rules, "
        "the first rule has a name, the second rule does not have a name",
        js(
            failurePolicy={
                "rules": [
                    {"name": "ruleWithAName", "action": "FailJobSet"},
                    {"action": "FailJobSet"},
                ]
            }
        ),
        {
            "spec.failurePolicy.rules[0].name": "ruleWithAName",
            "spec.failurePolicy.rules[1].name": "failurePolicyRule1",
            "spec.failurePolicy.restartStrategy": "Recreate",
        },
    ),
    Case(
        "volumeClaimPolicy retentionPolicy is defaulted to Delete when nil",
        js(volumeClaimPolicies=[{"templates": []}]),
        {"spec.volumeClaimPolicies[0].retentionPolicy": {"whenDeleted": "Delete"}},
    ),
    Case(
        "CRD: retentionPolicy.whenDeleted inside a present retentionPolicy",
        js(volumeClaimPolicies=[{"templates": [], "retentionPolicy": {}}]),
        {"spec.volumeClaimPolicies[0].retentionPolicy": {"whenDeleted": "Delete"}},
    ),
    Case(
        "CRD: replicas and groupName",
        js(),
        {"spec.replicatedJobs[0].replicas": 1, "spec.replicatedJobs[0].groupName": "default"},
    ),
    Case(
        "CRD: port protocol inside the Job template",
        js(rj(pod={"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]})),
        {f"{C0}.ports[0].protocol": "TCP"},
    ),
    Case(
        "CRD: values the user set are kept",
        js(
            rj(
                pod={
                    "containers": [
                        {
                            "name": "c",
                            "image": "i",
                            "ports": [{"containerPort": 53, "protocol": "UDP"}],
                        }
                    ]
                }
            )
        ),
        {f"{C0}.ports[0].protocol": "UDP"},
    ),
]


@pytest.mark.parametrize("case", WEBHOOK_CASES, ids=[c.id for c in WEBHOOK_CASES])
def test_defaults(case: Case) -> None:
    out = with_defaults(case.jobset).to_dict()
    for path, value in case.expected.items():
        if value is None:
            assert path.rsplit(".", 1)[1] not in get(out, path.rsplit(".", 1)[0])
        else:
            assert get(out, path) == value, path


def test_input_is_not_changed_and_output_is_idempotent() -> None:
    jobset = js(
        failurePolicy={"rules": [{"action": "FailJobSet"}]}, volumeClaimPolicies=[{"templates": []}]
    )
    before = jobset.to_dict()
    once = with_defaults(jobset)
    assert jobset.to_dict() == before
    assert with_defaults(once) == once
    assert once != jobset


def test_upstream_examples_are_idempotent(upstream_example: Any) -> None:
    once = with_defaults(load_jobset(upstream_example.document))
    assert with_defaults(once).to_dict() == once.to_dict()


def test_template_of_the_wrong_type_is_left_for_validation() -> None:
    jobset = js(rj(pod={"containers": []}))
    jobset.replicated_jobs[0].template.spec["template"] = "oops"
    out = with_defaults(jobset)
    assert out.replicated_jobs[0].template.spec["template"] == "oops"
    assert out.replicated_jobs[0].template.spec["completionMode"] == "Indexed"


# -- the CRD's structural defaults ------------------------------------------------------------


@cache
def _crd_schema() -> dict[str, Any]:
    root, error = locate_jobset_module()
    if root is None:
        pytest.fail(f"cannot read the JobSet CRD: {error}")
    crd = yaml.safe_load((root / CRD_PATH).read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _defaults(node: dict[str, Any], path: str = "") -> dict[str, Any]:
    found = {path: node["default"]} if "default" in node else {}
    for key, child in (node.get("properties") or {}).items():
        found.update(_defaults(child, f"{path}.{key}" if path else key))
    if "items" in node:
        found.update(_defaults(node["items"], f"{path}[]"))
    if isinstance(node.get("additionalProperties"), dict):
        found.update(_defaults(node["additionalProperties"], f"{path}{{}}"))
    return found


TEMPLATE_PREFIX = "spec.replicatedJobs[].template.spec."


def test_template_defaults_table_equals_the_crd() -> None:
    crd = _defaults(_crd_schema())
    in_template = {
        k[len(TEMPLATE_PREFIX) :]: v for k, v in crd.items() if k.startswith(TEMPLATE_PREFIX)
    }
    assert in_template == dict(JOB_TEMPLATE_CRD_DEFAULTS)
    assert len(in_template) == 47


def test_jobset_level_crd_defaults_are_the_ones_we_apply() -> None:
    crd = _defaults(_crd_schema())
    outside = {k: v for k, v in crd.items() if not k.startswith(TEMPLATE_PREFIX)}
    assert outside == {
        "spec.failurePolicy.restartStrategy": "Recreate",
        "spec.replicatedJobs[].groupName": "default",
        "spec.replicatedJobs[].replicas": 1,
        "spec.volumeClaimPolicies[].retentionPolicy.whenDeleted": "Delete",
    }
    out = with_defaults(
        js(
            failurePolicy={"maxRestarts": 1},
            volumeClaimPolicies=[{"templates": [], "retentionPolicy": {}}],
        )
    ).to_dict()
    for path, value in outside.items():
        assert get(out, path.replace("[]", "[0]")) == value


def _skeleton(path: str) -> dict[str, Any]:
    """The smallest Job spec in which ``path``'s parents exist (one item per list)."""
    root: dict[str, Any] = {}
    node: Any = root
    parts = path.replace("[]", ".[]").split(".")
    for part, following in itertools.pairwise(parts):
        if part == "[]":
            continue
        if following == "[]":
            node[part] = [{}]
            node = node[part][0]
        else:
            node = node.setdefault(part, {})
    return root


@pytest.mark.parametrize("path", sorted(JOB_TEMPLATE_CRD_DEFAULTS))
def test_each_template_default_is_applied_inside_a_present_parent(path: str) -> None:
    jobset = js()
    jobset.replicated_jobs[0].template.spec = _skeleton(path)
    out = with_defaults(jobset).replicated_jobs[0].template.spec
    assert get(out, path.replace("[]", "[0]")) == JOB_TEMPLATE_CRD_DEFAULTS[path]


def test_template_defaults_create_no_objects() -> None:
    # Structural defaults only fill fields of objects that exist: a plain template gains only
    # the webhook's completionMode and restartPolicy.
    jobset = js(
        rj(
            pod={
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "v", "emptyDir": {}}],
            }
        )
    )
    before = copy.deepcopy(jobset.replicated_jobs[0].template.spec)
    after = with_defaults(jobset).replicated_jobs[0].template.spec
    before["completionMode"] = "Indexed"
    before["template"]["spec"]["restartPolicy"] = "OnFailure"
    assert after == before


# -- the same objects, defaulted by the devcluster's API server and JobSet webhook -----------

KITCHEN_SINK = js(
    rj(
        pod={
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"key": "k"}}}],
                    "envFrom": [{"secretRef": {}}],
                    "readinessProbe": {"grpc": {"port": 9000}},
                    "volumeMounts": [{"name": "claim", "mountPath": "/claim"}],
                }
            ],
            "imagePullSecrets": [{}],
            "volumes": [
                {"name": "cm", "configMap": {}},
                {"name": "rbd", "rbd": {"monitors": ["m"], "image": "x"}},
                {"name": "iscsi", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}},
                {"name": "proj", "projected": {"sources": [{"secret": {}}]}},
            ],
        }
    ),
    failurePolicy={"maxRestarts": 2, "rules": [{"action": "FailJobSet"}]},
    volumeClaimPolicies=[
        {"templates": [{"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
    ],
)


def _go_equivalent(value: Any) -> Any:
    """Drop null, {} and [] (what a round trip through the Go types adds or removes)."""
    if isinstance(value, dict):
        cleaned = {k: _go_equivalent(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_go_equivalent(v) for v in value]
    return value


SERVER_CASES = [*WEBHOOK_CASES, Case("CRD: template defaults of many kinds", KITCHEN_SINK, {})]


@pytest.mark.cluster
@pytest.mark.parametrize("case", SERVER_CASES, ids=[c.id for c in SERVER_CASES])
def test_server_defaults_the_same(case: Case, devcluster: Any, cluster_namespace: str) -> None:
    """A server-side dry run returns the object after CRD defaults and the mutating webhook."""
    body = case.jobset.to_dict()
    body["metadata"]["namespace"] = cluster_namespace
    server = devcluster.create_jobset(cluster_namespace, body, dry_run=True)
    ours = with_defaults(case.jobset).to_dict()
    assert _go_equivalent(ours["spec"]) == _go_equivalent(server["spec"])
