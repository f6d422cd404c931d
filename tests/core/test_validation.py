"""validate(): the upstream webhook's create rules and the CRD's rules, table-driven.

``WEBHOOK_CASES`` mirrors ``TestValidateCreate`` of upstream ``pkg/webhooks/jobset_webhook_test.go``
(v0.12.0), case by case and under the same names. Each case lists every problem we report as
``(path, rule, message fragment)``: the fragment is upstream's message where upstream has one.
Where we report more than upstream (Job rules upstream only meets when it creates the Jobs),
the extra problems are listed too, so every case is exact.

Differences in the mirrored cases, on purpose:

* upstream's unit test calls ``ValidateCreate`` on an object that was not defaulted; the real
  admission chain (and :func:`validate`) defaults first, so an empty failure-rule name becomes
  ``failurePolicyRule0`` and is valid;
* a negative ``replicas`` (upstream's ``MinInt32`` replica) is rejected by our models at load;
* the three cases about an already existing PVC need the cluster (not mirrored: see
  ``jobset_core.validation._jobset``).

The cluster-marked tests at the end send the same JobSets to the devcluster (server-side dry
run): the real webhook and CRD must reject what we reject, and accept what we accept.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobset_core.errors import Problem, SpecError
from jobset_core.models import (
    FailurePolicy,
    FailurePolicyRule,
    JobSet,
    JobSetSpec,
    load_jobset,
)
from jobset_core.validation import FEATURE_GATES, ensure_valid, validate
from tests.core._problems import assert_problems

MAX_INT32 = 2**31 - 1
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
POD = {"containers": [{"name": "test", "image": "bash:latest"}]}
INDEXED_2 = {"completionMode": "Indexed", "completions": 2, "parallelism": 2}
INDEXED_1 = {"completionMode": "Indexed", "completions": 1, "parallelism": 1}
IPR = {
    "backoffLimit": MAX_INT32,
    "podReplacementPolicy": "Failed",
    "completions": 2,
    "parallelism": 2,
}


def rj(
    name: str = "rj", replicas: int = 1, pod: dict[str, Any] | None = None, **job: Any
) -> dict[str, Any]:
    """A replicated job in the shape of upstream's test fixtures."""
    extra = {k: job.pop(k) for k in ("dependsOn", "groupName") if k in job}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {**job, "template": {"spec": copy.deepcopy(pod or POD)}}},
        **extra,
    }


def js(*rjobs: dict[str, Any], name: str = "js", **spec: Any) -> dict[str, Any]:
    """A JobSet document named ``name``."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


def coord(rjob: str = "replicatedjob-a", *, job: int = 0, pod: int = 0) -> dict[str, Any]:
    """A ``spec.coordinator``."""
    return {"replicatedJob": rjob, "jobIndex": job, "podIndex": pod}


def two_jobs(coordinator: dict[str, Any], first: dict[str, Any] | None = None) -> dict[str, Any]:
    """Upstream's coordinator fixture: two replicated jobs of two Indexed Jobs of two pods."""
    return js(
        first or rj("replicatedjob-a", 2, **INDEXED_2),
        rj("replicatedjob-b", 2, **INDEXED_2),
        coordinator=coordinator,
    )


def rules(*items: dict[str, Any]) -> dict[str, Any]:
    return {"rules": list(items)}


def mounted(claim: str, *, init: bool = False, volume: bool = False) -> dict[str, Any]:
    """A pod that mounts ``claim`` (from a container, or an init container)."""
    ctr = {
        "name": "test",
        "image": "bash:latest",
        "volumeMounts": [{"name": claim, "mountPath": "/data"}],
    }
    pod: dict[str, Any] = {"containers": [ctr]}
    if init:
        pod = {"initContainers": [ctr], "containers": [{"name": "main", "image": "bash:latest"}]}
    if volume:
        pod["volumes"] = [{"name": claim, "emptyDir": {}}]
    return pod


def vcp(*names: str, namespace: str | None = None) -> list[dict[str, Any]]:
    templates = []
    for name in names:
        meta: dict[str, Any] = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        templates.append(
            {
                "metadata": meta,
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
    return [{"templates": templates}]


Expected = tuple[str, str, str]


@dataclass(frozen=True)
class Case:
    """One JobSet and every problem it must produce."""

    id: str
    document: dict[str, Any]
    expected: tuple[Expected, ...] = ()
    gates: dict[str, bool] = field(default_factory=dict)
    #: The server (v0.12.0 webhook + CRD) rejects this JobSet at create time.
    server_rejects: bool | None = None
    #: Edits the loaded model (for what our models refuse to load, e.g. an unknown enum value).
    edit: Callable[[JobSet], None] | None = None

    @property
    def rejected_by_server(self) -> bool:
        if self.server_rejects is not None:
            return self.server_rejects
        return bool(self.expected)


RJ0 = "spec.replicatedJobs[0]"
RJ1 = "spec.replicatedJobs[1]"
T0 = f"{RJ0}.template.spec"
JOB_NAME_TOO_LONG = "job names generated for this JobSet will exceed 63 characters"
POD_NAME_TOO_LONG = "pod names generated for this JobSet will exceed 63 characters"
RULE_NAME_FORMAT = "a failure policy rule name must start with an alphabetic character"
COORD_LABEL = "spec will lead to invalid label value"
NEEDS_COMPLETIONS = ("completions", "job-indexed-completions", "when completion mode is Indexed")


def _reason(reason: str) -> Callable[[JobSet], None]:
    def edit(jobset: JobSet) -> None:
        jobset.spec.failure_policy = FailurePolicy(
            rules=[
                FailurePolicyRule.model_construct(
                    name="rule", action="FailJobSet", on_job_failure_reasons=[reason]
                )
            ]
        )

    return edit


WEBHOOK_CASES = [
    Case(
        "number of pods exceeds the limit",
        js(rj("test-jobset-replicated-job-0", MAX_INT32, parallelism=MAX_INT32)),
        (
            (
                f"{RJ0}.replicas",
                "pods-max-int32",
                "the product of replicas and parallelism must not exceed 2147483647 for "
                "replicatedJob "
                "'test-jobset-replicated-job-0'",
            ),
            (f"{T0}.completions", *NEEDS_COMPLETIONS[1:]),
            (
                f"{T0}.parallelism",
                "job-indexed-parallelism",
                "must be less than or equal to 100000",
            ),
        ),
    ),
    Case("number of pods within the limit", js(rj("test-jobset-replicated-job-0"))),
    Case(
        "success policy has non matching replicated job",
        js(rj(), successPolicy={"operator": "All", "targetReplicatedJobs": ["does not exist"]}),
        (
            (
                "spec.successPolicy.targetReplicatedJobs[0]",
                "success-policy-target",
                "invalid replicatedJob name 'does not exist' does not appear in "
                ".spec.ReplicatedJobs",
            ),
        ),
    ),
    Case(
        "network has invalid dns name",
        js(rj(), network={"enableDNSHostnames": True, "subdomain": "a" * 64}),
        (("spec.network.subdomain", "subdomain", ".spec.network.subdomain is too long"),),
    ),
    Case(
        "jobset name with invalid character",
        js(rj("username.llama65b")),
        ((f"{RJ0}.name", "job-name", "a DNS-1035 label must consist of lower case alphanumeric"),),
    ),
    Case(
        "group name is not DNS 1035 compliant",
        js(rj(groupName="a" * 64)),
        ((f"{RJ0}.groupName", "group-name", ".spec.replicatedJob[].groupName is too long"),),
    ),
    Case(
        "jobset name will result in job name being too long",
        js(rj(replicas=101), name="a" * 62),
        ((f"{RJ0}.name", "job-name", JOB_NAME_TOO_LONG),),
    ),
    Case(
        "jobset name will result in a pod name being too long",
        js(rj(**INDEXED_1), name="a" * 56),
        ((f"{RJ0}.name", "pod-name", POD_NAME_TOO_LONG),),
    ),
    Case(
        "jobset controller name is not a domain-prefixed path",
        js(rj(), managedBy="notDomainPrefixedPathControllerName"),
        (
            (
                "spec.managedBy",
                "managed-by",
                'must be a domain-prefixed path (such as "acme.io/foo")',
            ),
        ),
    ),
    Case(
        "jobset controller name is too long",
        js(rj(), managedBy="foo.bar/" + "a" * 63),
        (("spec.managedBy", "managed-by", "Too long: may not be more than 63 bytes"),),
    ),
    Case("jobset controller name is set and valid", js(rj(), managedBy="example.com/foo")),
    Case("jobset controller name is unset", js(rj())),
    Case(
        "failure policy rule name is valid",
        js(rj(), failurePolicy=rules({"name": "superUniqueName", "action": "FailJobSet"})),
    ),
    Case(
        "jobset failure policy has an invalid on job failure reason",
        js(rj()),
        (
            (
                "spec.failurePolicy.rules[0].onJobFailureReasons[0]",
                "failure-rule-reason",
                "invalid job failure reason 'fakeReason' in failure policy is not a recognized "
                "job failure reason",
            ),
            (
                "spec.failurePolicy.rules[0].onJobFailureReasons[0]",
                "literal_error",
                "must be one of",
            ),
        ),
        edit=_reason("fakeReason"),
    ),
    Case(
        "jobset failure policy has an invalid replicated job",
        js(
            rj(),
            failurePolicy=rules(
                {"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["fakeReplicatedJob"]}
            ),
        ),
        (
            (
                "spec.failurePolicy.rules[0].targetReplicatedJobs[0]",
                "failure-rule-target",
                "invalid replicatedJob name 'fakeReplicatedJob' in failure policy does not appear",
            ),
        ),
    ),
    # Defaulted to failurePolicyRule0 first, as the admission chain does (see module doc).
    Case(
        "jobset failure policy rule name is 0 characters long a.k.a unset",
        js(rj(), failurePolicy=rules({"name": "", "action": "FailJobSet"})),
    ),
    Case(
        "jobset failure policy rule name is greater than 128 characters long",
        js(rj(), failurePolicy=rules({"name": "a" * 129, "action": "FailJobSet"})),
        (
            (
                "spec.failurePolicy.rules[0].name",
                "failure-rule-name",
                "invalid failure policy rule name of length 129, the rule name must be at least 1",
            ),
        ),
    ),
    Case(
        "there are two failure policy rules with the same name",
        js(
            rj(),
            failurePolicy=rules(
                {"name": "ruleWithSameName", "action": "FailJobSet"},
                {"name": "ruleWithSameName", "action": "FailJobSet"},
            ),
        ),
        (
            (
                "spec.failurePolicy.rules[1].name",
                "failure-rule-name-unique",
                "rule names are not unique, rules with indices [0 1] all have the same name "
                "'ruleWithSameName'",
            ),
        ),
    ),
    Case(
        "failure policy rule name does not start with an alphabetic character",
        js(rj(), failurePolicy=rules({"name": "1superUniqueName", "action": "FailJobSet"})),
        (("spec.failurePolicy.rules[0].name", "failure-rule-name", RULE_NAME_FORMAT),),
    ),
    Case(
        "failure policy rule name does not end with an alphanumeric nor '_'",
        js(rj(), failurePolicy=rules({"name": "superUniqueName,", "action": "FailJobSet"})),
        (("spec.failurePolicy.rules[0].name", "failure-rule-name", RULE_NAME_FORMAT),),
    ),
    Case(
        "coordinator replicated job does not exist",
        two_jobs(coord("fake-rjob")),
        (
            (
                "spec.coordinator.replicatedJob",
                "coordinator",
                "coordinator replicatedJob fake-rjob does not exist",
            ),
        ),
    ),
    Case(
        "coordinator replicated job missing completions",
        two_jobs(coord(), first=rj("replicatedjob-a", 2, completionMode="Indexed", parallelism=2)),
        (
            (
                "spec.coordinator.replicatedJob",
                "coordinator",
                "job for coordinator pod must be indexed completion mode, and completions "
                "number must be set",
            ),
            (
                f"{T0}.completions",
                "job-indexed-completions",
                "Required value: when completion mode is Indexed",
            ),
        ),
    ),
    Case(
        "coordinator job index invalid",
        two_jobs(coord(job=2)),
        (
            (
                "spec.coordinator.jobIndex",
                "coordinator",
                "coordinator job index 2 is invalid for replicatedJob replicatedjob-a",
            ),
        ),
    ),
    Case(
        "coordinator pod index invalid",
        two_jobs(coord(pod=2)),
        (
            (
                "spec.coordinator.podIndex",
                "coordinator",
                "coordinator pod index 2 is invalid for replicatedJob replicatedjob-a job index 0",
            ),
        ),
    ),
    Case(
        "coordinator label value is too long due to long JobSet name",
        js(
            rj("replicatedjob-a", **INDEXED_1),
            name="a" * 60,
            coordinator=coord(),
        ),
        (
            ("spec.coordinator", "coordinator-label", COORD_LABEL),
            (f"{RJ0}.name", "job-name", JOB_NAME_TOO_LONG),
            (f"{RJ0}.name", "pod-name", POD_NAME_TOO_LONG),
        ),
    ),
    Case(
        "coordinator label value is too long due to long ReplicatedJob name",
        js(
            rj("a" * 60, **INDEXED_1),
            name="jobset",
            coordinator=coord("a" * 60),
        ),
        (
            ("spec.coordinator", "coordinator-label", COORD_LABEL),
            (f"{RJ0}.name", "job-name", JOB_NAME_TOO_LONG),
            (f"{RJ0}.name", "pod-name", POD_NAME_TOO_LONG),
        ),
    ),
    Case(
        "coordinator label value is too long due to long SubDomain",
        js(
            rj("replicatedjob-a", **INDEXED_1),
            name="jobset",
            network={"subdomain": "a" * 60},
            coordinator=coord(),
        ),
        (("spec.coordinator", "coordinator-label", COORD_LABEL),),
    ),
    *[
        Case(
            f"jobset failure policy rule has {action} action and a replicated job with "
            f"replicas > 1024",
            js(rj(replicas=1025), failurePolicy=rules({"name": "r", "action": action})),
            (
                (
                    f"{RJ0}.replicas",
                    "restart-job-replicas",
                    "JobSet cannot have a failure policy rule with RestartJob or "
                    "RestartJobAndIgnoreMaxRestarts "
                    "action and a replicated job with replicas > 1024",
                ),
            ),
            gates={"RestartJob": True},
        )
        for action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
    ],
    *[
        Case(
            f"jobset failure policy rule has {action} action and RestartJob feature gate is "
            f"disabled",
            js(rj(), failurePolicy=rules({"name": "r", "action": action})),
            (
                (
                    "spec.failurePolicy.rules[0].action",
                    "restart-job-gate",
                    "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are "
                    "not allowed when "
                    "RestartJob feature gate is disabled",
                ),
            ),
        )
        for action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
    ],
    Case(
        "DependsOn is valid since job-2 depends on job-1 and job-3 depends on job-1",
        js(
            rj("job-1"),
            rj("job-2", dependsOn=[{"name": "job-1", "status": "Complete"}]),
            rj("job-3", dependsOn=[{"name": "job-1", "status": "Ready"}]),
        ),
    ),
    Case(
        "DependsOn is valid since job-2 depends on job-1 and job-3 depends on job-2",
        js(
            rj("job-1"),
            rj("job-2", dependsOn=[{"name": "job-1", "status": "Complete"}]),
            rj("job-3", dependsOn=[{"name": "job-2", "status": "Ready"}]),
        ),
    ),
    Case(
        "DependsOn is valid since job-3 depends on job-1 and job-2",
        js(
            rj("job-1"),
            rj("job-2"),
            rj(
                "job-3",
                dependsOn=[
                    {"name": "job-1", "status": "Complete"},
                    {"name": "job-2", "status": "Ready"},
                ],
            ),
        ),
    ),
    Case(
        "DependsOn is invalid since job-2 depends on job-3",
        js(
            rj("job-1"),
            rj("job-2", dependsOn=[{"name": "job-3", "status": "Complete"}]),
            rj("job-3"),
        ),
        (
            (
                f"{RJ1}.dependsOn[0].name",
                "depends-on-order",
                "replicatedJob: job-2 cannot depend on replicatedJob: job-3",
            ),
        ),
    ),
    Case(
        "DependsOn is invalid since job-2 depends on job-3 and job-1",
        js(
            rj("job-1"),
            rj(
                "job-2",
                dependsOn=[
                    {"name": "job-3", "status": "Complete"},
                    {"name": "job-1", "status": "Complete"},
                ],
            ),
            rj("job-3"),
        ),
        (
            (
                f"{RJ1}.dependsOn[0].name",
                "depends-on-order",
                "replicatedJob: job-2 cannot depend on replicatedJob: job-3",
            ),
        ),
    ),
    Case(
        "job-2 depends on invalid ReplicatedJob",
        js(rj("job-1"), rj("job-2", dependsOn=[{"name": "invalid", "status": "Complete"}])),
        (
            (
                f"{RJ1}.dependsOn[0].name",
                "depends-on-order",
                "replicatedJob: job-2 cannot depend on replicatedJob: invalid",
            ),
        ),
    ),
    Case("dependsOn should not fail if there are no replicated jobs", js()),
    Case(
        "dependsOn cannot be set for first replicated job",
        js(rj("job-1", dependsOn=[{"name": "job-2", "status": "Complete"}]), rj("job-2")),
        (
            (
                f"{RJ0}.dependsOn",
                "depends-on-first",
                "DependsOn can't be set for the first ReplicatedJob",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicy is valid since volume exists in the container",
        js(rj(pod=mounted("data")), volumeClaimPolicies=vcp("data")),
    ),
    Case(
        "volumeClaimPolicy is valid since volume exists in the initContainer",
        js(rj(pod=mounted("data", init=True)), volumeClaimPolicies=vcp("data")),
    ),
    Case(
        "volumeClaimPolicy is invalid since template names are not unique",
        js(rj(pod=mounted("data")), volumeClaimPolicies=vcp("data", "data")),
        (
            (
                "spec.volumeClaimPolicies[0].templates[1].metadata.name",
                "volume-claim-name",
                "names must be unique for VolumeClaimPolicies template",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicy is invalid since template name has uppercase letters",
        js(rj(pod=mounted("Data")), volumeClaimPolicies=vcp("Data")),
        (
            (
                "spec.volumeClaimPolicies[0].templates[0].metadata.name",
                "volume-claim-name",
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicy is invalid since template name is too long",
        js(rj(pod=mounted("a" * 61)), volumeClaimPolicies=vcp("a" * 61)),
        (
            (
                "spec.volumeClaimPolicies[0].templates[0].metadata.name",
                "volume-claim-name",
                "VolumeClaimPolicies template name is too long",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicy is invalid since no matching volumeMount in containers",
        js(rj(), volumeClaimPolicies=vcp("data")),
        (
            (
                "spec.volumeClaimPolicies[0].templates[0].metadata.name",
                "volume-claim-unmounted",
                "replicatedJob containers don't have a matching volumeMount: data from "
                "VolumeClaimPolicies",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicy is invalid since volume name conflicts with existing volume",
        js(rj(pod=mounted("data", volume=True)), volumeClaimPolicies=vcp("data")),
        (
            (
                f"{T0}.template.spec.volumes[0].name",
                "volume-claim-conflict",
                "volume name conflicts with VolumeClaimPolicy template name: data",
            ),
        ),
    ),
    Case(
        "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is "
        "disabled",
        js(rj(**IPR), failurePolicy={"restartStrategy": "InPlaceRestart"}),
        (
            (
                "spec.failurePolicy.restartStrategy",
                "in-place-restart-gate",
                "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature "
                "gate is disabled",
            ),
        ),
    ),
    Case(
        "InPlaceRestart restart strategy can be set when InPlaceRestart feature gate is enabled",
        js(rj(**IPR), failurePolicy={"restartStrategy": "InPlaceRestart"}),
        gates={"InPlaceRestart": True},
    ),
    Case(
        "InPlaceRestart enabled: backoffLimit is not MaxInt32",
        js(rj(**{**IPR, "backoffLimit": 6}), failurePolicy={"restartStrategy": "InPlaceRestart"}),
        (
            (
                f"{T0}.backoffLimit",
                "in-place-restart",
                "replicatedJob rj: must be set to 2147483647 (MaxInt32)",
            ),
        ),
        gates={"InPlaceRestart": True},
    ),
    Case(
        "InPlaceRestart enabled: podReplacementPolicy is not Failed",
        js(
            rj(**{**IPR, "podReplacementPolicy": "TerminatingOrFailed"}),
            failurePolicy={"restartStrategy": "InPlaceRestart"},
        ),
        (
            (
                f"{T0}.podReplacementPolicy",
                "in-place-restart",
                "replicatedJob rj: must be set to Failed",
            ),
        ),
        gates={"InPlaceRestart": True},
    ),
    Case(
        "InPlaceRestart enabled: completions != parallelism",
        js(rj(**{**IPR, "completions": 3}), failurePolicy={"restartStrategy": "InPlaceRestart"}),
        (
            (
                f"{T0}.completions",
                "in-place-restart",
                "completions and parallelism must be set and equal",
            ),
        ),
        gates={"InPlaceRestart": True},
    ),
    Case(
        "InPlaceRestart enabled: completions is nil",
        js(
            rj(**{k: v for k, v in IPR.items() if k != "completions"}),
            failurePolicy={"restartStrategy": "InPlaceRestart"},
        ),
        (
            (
                f"{T0}.completions",
                "in-place-restart",
                "completions and parallelism must be set and equal",
            ),
            (f"{T0}.completions", *NEEDS_COMPLETIONS[1:]),
        ),
        gates={"InPlaceRestart": True},
    ),
    Case(
        "InPlaceRestart enabled: parallelism is nil",
        js(
            rj(**{k: v for k, v in IPR.items() if k != "parallelism"}),
            failurePolicy={"restartStrategy": "InPlaceRestart"},
        ),
        (
            (
                f"{T0}.completions",
                "in-place-restart",
                "completions and parallelism must be set and equal",
            ),
        ),
        gates={"InPlaceRestart": True},
    ),
]


def _construct(**spec: Any) -> Callable[[JobSet], None]:
    def edit(jobset: JobSet) -> None:
        for key, value in spec.items():
            object.__setattr__(jobset.spec, key, value)

    return edit


def _bogus_action(jobset: JobSet) -> None:
    jobset.spec.failure_policy = FailurePolicy(
        rules=[FailurePolicyRule.model_construct(name="r", action="Bogus")]
    )


def _dependents(count: int) -> list[dict[str, Any]]:
    return [{"name": f"job-{i}", "status": "Complete"} for i in range(count)]


CRD_CASES = [
    # -- found by the differential fuzzing (tests/core/test_fuzz_differential.py) ---------------
    Case(
        "InOrder startup policy without replicated jobs fails the CEL rule (no such key)",
        {**js(), "spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}}},
        (("spec.replicatedJobs", "startup-policy-depends-on", "no such key: replicatedJobs"),),
    ),
    Case(
        "a volume claim policy without templates fails the CEL rule (no such key)",
        js(rj(), volumeClaimPolicies=[{"retentionPolicy": {"whenDeleted": "Delete"}}]),
        (
            (
                "spec.volumeClaimPolicies[0].templates",
                "volume-claim-namespace",
                "no such key: templates",
            ),
        ),
    ),
    Case(
        "annotations over 256 KiB in total",
        {**js(rj()), "metadata": {"name": "js", "annotations": {"a": "x" * 262_143, "b": ""}}},
        (("metadata.annotations", "annotations-size", "may not be more than 262144 bytes"),),
    ),
    Case(
        "annotations of exactly 256 KiB",
        {**js(rj()), "metadata": {"name": "js", "annotations": {"a": "x" * 262_143}}},
    ),
    Case(
        "annotation keys are checked in lower case",
        {**js(rj()), "metadata": {"name": "js", "annotations": {"Example.com/Key": "v"}}},
    ),
    Case(
        "a null label is the empty label (and its key is checked)",
        {**js(rj()), "metadata": {"name": "js", "labels": {"ok": None, "bad key": None}}},
        (("metadata.labels.bad key", "label-key", "name part must consist of"),),
    ),
    Case(
        "a replicated job name is a label value of every Job",
        js(rj("a-")),
        ((f"{RJ0}.name", "replicated-job-name", "a valid label must be an empty string"),),
        server_rejects=False,  # the Jobs are rejected (JobCreationFailed)
    ),
    Case(
        "a JobSet name over 63 characters names the headless Service",
        {**js(), "metadata": {"name": "a" * 64}, "spec": {}},
        (("metadata.name", "jobset-name", "it names the headless Service"),),
        server_rejects=False,  # the Service is rejected
    ),
    Case(
        "a long JobSet name is fine without the Service",
        {
            **js(),
            "metadata": {"name": "a" * 64},
            "spec": {"network": {"enableDNSHostnames": False}},
        },
    ),
    # -- the CRD and webhook rules --------------------------------------------------------------
    Case(
        "duplicate replicated job names (listType=map)",
        js(rj("workers"), rj("workers")),
        ((RJ1, "replicated-job-duplicate", 'Duplicate value: {"name": "workers"}'),),
    ),
    Case(
        "InOrder startup policy and dependsOn are mutually exclusive (CEL)",
        js(
            rj("a"),
            rj("b", dependsOn=[{"name": "a", "status": "Ready"}]),
            startupPolicy={"startupPolicyOrder": "InOrder"},
        ),
        (
            (
                "spec.startupPolicy.startupPolicyOrder",
                "startup-policy-depends-on",
                "mutually exclusive",
            ),
        ),
    ),
    Case(
        "InOrder startup policy without dependsOn",
        js(rj("a"), rj("b"), startupPolicy={"startupPolicyOrder": "InOrder"}),
    ),
    Case(
        "dependsOn has at most 5 items",
        js(*[rj(f"job-{i}") for i in range(6)], rj("last", dependsOn=_dependents(6))),
        (
            (
                "spec.replicatedJobs[6].dependsOn",
                "depends-on-max-items",
                "Too many: 6: must have at most 5 items",
            ),
        ),
    ),
    Case(
        "dependsOn names are unique (listType=map)",
        js(
            rj("a"),
            rj(
                "b",
                dependsOn=[{"name": "a", "status": "Ready"}, {"name": "a", "status": "Complete"}],
            ),
        ),
        ((f"{RJ1}.dependsOn[1]", "depends-on-duplicate", 'Duplicate value: {"name": "a"}'),),
    ),
    Case(
        "volumeClaimPolicies has at most 50 items",
        js(rj(pod=mounted("data")), volumeClaimPolicies=vcp("data") + [{"templates": []}] * 50),
        (
            (
                "spec.volumeClaimPolicies",
                "volume-claim-max-items",
                "Too many: 51: must have at most 50 items",
            ),
        ),
    ),
    Case(
        "volumeClaimPolicies templates must not set a namespace (CEL)",
        js(rj(pod=mounted("data")), volumeClaimPolicies=vcp("data", namespace="other")),
        (
            (
                "spec.volumeClaimPolicies[0].templates[0].metadata.namespace",
                "volume-claim-namespace",
                "namespace cannot be set for VolumeClaimPolicies templates",
            ),
        ),
    ),
    Case(
        "failure policy action is an enum",
        js(rj()),
        (("spec.failurePolicy.rules[0].action", "literal_error", "must be one of 'FailJobSet'"),),
        edit=_bogus_action,
    ),
    Case(
        "ttlSecondsAfterFinished minimum 0",
        js(rj()),
        (
            ("spec.ttlSecondsAfterFinished", "greater_than_equal", "greater than or equal to 0"),
            ("spec.ttlSecondsAfterFinished", "ttl", "should be greater than or equal to 0"),
        ),
        edit=_construct(ttl_seconds_after_finished=-1),
    ),
    Case(
        "JobSet name or generateName is required",
        {**js(rj()), "metadata": {}},
        (("metadata.name", "jobset-name", "name or generateName is required"),),
    ),
    Case(
        "JobSet name must be a DNS-1035 label",
        js(rj(), name="1-jobset"),
        (
            (
                "metadata.name",
                "jobset-name",
                "a DNS-1035 label must consist of lower case alphanumeric",
            ),
        ),
    ),
    Case(
        "generateName plus 5 characters must be a DNS-1035 label",
        {**js(rj()), "metadata": {"generateName": "My-"}},
        (("metadata.generateName", "jobset-name", "a DNS-1035 label"),),
    ),
    Case("generateName is enough", {**js(rj()), "metadata": {"generateName": "train-"}}),
    Case(
        "JobSet labels must be valid",
        {**js(rj()), "metadata": {"name": "js", "labels": {"bad key!": "v"}}},
        (
            (
                "metadata.labels.bad key!",
                "label-key",
                "name part must consist of alphanumeric characters",
            ),
        ),
    ),
    Case(
        "an empty dependsOn on the first replicated job counts as set",
        js(rj("a", dependsOn=[])),
        ((f"{RJ0}.dependsOn", "depends-on-first", "DependsOn can't be set for the first"),),
    ),
    Case(
        "an empty dependsOn counts as set for the CEL rule",
        js(rj("a"), rj("b", dependsOn=[]), startupPolicy={"startupPolicyOrder": "InOrder"}),
        (
            (
                "spec.startupPolicy.startupPolicyOrder",
                "startup-policy-depends-on",
                "mutually exclusive",
            ),
        ),
    ),
    Case(
        "coordinator on a replicated job with 0 replicas: every coordinator problem at once",
        js(rj("a", replicas=0), coordinator={"replicatedJob": "a"}),
        (
            ("spec.coordinator.jobIndex", "coordinator", "coordinator job index 0 is invalid"),
            ("spec.coordinator.replicatedJob", "coordinator", "must be indexed completion mode"),
        ),
    ),
    Case(
        "exclusive topology must be a node label key",
        {
            **js(rj()),
            "metadata": {
                "name": "js",
                "annotations": {EXCLUSIVE: "zone name"},
            },
        },
        (
            (
                f"metadata.annotations.{EXCLUSIVE}",
                "exclusive-topology",
                "must be a node label key",
            ),
        ),
        server_rejects=False,  # upstream fails later, when the pods are created
    ),
    Case(
        "exclusive topology on a replicated job",
        {
            **js(rj()),
            "spec": {
                "replicatedJobs": [
                    {
                        **rj(),
                        "template": {
                            **rj()["template"],
                            "metadata": {"annotations": {EXCLUSIVE: "topology.kubernetes.io/zone"}},
                        },
                    }
                ]
            },
        },
    ),
    # Stricter than upstream, which accepts a self-dependency that then never starts.
    Case(
        "a replicated job cannot depend on itself",
        js(rj("a"), rj("b", dependsOn=[{"name": "b", "status": "Ready"}])),
        (
            (
                f"{RJ1}.dependsOn[0].name",
                "depends-on-self",
                "replicatedJob: b cannot depend on itself",
            ),
        ),
        server_rejects=False,
    ),
]

ALL_CASES = WEBHOOK_CASES + CRD_CASES


def _load(case: Case) -> JobSet:
    jobset = load_jobset(case.document)
    if case.edit is not None:
        case.edit(jobset)
    return jobset


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_rules(case: Case) -> None:
    assert_problems(validate(_load(case), feature_gates=case.gates), case.expected)


def test_all_problems_are_reported_at_once_and_sorted() -> None:
    document = js(
        rj("workers", parallelism=4, groupName="Bad_Group"),
        rj("driver", dependsOn=[{"name": "nope", "status": "Ready"}]),
        rj("workers"),
        name="js",
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["ghost"]},
        failurePolicy=rules(
            {"name": "r", "action": "FailJobSet", "targetReplicatedJobs": ["ghost"]}
        ),
        coordinator={"replicatedJob": "ghost"},
    )
    problems = validate(load_jobset(document))
    assert [(p.path, p.rule) for p in problems] == [
        ("spec.coordinator.replicatedJob", "coordinator"),
        ("spec.failurePolicy.rules[0].targetReplicatedJobs[0]", "failure-rule-target"),
        ("spec.replicatedJobs[0].groupName", "group-name"),
        (f"{T0}.completions", "job-indexed-completions"),
        ("spec.replicatedJobs[1].dependsOn[0].name", "depends-on-order"),
        ("spec.replicatedJobs[2]", "replicated-job-duplicate"),
        ("spec.successPolicy.targetReplicatedJobs[0]", "success-policy-target"),
    ]
    with pytest.raises(SpecError) as err:
        ensure_valid(load_jobset(document))
    assert err.value.problems == tuple(problems)
    assert str(err.value).splitlines() == [str(p) for p in problems]


def test_paths_sort_indexes_as_numbers() -> None:
    document = js(*[rj(f"job-{i}", groupName="X") for i in range(12)])
    paths = [p.path for p in validate(load_jobset(document))]
    assert paths == [f"spec.replicatedJobs[{i}].groupName" for i in range(12)]


def test_ensure_valid_returns_the_input_unchanged() -> None:
    jobset = load_jobset(js(rj()))
    before = jobset.to_dict()
    assert ensure_valid(jobset) is jobset
    assert jobset.to_dict() == before


def test_unknown_feature_gate_is_an_error() -> None:
    with pytest.raises(ValueError, match="RestartJobs"):
        validate(load_jobset(js(rj())), feature_gates={"RestartJobs": True})
    assert set(FEATURE_GATES) == {"ElasticJobSet", "InPlaceRestart", "RestartJob", "TLSOptions"}


def test_model_problems_for_jobset_fields_unknown_to_the_models() -> None:
    jobset = load_jobset(
        {**js(rj()), "spec": {**js(rj())["spec"], "fancy": 1}}, allow_unknown_fields=True
    )
    assert [(p.path, p.rule) for p in validate(jobset)] == [("spec.fancy", "unknown-field")]
    assert validate(jobset, allow_unknown_fields=True) == []


def test_importing_validation_does_not_import_the_kubernetes_client() -> None:
    code = (
        "import sys, jobset_core.validation, jobset_core.defaults; "
        "clients = ('kubernetes', 'kubernetes_asyncio'); "
        "assert not [m for m in sys.modules if m.split('.')[0] in clients]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_problems_are_problem_objects_with_rules() -> None:
    for problem in validate(load_jobset(js(rj("A_B")))):
        assert isinstance(problem, Problem)
        assert problem.rule


def test_upstream_examples_are_valid(upstream_example: Any) -> None:
    document = upstream_example.document
    gates = {"InPlaceRestart": True, "RestartJob": True}
    problems = validate(load_jobset(document), feature_gates=gates)
    # Fields newer than the installed client are carried, not rejected, on request.
    newer = [p for p in problems if p.rule == "unknown-field" and "may be newer" in p.message]
    assert [p for p in problems if p not in newer] == []
    assert validate(load_jobset(document), feature_gates=gates, allow_unknown_fields=True) == []


def test_jobset_spec_constructed_without_replicated_jobs_is_valid() -> None:
    jobset = JobSet.model_validate(
        {"metadata": {"name": "empty"}, "spec": JobSetSpec().model_dump()}
    )
    assert validate(jobset) == []


# -- conformance with the real webhook and CRD ------------------------------------------------

SERVER_CASES = [c for c in ALL_CASES if c.edit is None and not c.gates]


@pytest.mark.cluster
@pytest.mark.parametrize("case", SERVER_CASES, ids=[c.id for c in SERVER_CASES])
def test_server_agrees(case: Case, devcluster: Any, cluster_namespace: str) -> None:
    """The devcluster's JobSet webhook + CRD (server-side dry run) decide like validate()."""
    from kubernetes.client.exceptions import ApiException

    body = copy.deepcopy(case.document)
    body["metadata"] = {**body["metadata"], "namespace": cluster_namespace}
    try:
        devcluster.create_jobset(cluster_namespace, body, dry_run=True)
        rejected, reason = False, ""
    except ApiException as err:
        assert err.status in (400, 422), err
        rejected, reason = True, str(err.body)
    assert rejected == case.rejected_by_server, reason
