"""validate() on the embedded Job template: the batch/v1 schema and the Kubernetes Job rules.

Upstream JobSet accepts any template and fails later, with a ``JobCreationFailed`` event on a
JobSet that never fails. These cases mirror Kubernetes' Job validation
(``pkg/apis/batch/validation/validation.go``, v1.36) and the schema of the installed
``kubernetes`` client; each case lists every problem as ``(path under the template spec, rule,
message fragment)``.

The cluster-marked test at the end shows these are late failures upstream: the devcluster's
JobSet webhook accepts every one of these JobSets (server-side dry run).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from jobset_core.errors import Problem
from jobset_core.models import load_jobset
from jobset_core.validation import validate
from jobset_core.validation.strictness import is_deliberate
from tests.core._problems import assert_problems

CLIENT_MAJOR = int(kubernetes.__version__.split(".")[0])
T = "spec.replicatedJobs[0].template.spec"
P = f"{T}.template.spec"
C0 = f"{P}.containers[0]"
CONTAINER = {"name": "main", "image": "busybox"}


def jobset(
    job: dict[str, Any] | None = None, pod: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """One replicated job; ``job`` merges into the Job spec, ``pod`` into the pod spec."""
    pod_spec = {"containers": [dict(CONTAINER)], **(pod or {})}
    job_spec = {"completions": 1, "parallelism": 1, **(job or {}), "template": {"spec": pod_spec}}
    if job and "template" in job:
        job_spec["template"] = job["template"]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "rj", "template": {"spec": job_spec}}], **spec},
    }


def ctr(**fields: Any) -> dict[str, Any]:
    return {"containers": [{**CONTAINER, **fields}]}


def by(rule: str, *found: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    """Expected problems of one rule: ``(path, message)`` pairs."""
    return tuple((path, rule, message) for path, message in found)


@dataclass(frozen=True)
class Case:
    id: str
    document: dict[str, Any]
    expected: tuple[tuple[str, str, str], ...] = ()
    #: What the devcluster (v0.12.0 CRD + webhook, ``fieldValidation=Strict``) says at create.
    server_rejects: bool | None = None


PFP_RULE = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}
NEVER = {"restartPolicy": "Never"}

SCHEMA_CASES = [
    Case(
        "unknown field with a close match",
        jobset(pod=ctr(imagePullPolicyy="Always")),
        (
            (
                f"{C0}.imagePullPolicyy",
                "unknown-field",
                "unknown field (did you mean 'imagePullPolicy'?",
            ),
        ),
    ),
    Case(
        "unknown field names the client version",
        jobset(job={"fooBar": 1}),
        (
            (
                f"{T}.fooBar",
                "unknown-field",
                f"installed kubernetes client {kubernetes.__version__}",
            ),
        ),
    ),
    Case(
        "wrong type",
        jobset(job={"parallelism": "2"}),
        ((f"{T}.parallelism", "type", "must be of type integer; got string"),),
    ),
    Case("integral float is an integer", jobset(job={"backoffLimit": 2.0})),
    Case(
        "boolean is not an integer",
        jobset(job={"backoffLimit": True}),
        ((f"{T}.backoffLimit", "type", "must be of type integer; got boolean"),),
    ),
    Case(
        "object expected",
        jobset(pod={"nodeSelector": ["a"]}),
        ((f"{P}.nodeSelector", "type", "must be of type object; got array"),),
    ),
    Case(
        "map value must be a string",
        jobset(pod={"nodeSelector": {"gpu": True}}),
        ((f"{P}.nodeSelector.gpu", "type", "must be of type string; got boolean"),),
    ),
    Case(
        "required field missing: container name",
        jobset(pod={"containers": [{"image": "busybox"}]}),
        ((f"{P}.containers[0].name", "required", "required field is missing"),),
        # Upstream's mutating webhook round-trips the object through Go types, which writes
        # the zero value ``name: ""``; the CRD then accepts it and the Jobs fail later.
        server_rejects=False,
    ),
    Case(
        "required field missing: containers (the JobSet webhook still defaults restartPolicy)",
        jobset(job={"template": {"spec": {}}}),
        ((f"{P}.containers", "required", "required field is missing"),),
    ),
    Case(
        "a null pod template is still defaulted by the JobSet webhook, then needs containers",
        jobset(job={"template": None}),
        ((f"{P}.containers", "required", "required field is missing"),),
    ),
    Case(
        "quantities accept numbers",
        jobset(pod=ctr(resources={"limits": {"cpu": 1, "memory": "1Gi"}})),
    ),
    Case(
        "quantity syntax",
        jobset(pod=ctr(resources={"requests": {"memory": "1 GB"}})),
        (
            (
                f"{C0}.resources.requests.memory",
                "quantity",
                "quantities must match the regular expression",
            ),
        ),
    ),
    Case(
        "int-or-string port accepts both",
        jobset(
            pod=ctr(
                livenessProbe={"httpGet": {"port": "http"}},
                readinessProbe={"tcpSocket": {"port": 80}},
            )
        ),
    ),
    Case(
        "duplicate env names (CRD listType=map)",
        jobset(pod=ctr(env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}])),
        ((f"{C0}.env[1]", "duplicate", "Duplicate value: name='A'"),),
    ),
    Case(
        "duplicate ports after the TCP default (CRD listType=map)",
        jobset(pod=ctr(ports=[{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}])),
        ((f"{C0}.ports[1]", "duplicate", "containerPort=80, protocol='TCP'"),),
    ),
    Case(
        "duplicate container names in one list (CRD listType=map)",
        jobset(
            pod={"containers": [{"name": "main", "image": "b"}, {"name": "main", "image": "b"}]}
        ),
        ((f"{P}.containers[1]", "duplicate", "Duplicate value: name='main'"),),
    ),
    Case(
        "duplicate volume names (CRD listType=map)",
        jobset(pod={"volumes": [{"name": "x", "emptyDir": {}}, {"name": "x", "emptyDir": {}}]}),
        ((f"{P}.volumes[1]", "duplicate", "Duplicate value: name='x'"),),
    ),
    Case(
        "same port for TCP and UDP is fine",
        jobset(pod=ctr(ports=[{"containerPort": 53}, {"containerPort": 53, "protocol": "UDP"}])),
    ),
    Case("null is absent", jobset(job={"activeDeadlineSeconds": None}, pod={"nodeSelector": None})),
    Case(
        "volume claim template is a PersistentVolumeClaim",
        jobset(
            pod=ctr(volumeMounts=[{"name": "data", "mountPath": "/d"}]),
            volumeClaimPolicies=[
                {"templates": [{"metadata": {"name": "data"}, "spec": {"acessModes": []}}]}
            ],
        ),
        (
            (
                "spec.volumeClaimPolicies[0].templates[0].spec.acessModes",
                "unknown-field",
                "did you mean 'accessModes'?",
            ),
        ),
    ),
]

SCHEMA_CASES += [
    # -- found by the differential fuzzing (tests/core/test_fuzz_differential.py) ---------------
    Case(
        "int32 overflow (the webhook cannot decode it)",
        jobset(job={"backoffLimit": 2**31}),
        ((f"{T}.backoffLimit", "int-range", "must be an int32 (from -2147483648 to 2147483647)"),),
    ),
    Case(
        "int32 overflow of a huge number",
        jobset(job={"completions": 10**30}),
        ((f"{T}.completions", "int-range", "cannot decode 1000000000000000000000000000000"),),
    ),
    Case("int64 fields take int64", jobset(job={"activeDeadlineSeconds": 2**40})),
    Case(
        "int64 overflow",
        jobset(job={"activeDeadlineSeconds": 2**63}),
        ((f"{T}.activeDeadlineSeconds", "int-range", "must be an int64"),),
    ),
    Case(
        "Go's quantity parser: whitespace, a missing number (0), a trailing dot",
        jobset(
            pod=ctr(resources={"limits": {"cpu": " 2 ", "memory": "Gi", "example.com/x": "1."}})
        ),
    ),
    Case(
        "quantity suffix",
        jobset(pod=ctr(resources={"limits": {"memory": "1e"}})),
        ((f"{C0}.resources.limits.memory", "quantity", "unable to parse quantity's suffix"),),
    ),
    Case(
        "a null value of an unknown field is an unknown field",
        jobset(pod=ctr(fooBar=None)),
        ((f"{C0}.fooBar", "unknown-field", "unknown field"),),
    ),
]

JOB_CASES = [
    # -- found by the differential fuzzing (tests/core/test_fuzz_differential.py) ---------------
    Case(
        "a null list item is a zero-valued object: ports [null]",
        jobset(pod=ctr(ports=[None])),
        ((f"{C0}.ports[0].containerPort", "required", "required field is missing"),),
    ),
    Case(
        "a null list item is a zero-valued object: tolerations [null]",
        jobset(pod={"tolerations": [None]}),
        ((f"{P}.tolerations[0].operator", "pod-toleration", "operator must be Exists"),),
    ),
    Case(
        "environment variable names are printable ASCII but '='",
        jobset(
            pod=ctr(
                env=[
                    {"name": "A=B", "value": "1"},
                    {"name": "caf\u00e9", "value": "1"},
                    {"name": "tab\tx", "value": "1"},
                    {"name": "A B.-x%", "value": "relaxed names are fine"},
                    {"name": "", "value": "1"},
                ]
            )
        ),
        (
            (f"{C0}.env[0].name", "container-env", "printable ASCII characters other than '='"),
            (f"{C0}.env[1].name", "container-env", "printable ASCII characters other than '='"),
            (f"{C0}.env[2].name", "container-env", "printable ASCII characters other than '='"),
            (f"{C0}.env[4].name", "container-env", "Required value"),
        ),
    ),
    Case(
        "environment variable value sources",
        jobset(
            pod=ctr(
                env=[
                    {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}},
                    {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": ""}}},
                    {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}},
                    {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name['x']"}}},
                    {
                        "name": "E",
                        "valueFrom": {"fieldRef": {"fieldPath": "x", "apiVersion": "v2"}},
                    },
                    {"name": "F", "valueFrom": {}},
                    {
                        "name": "G",
                        "value": "x",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}},
                    },
                    {"name": "H", "valueFrom": {"resourceFieldRef": {"resource": "cpu"}}},
                    {"name": "I", "valueFrom": {"configMapKeyRef": {"name": "Bad", "key": ""}}},
                    {"name": "J", "valueFrom": {"secretKeyRef": {"name": "s", "key": "../x"}}},
                    {
                        "name": "K",
                        "valueFrom": {
                            "fieldRef": {"fieldPath": "metadata.uid"},
                            "secretKeyRef": {"name": "s", "key": "k"},
                        },
                    },
                    {
                        "name": "L",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a b']"}},
                    },
                    {
                        "name": "M",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.cpu", "divisor": "2"}
                        },
                    },
                    {
                        "name": "ok1",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}},
                    },
                    {"name": "ok2", "valueFrom": {"fieldRef": {"fieldPath": "spec.host"}}},
                    {
                        "name": "N",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.cpu", "divisor": "+1"}
                        },
                    },
                    {
                        "name": "ok4",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "requests.cpu", "divisor": "1000m"}
                        },
                    },
                    {
                        "name": "ok3",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}
                        },
                    },
                ]
            )
        ),
        (
            (
                f"{C0}.env[0].valueFrom.fieldRef.fieldPath",
                "container-env",
                "field label not supported: spec.foo",
            ),
            (f"{C0}.env[1].valueFrom.fieldRef.fieldPath", "container-env", "Required value"),
            (
                f"{C0}.env[2].valueFrom.fieldRef.fieldPath",
                "container-env",
                "Unsupported value: 'status.phase'",
            ),
            (
                f"{C0}.env[3].valueFrom.fieldRef.fieldPath",
                "container-env",
                "does not support subscript",
            ),
            (
                f"{C0}.env[4].valueFrom.fieldRef.fieldPath",
                "container-env",
                "unsupported pod version: v2",
            ),
            (f"{C0}.env[5].valueFrom", "container-env", "must specify one of: `fieldRef`"),
            (
                f"{C0}.env[6].valueFrom",
                "container-env",
                "may not be specified when `value` is not empty",
            ),
            (
                f"{C0}.env[7].valueFrom.resourceFieldRef.resource",
                "container-env",
                "Unsupported value: 'cpu'",
            ),
            (f"{C0}.env[8].valueFrom.configMapKeyRef.key", "container-env", "Required value"),
            (
                f"{C0}.env[8].valueFrom.configMapKeyRef.name",
                "container-env",
                "a lowercase RFC 1123 subdomain",
            ),
            (
                f"{C0}.env[9].valueFrom.secretKeyRef.key",
                "container-env",
                "must not start with '..'",
            ),
            (
                f"{C0}.env[9].valueFrom.secretKeyRef.key",
                "container-env",
                "a valid config key must consist",
            ),
            (
                f"{C0}.env[10].valueFrom",
                "container-env",
                "may not have more than one field specified",
            ),
            (f"{C0}.env[11].valueFrom.fieldRef", "container-env", "name part must consist of"),
            (
                f"{C0}.env[12].valueFrom.resourceFieldRef.divisor",
                "container-env",
                "only divisor's values 1m and 1",
            ),
            # "+1" is 1, but the server compares the spelling Go keeps.
            (
                f"{C0}.env[15].valueFrom.resourceFieldRef.divisor",
                "container-env",
                "only divisor's values 1m and 1",
            ),
        ),
    ),
    Case(
        "envFrom prefixes and sources",
        jobset(
            pod=ctr(
                envFrom=[
                    {"prefix": "A=", "configMapRef": {"name": "c"}},
                    {"prefix": "OK_"},
                    {"configMapRef": {"name": "c"}, "secretRef": {"name": "s"}},
                    {"secretRef": {"name": "Bad"}},
                ]
            )
        ),
        (
            (
                f"{C0}.envFrom",
                "container-env",
                "must specify one of: `configMapRef` or `secretRef`",
            ),
            (f"{C0}.envFrom", "container-env", "may not have more than one field specified"),
            (
                f"{C0}.envFrom[0].prefix",
                "container-env",
                "printable ASCII characters other than '='",
            ),
            (f"{C0}.envFrom[3].secretRef.name", "container-env", "a lowercase RFC 1123 subdomain"),
        ),
    ),
    Case(
        "a negative emptyDir.sizeLimit; a zero one is fine",
        jobset(
            pod={
                "volumes": [
                    {"name": "a", "emptyDir": {"sizeLimit": "-1Gi"}},
                    {"name": "b", "emptyDir": {"sizeLimit": "Ki"}},
                ]
            }
        ),
        (
            (
                f"{P}.volumes[0].emptyDir.sizeLimit",
                "pod-volume-source",
                "must be a valid resource quantity",
            ),
        ),
    ),
    Case(
        "an exec probe needs a command",
        jobset(pod=ctr(readinessProbe={"exec": {}})),
        ((f"{C0}.readinessProbe.exec.command", "container-probe", "Required value"),),
    ),
    Case(
        "a null exit code is 0",
        jobset(
            job={
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "onExitCodes": {"operator": "In", "values": [1, None]},
                        }
                    ]
                }
            },
            pod=NEVER,
        ),
        (
            (
                f"{T}.podFailurePolicy.rules[0].onExitCodes.values",
                "job-pod-failure-policy",
                "must be ordered",
            ),
            (
                f"{T}.podFailurePolicy.rules[0].onExitCodes.values[1]",
                "job-pod-failure-policy",
                "must not be 0",
            ),
        ),
    ),
    Case(
        "pod template annotations over 256 KiB with the ones the controller adds",
        jobset(
            job={
                "template": {
                    "metadata": {"annotations": {"a": "x" * 262_000}},
                    "spec": {"containers": [dict(CONTAINER)]},
                }
            }
        ),
        (
            (
                f"{T}.template.metadata.annotations",
                "annotations-size",
                "with the ones the JobSet controller adds",
            ),
        ),
    ),
    Case(
        "a null template label is the empty label (its key is checked)",
        jobset(
            job={
                "template": {
                    "metadata": {"labels": {"bad key": None}},
                    "spec": {"containers": [dict(CONTAINER)]},
                }
            }
        ),
        ((f"{T}.template.metadata.labels.bad key", "label-key", "name part must consist of"),),
    ),
    Case(
        "an extended resource too large for the integer check",
        jobset(pod=ctr(resources={"limits": {"example.com/x": 6.5e16}})),
        (
            (
                f"{C0}.resources.limits.example.com/x",
                "extended-resource-size",
                "must be at most 9223372036854775",
            ),
        ),
    ),
    # -- the Kubernetes Job rules ---------------------------------------------------------------
    Case(
        "Indexed (the JobSet default) without completions when parallelism is set",
        jobset(job={"completions": None, "parallelism": 4}),
        (
            (
                f"{T}.completions",
                "job-indexed-completions",
                "JobSet defaults completionMode to Indexed",
            ),
        ),
    ),
    Case(
        "explicit Indexed without completions: no JobSet hint",
        jobset(job={"completions": None, "parallelism": 4, "completionMode": "Indexed"}),
        (
            (
                f"{T}.completions",
                "job-indexed-completions",
                "Required value: when completion mode is Indexed",
            ),
        ),
    ),
    Case(
        "neither completions nor parallelism: Kubernetes defaults both to 1",
        jobset(job={"completions": None, "parallelism": None}),
    ),
    Case(
        "NonIndexed work queue without completions",
        jobset(job={"completions": None, "parallelism": 4, "completionMode": "NonIndexed"}),
    ),
    Case(
        "completionMode enum",
        jobset(job={"completionMode": "Sometimes"}),
        (
            (
                f"{T}.completionMode",
                "job-completion-mode",
                'supported values: "Indexed", "NonIndexed"',
            ),
        ),
    ),
    Case(
        "negative counts",
        jobset(
            job={
                "completions": -1,
                "parallelism": -1,
                "backoffLimit": -1,
                "activeDeadlineSeconds": -1,
            }
        ),
        (
            (f"{T}.activeDeadlineSeconds", "job-nonnegative", "must be greater than or equal to 0"),
            (f"{T}.backoffLimit", "job-nonnegative", "must be greater than or equal to 0"),
            (f"{T}.completions", "job-nonnegative", "must be greater than or equal to 0"),
            (f"{T}.parallelism", "job-nonnegative", "must be greater than or equal to 0"),
        ),
    ),
    Case(
        "Indexed parallelism at most 100000",
        jobset(job={"completions": 200000, "parallelism": 100001}),
        ((f"{T}.parallelism", "job-indexed-parallelism", "must be less than or equal to 100000"),),
    ),
    Case(
        "backoffLimitPerIndex requires Indexed",
        jobset(job={"completionMode": "NonIndexed", "backoffLimitPerIndex": 1}),
        (
            (
                f"{T}.backoffLimitPerIndex",
                "job-requires-indexed",
                "requires indexed completion mode",
            ),
        ),
    ),
    Case(
        "maxFailedIndexes requires backoffLimitPerIndex and at most completions",
        jobset(job={"maxFailedIndexes": 2}),
        (
            (
                f"{T}.backoffLimitPerIndex",
                "job-backoff-limit-per-index-required",
                "when maxFailedIndexes is specified",
            ),
            (
                f"{T}.maxFailedIndexes",
                "job-max-failed-indexes",
                "must be less than or equal to completions",
            ),
        ),
    ),
    Case(
        "above 100000 completions with backoffLimitPerIndex",
        jobset(job={"completions": 100001, "parallelism": 10001, "backoffLimitPerIndex": 1}),
        (
            (
                f"{T}.maxFailedIndexes",
                "job-max-failed-indexes",
                "must be specified when completions is above 100000",
            ),
            (
                f"{T}.parallelism",
                "job-indexed-parallelism",
                "must be less than or equal to 10000 when completions",
            ),
        ),
    ),
    Case(
        "restartPolicy Always is not allowed for a Job",
        jobset(pod={"restartPolicy": "Always"}),
        (
            (
                f"{P}.restartPolicy",
                "job-restart-policy",
                'Required value: valid values: "OnFailure", "Never"',
            ),
        ),
    ),
    Case(
        "restartPolicy enum",
        jobset(pod={"restartPolicy": "Sometimes"}),
        ((f"{P}.restartPolicy", "job-restart-policy", "Unsupported value: 'Sometimes'"),),
    ),
    Case(
        "podFailurePolicy requires restartPolicy Never (JobSet defaults OnFailure)",
        jobset(job={"podFailurePolicy": {"rules": [PFP_RULE]}}),
        (
            (
                f"{P}.restartPolicy",
                "job-restart-policy",
                'only "Never" is supported when podFailurePolicy',
            ),
        ),
    ),
    Case(
        "podFailurePolicy with restartPolicy Never",
        jobset(job={"podFailurePolicy": {"rules": [PFP_RULE]}}, pod=NEVER),
    ),
    Case(
        "podFailurePolicy rules",
        jobset(
            job={
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "Explode",
                            "onExitCodes": {
                                "operator": "In",
                                "values": [0, 3, 2],
                                "containerName": "x",
                            },
                        },
                        {
                            "action": "FailIndex",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}],
                        },
                        {"action": "Ignore"},
                        {
                            "action": "Count",
                            "onExitCodes": {"operator": "Within", "values": [1]},
                            "onPodConditions": [{"type": "DisruptionTarget"}],
                        },
                    ]
                }
            },
            pod=NEVER,
        ),
        (
            (
                f"{T}.podFailurePolicy.rules[0].action",
                "job-pod-failure-policy",
                "Unsupported value: 'Explode'",
            ),
            (
                f"{T}.podFailurePolicy.rules[0].onExitCodes.containerName",
                "job-pod-failure-policy",
                "must be one of the container",
            ),
            (
                f"{T}.podFailurePolicy.rules[0].onExitCodes.values",
                "job-pod-failure-policy",
                "must be ordered",
            ),
            (
                f"{T}.podFailurePolicy.rules[0].onExitCodes.values[0]",
                "job-pod-failure-policy",
                "must not be 0 for the In operator",
            ),
            (
                f"{T}.podFailurePolicy.rules[1].action",
                "job-pod-failure-policy",
                "requires the backoffLimitPerIndex to be set",
            ),
            (
                f"{T}.podFailurePolicy.rules[1].onPodConditions[0].status",
                "job-pod-failure-policy",
                "Unsupported value: 'Maybe'",
            ),
            (
                f"{T}.podFailurePolicy.rules[2]",
                "job-pod-failure-policy",
                "specifying one of OnExitCodes and OnPodConditions is required",
            ),
            (
                f"{T}.podFailurePolicy.rules[3]",
                "job-pod-failure-policy",
                "specifying both OnExitCodes and OnPodConditions is not supported",
            ),
            (
                f"{T}.podFailurePolicy.rules[3].onExitCodes.operator",
                "job-pod-failure-policy",
                "Unsupported value: 'Within'",
            ),
        ),
    ),
    Case(
        "podReplacementPolicy with podFailurePolicy must be Failed",
        jobset(
            job={
                "podFailurePolicy": {"rules": [PFP_RULE]},
                "podReplacementPolicy": "TerminatingOrFailed",
            },
            pod=NEVER,
        ),
        (
            (
                f"{T}.podReplacementPolicy",
                "job-pod-replacement-policy",
                'supported values: "Failed"',
            ),
        ),
    ),
    Case(
        "Job successPolicy rules",
        jobset(
            job={
                "completions": 4,
                "parallelism": 4,
                "successPolicy": {
                    "rules": [
                        {},
                        {"succeededIndexes": "0,2-1"},
                        {"succeededIndexes": "0-1", "succeededCount": 3},
                        {"succeededIndexes": "9"},
                        {"succeededCount": 5},
                    ]
                },
            }
        ),
        (
            (
                f"{T}.successPolicy.rules[0]",
                "job-success-policy",
                "at least one of succeededCount or succeededIndexes",
            ),
            (
                f"{T}.successPolicy.rules[1].succeededIndexes",
                "job-success-policy",
                "non-increasing order, previous: 2, current: 1",
            ),
            (
                f"{T}.successPolicy.rules[2].succeededCount",
                "job-success-policy",
                "must be less than or equal to 2 (the number of indexes",
            ),
            (
                f"{T}.successPolicy.rules[3].succeededIndexes",
                "job-success-policy",
                "too large index: '9'",
            ),
            (
                f"{T}.successPolicy.rules[4].succeededCount",
                "job-success-policy",
                "must be less than or equal to 4 (the number of specified completions)",
            ),
        ),
    ),
    Case(
        "Job successPolicy requires Indexed",
        jobset(
            job={
                "completionMode": "NonIndexed",
                "successPolicy": {"rules": [{"succeededCount": 1}]},
            }
        ),
        ((f"{T}.successPolicy", "job-requires-indexed", "requires indexed completion mode"),),
    ),
    Case(
        "selector without manualSelector",
        jobset(job={"selector": {"matchLabels": {"app": "x"}}}),
        ((f"{T}.selector", "job-selector", "`selector` not auto-generated"),),
    ),
    Case(
        "manualSelector without selector",
        jobset(job={"manualSelector": True}),
        ((f"{T}.selector", "job-selector", "Required value: when manualSelector is true"),),
    ),
    Case(
        "manual selector must match the pod labels",
        jobset(job={"manualSelector": True, "selector": {"matchLabels": {"app": "x"}}}),
        (
            (
                f"{T}.template.metadata.labels",
                "job-selector",
                "`selector` does not match template `labels`",
            ),
        ),
    ),
    Case(
        "manual selector on a label the JobSet adds",
        jobset(
            job={
                "manualSelector": True,
                "selector": {
                    "matchExpressions": [
                        {
                            "key": "jobset.sigs.k8s.io/replicatedjob-name",
                            "operator": "In",
                            "values": ["rj"],
                        }
                    ]
                },
            }
        ),
    ),
    Case(
        "managedBy of the Job",
        jobset(job={"managedBy": "kueue"}),
        ((f"{T}.managedBy", "job-managed-by", "must be a domain-prefixed path"),),
    ),
    Case(
        "containers must not be empty",
        jobset(pod={"containers": []}),
        ((f"{P}.containers", "pod-containers", "at least one container"),),
    ),
    Case(
        "container names are DNS-1123 labels, unique across init and regular containers",
        jobset(
            pod={
                "initContainers": [{"name": "main", "image": "b"}],
                "containers": [{"name": "Main_1", "image": "b"}, {"name": "main", "image": "b"}],
            }
        ),
        (
            (
                f"{P}.containers[0].name",
                "container-name",
                "a lowercase RFC 1123 label must consist of",
            ),
            (f"{P}.initContainers[0].name", "container-name", "Duplicate value: 'main'"),
        ),
    ),
    Case(
        "image is required",
        jobset(pod={"containers": [{"name": "main", "image": ""}]}),
        ((f"{C0}.image", "container-image", "Required value"),),
    ),
    Case(
        "imagePullPolicy enum",
        jobset(pod=ctr(imagePullPolicy="Sometimes")),
        (
            (
                f"{C0}.imagePullPolicy",
                "container-image-pull-policy",
                'supported values: "Always", "IfNotPresent", "Never"',
            ),
        ),
    ),
    Case(
        "ports",
        jobset(
            pod=ctr(
                ports=[
                    {"containerPort": 70000, "name": "Web", "protocol": "HTTP"},
                    {"containerPort": 81, "hostPort": 0},
                ]
            )
        ),
        (
            (
                f"{C0}.ports[0].containerPort",
                "container-port",
                "must be between 1 and 65535, inclusive",
            ),
            (
                f"{C0}.ports[0].name",
                "container-port",
                "must contain only alpha-numeric characters (a-z, 0-9)",
            ),
            (f"{C0}.ports[0].protocol", "container-port", 'supported values: "SCTP", "TCP", "UDP"'),
        ),
    ),
    Case(
        "container resources",
        jobset(
            pod=ctr(
                resources={
                    "requests": {
                        "cpu": "2",
                        "memory": "-1Gi",
                        "nvidia.com/gpu": 1,
                        "example.com/fpga": "0.5",
                    },
                    "limits": {"cpu": "1500m", "gpus": 1, "example.com/fpga": 1},
                }
            )
        ),
        (
            (
                f"{C0}.resources.limits",
                "container-resources",
                "Limit must be set for non overcommitable resources",
            ),
            (
                f"{C0}.resources.limits.gpus",
                "container-resources",
                "must be a standard resource for containers",
            ),
            (
                f"{C0}.resources.requests.cpu",
                "container-resources",
                "must be less than or equal to cpu limit of 1500m",
            ),
            (
                f"{C0}.resources.requests.example.com/fpga",
                "container-resources",
                "must be an integer",
            ),
            (
                f"{C0}.resources.requests.example.com/fpga",
                "container-resources",
                "must be equal to example.com/fpga limit",
            ),
            (
                f"{C0}.resources.requests.memory",
                "container-resources",
                "must be greater than or equal to 0",
            ),
        ),
    ),
    Case(
        "GPU requests and limits that agree",
        jobset(
            pod=ctr(
                resources={
                    "requests": {"nvidia.com/gpu": "2", "cpu": 1},
                    "limits": {"nvidia.com/gpu": 2, "cpu": "1000m"},
                }
            )
        ),
    ),
    Case(
        "probes and lifecycle hooks",
        jobset(
            pod={
                "initContainers": [
                    {
                        "name": "init",
                        "image": "x",
                        "readinessProbe": {"exec": {"command": ["true"]}},
                    },
                    {
                        "name": "sidecar",
                        "image": "x",
                        "restartPolicy": "Always",
                        "startupProbe": {"tcpSocket": {"port": 8080}, "successThreshold": 2},
                    },
                ],
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "livenessProbe": {"periodSeconds": -1},
                        "readinessProbe": {
                            "httpGet": {"port": "HTTP_port", "scheme": "FTP"},
                            "exec": {"command": ["true"]},
                            "terminationGracePeriodSeconds": 5,
                        },
                        "startupProbe": {"grpc": {"port": 70000}, "successThreshold": 0},
                        "lifecycle": {"preStop": {}},
                    }
                ],
            }
        ),
        by(
            "container-probe",
            (f"{P}.initContainers[0].readinessProbe", "may not be set for init containers"),
            (f"{P}.initContainers[1].startupProbe.successThreshold", "must be 1"),
            (f"{C0}.livenessProbe", "must specify a handler type"),
            (f"{C0}.livenessProbe.periodSeconds", "must be greater than or equal to 0"),
            (f"{C0}.readinessProbe.httpGet", "may not specify more than 1 handler type"),
            (
                f"{C0}.readinessProbe.terminationGracePeriodSeconds",
                "must not be set for readinessProbes",
            ),
            (f"{C0}.startupProbe.grpc.port", "must be between 1 and 65535"),
            (f"{C0}.lifecycle.preStop", "must specify a handler type"),
        ),
    ),
    Case(
        "valid probes (the first handler's port and scheme are checked)",
        jobset(
            pod=ctr(
                livenessProbe={
                    "httpGet": {"port": "http", "path": "/healthz"},
                    "successThreshold": 1,
                },
                readinessProbe={"tcpSocket": {"port": 80}},
                lifecycle={"preStop": {"sleep": {"seconds": 1}}},
            )
        ),
    ),
    Case(
        "tolerations",
        jobset(
            pod={
                "tolerations": [
                    {"operator": "Equal", "value": "x"},
                    {"key": "k", "operator": "Exists", "value": "v"},
                    {"key": "k", "value": "v", "effect": "NoSchedule", "tolerationSeconds": 5},
                    {"key": "k", "operator": "Above", "effect": "Sometimes"},
                    {
                        "key": "k",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 5,
                    },
                ]
            }
        ),
        by(
            "pod-toleration",
            (f"{P}.tolerations[0].operator", "operator must be Exists when `key` is empty"),
            (f"{P}.tolerations[1].operator", "value must be empty when `operator` is 'Exists'"),
            (
                f"{P}.tolerations[2].effect",
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ),
            (f"{P}.tolerations[3].effect", "Unsupported value: 'Sometimes'"),
            (f"{P}.tolerations[3].operator", "Unsupported value: 'Above'"),
        ),
    ),
    Case(
        "volumeMounts must name a volume or a volume claim policy",
        jobset(
            pod=ctr(
                volumeMounts=[
                    {"name": "cache", "mountPath": "/c"},
                    {"name": "scratch", "mountPath": "/s"},
                ]
            )
            | {"volumes": [{"name": "scratch", "emptyDir": {}}]}
        ),
        ((f"{C0}.volumeMounts[0].name", "container-volume-mount", "Not found: 'cache'"),),
    ),
    Case(
        "volume names are DNS-1123 labels",
        jobset(pod={"volumes": [{"name": "a.b", "emptyDir": {}}]}),
        ((f"{P}.volumes[0].name", "pod-volume-name", "must not contain dots"),),
    ),
    Case(
        # The server also says the mount of "two" is "Not found": misleading, the volume is
        # there; it is reported once, where it is wrong (the agreement test below knows).
        "a volume has at most one source (none means emptyDir); its mounts stand",
        jobset(
            pod={
                "volumes": [
                    {"name": "none"},
                    {"name": "two", "configMap": {"name": "c"}, "emptyDir": {}},
                ]
            }
            | ctr(
                volumeMounts=[
                    {"name": "none", "mountPath": "/n"},
                    {"name": "two", "mountPath": "/t"},
                ]
            )
        ),
        (
            (
                f"{P}.volumes[1].configMap",
                "pod-volume-source",
                "Forbidden: may not specify more than 1 volume type",
            ),
        ),
    ),
    Case(
        "a mount of a volume with an invalid name is not also 'Not found'",
        jobset(
            pod={"volumes": [{"name": "a.b", "emptyDir": {}}]}
            | ctr(volumeMounts=[{"name": "a.b", "mountPath": "/a"}])
        ),
        ((f"{P}.volumes[0].name", "pod-volume-name", "must not contain dots"),),
    ),
    Case(
        "labels and annotations of the Job and pod templates",
        jobset(
            job={
                "template": {
                    "metadata": {"labels": {"app": "bad value!"}, "annotations": {"/x": "1"}},
                    "spec": {"containers": [dict(CONTAINER)], "nodeSelector": {"pool": "a b"}},
                }
            }
        ),
        (
            (
                f"{T}.template.metadata.annotations./x",
                "annotation-key",
                "prefix part must be non-empty",
            ),
            (
                f"{T}.template.metadata.labels.app",
                "label-value",
                "a valid label must be an empty string",
            ),
            (f"{P}.nodeSelector.pool", "label-value", "a valid label must be an empty string"),
        ),
    ),
]

ALL_CASES = SCHEMA_CASES + JOB_CASES


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_template(case: Case) -> None:
    assert_problems(validate(load_jobset(case.document)), case.expected)


def test_allow_unknown_fields_carries_newer_fields_but_still_checks_known_ones() -> None:
    document = jobset(job={"fooBar": 1, "parallelism": "x"})
    problems = validate(load_jobset(document), allow_unknown_fields=True)
    assert [(p.path, p.rule) for p in problems] == [(f"{T}.parallelism", "type")]


def test_field_newer_than_the_installed_client_says_so() -> None:
    # Both ends of the client range meet this test: the floor (30) does not know the field,
    # 34 and later do, and then nothing is reported.
    document = jobset(
        pod=ctr(
            restartPolicyRules=[
                {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
            ]
        )
    )
    if CLIENT_MAJOR >= 34:
        assert validate(load_jobset(document)) == []
        return
    (problem,) = validate(load_jobset(document))
    assert problem.path == f"{C0}.restartPolicyRules"
    assert f"may be newer than the installed kubernetes client {CLIENT_MAJOR}." in problem.message
    assert f"Kubernetes 1.{CLIENT_MAJOR}" in problem.message
    assert validate(load_jobset(document), allow_unknown_fields=True) == []


def test_status_of_pod_condition_pattern_is_optional_on_every_client() -> None:
    # Required in client 30's schema, defaulted to True by Kubernetes and optional in the CRD.
    document = jobset(
        job={
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            }
        },
        pod=NEVER,
    )
    assert validate(load_jobset(document)) == []


def test_template_problems_do_not_stop_jobset_rules() -> None:
    document = jobset(
        job={"parallelism": "many"},
        successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]},
    )
    rules = {p.rule for p in validate(load_jobset(document))}
    assert rules == {"type", "success-policy-target"}


# -- the same JobSets against the devcluster (server-side dry run, fieldValidation=Strict) -------


def _server_rejects(devcluster: Any, namespace: str, document: dict[str, Any]) -> tuple[bool, str]:
    from kubernetes.client.exceptions import ApiException

    body = copy.deepcopy(document)
    body["metadata"]["namespace"] = namespace
    try:
        devcluster.custom.create_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            namespace,
            "jobsets",
            body,
            dry_run="All",
            field_validation="Strict",
        )
    except ApiException as err:
        assert err.status in (400, 422), err
        return True, str(err.body)
    return False, ""


@pytest.mark.cluster
@pytest.mark.parametrize("case", SCHEMA_CASES, ids=[c.id for c in SCHEMA_CASES])
def test_server_agrees_on_the_schema(case: Case, devcluster: Any, cluster_namespace: str) -> None:
    """The CRD's schema (and the webhook's decoding) reject what the schema check rejects."""
    rejected, reason = _server_rejects(devcluster, cluster_namespace, case.document)
    expected = case.server_rejects if case.server_rejects is not None else bool(case.expected)
    assert rejected == expected, reason


LATE_FAILURES = [c for c in JOB_CASES if c.expected]


@pytest.mark.cluster
@pytest.mark.parametrize("case", LATE_FAILURES, ids=[c.id for c in LATE_FAILURES])
def test_upstream_accepts_what_only_the_job_rules_reject(
    case: Case, devcluster: Any, cluster_namespace: str
) -> None:
    """Upstream accepts these JobSets; their Jobs fail later (JobCreationFailed events)."""
    rejected, reason = _server_rejects(devcluster, cluster_namespace, case.document)
    assert not rejected, reason


# Paths of these rules are finer than the server's (it names the whole label map).
_COARSER_ON_SERVER = {"label-key", "label-value", "annotation-key", "annotations-size"}


@pytest.mark.cluster
@pytest.mark.parametrize("case", JOB_CASES, ids=[c.id for c in JOB_CASES])
def test_kubernetes_job_validation_agrees(
    case: Case, devcluster: Any, cluster_namespace: str
) -> None:
    """The Jobs upstream would create (our renderer) pass the API server's Job validation
    exactly when the Job rules find nothing, and the server names the fields we name."""
    import json

    from kubernetes.client.exceptions import ApiException

    from jobset_core.render import render

    jobset = load_jobset(case.document)
    fields: set[str] = set()
    rejected = False
    for job in render(jobset, cluster_namespace, uid="00000000-0000-0000-0000-000000000001").jobs:
        try:
            devcluster.batch.create_namespaced_job(cluster_namespace, job, dry_run="All")
        except ApiException as err:
            assert err.status == 422, err
            rejected = True
            causes = json.loads(err.body)["details"].get("causes", [])
            fields |= {cause["field"] for cause in causes}
    # Deliberate strictness (jobset_core.validation.strictness) is accepted by the server.
    faithful = [e for e in case.expected if not is_deliberate(Problem(e[0], e[2], e[1]))]
    assert rejected == bool(faithful), fields
    for path, rule, _ in faithful:
        if rule in _COARSER_ON_SERVER:
            continue
        ours = "spec" + path[len(T) :]
        assert any(ours == f or ours.startswith((f"{f}.", f"{f}[")) for f in fields), (ours, fields)
    # ...and we name every field the server names (it writes map keys as [key]; it also blames
    # the pod labels for a selector it rejects).
    mine = ["spec" + path[len(T) :] for path, _, _ in faithful]
    coarse = {"spec.template.labels", "spec.template.annotations"}
    if any(rule == "job-selector" for _, rule, _ in case.expected):
        coarse.add("spec.template.metadata.labels")
    # The server also calls a mount of a volume it found invalid "Not found"; we report the
    # volume only (it is there), so those mounts are not ours to name.
    if any(rule in ("pod-volume-source", "pod-volume-name") for _, rule, _ in case.expected):
        coarse |= {f for f in fields if re.search(r"\.volumeMounts\[\d+\]\.name$", f)}
    server = {re.sub(r"\[([^\]0-9][^\]]*)\]", r".\1", f) for f in fields - coarse}
    missed = {
        f for f in server if not any(m == f or m.startswith((f"{f}.", f"{f}[")) for m in mine)
    }
    assert not missed, missed


@pytest.mark.cluster
def test_a_volume_with_two_sources_in_the_servers_words(
    devcluster: Any, cluster_namespace: str
) -> None:
    """The server's message for a volume with two sources is ours, word for word, at the same
    field; it also calls the volume's mount "Not found", which we leave out (the volume is
    there)."""
    import json

    from kubernetes.client.exceptions import ApiException

    from jobset_core.render import render

    document = jobset(
        pod={"volumes": [{"name": "v", "emptyDir": {}, "configMap": {"name": "c"}}]}
        | ctr(volumeMounts=[{"name": "v", "mountPath": "/v"}])
    )
    (problem,) = validate(load_jobset(document))
    (job,) = render(load_jobset(document), cluster_namespace, uid="0" * 36).jobs
    with pytest.raises(ApiException) as err:
        devcluster.batch.create_namespaced_job(
            cluster_namespace, job, dry_run="All", field_validation="Strict"
        )
    causes = {c["field"]: c["message"] for c in json.loads(err.value.body)["details"]["causes"]}
    assert causes == {
        "spec.template.spec.volumes[0].configMap": problem.message,
        "spec.template.spec.containers[0].volumeMounts[0].name": 'Not found: "v"',
    }
    assert problem.path == f"{P}.volumes[0].configMap"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", "1"),
        (2, "2"),
        (0.5, "0.5"),
        ("500m", "0.5"),
        ("1.5", "1.5"),
        ("1Ki", "1024"),
        ("1Gi", str(2**30)),
        ("2k", "2000"),
        ("1M", "1000000"),
        ("100n", "0.0000001"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        ("-1Gi", str(-(2**30))),
        (".5", "0.5"),
        # Go's parser is more lenient than the regular expression in its error message:
        ("Gi", "0"),
        ("-", "0"),
        (".", "0"),
        ("1.", "1"),
        (" 2Mi ", str(2 * 2**20)),
        ("1e+16", "1e16"),
    ],
)
def test_parse_quantity(text: Any, value: str) -> None:
    from decimal import Decimal

    from jobset_core.validation._quantity import parse_quantity

    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["1 GB", "1.2.3", "", " ", True, None, "1gi", "e", "1Kib"])
def test_parse_quantity_rejects_malformed(text: Any) -> None:
    from jobset_core.validation._quantity import parse_quantity

    assert parse_quantity(text) is None


# -- robustness: malformed templates are reported, never crash validate() ---------------------

RICH = jobset(
    job={
        "completions": 2,
        "parallelism": 2,
        "manualSelector": True,
        "selector": {
            "matchLabels": {"a": "b"},
            "matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}],
        },
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {"operator": "In", "values": [1, 2], "containerName": "main"},
                },
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
            ]
        },
        "successPolicy": {"rules": [{"succeededIndexes": "0-1", "succeededCount": 1}]},
        "template": {
            "metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"k": "v"},
                "tolerations": [
                    {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "initContainers": [{"name": "init", "image": "x"}],
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "imagePullPolicy": "Always",
                        "ports": [{"containerPort": 80, "name": "http"}],
                        "env": [{"name": "E", "value": "1"}],
                        "volumeMounts": [
                            {"name": "v", "mountPath": "/v"},
                            {"name": "claim", "mountPath": "/c"},
                        ],
                        "resources": {
                            "requests": {"cpu": "1"},
                            "limits": {"cpu": 2, "nvidia.com/gpu": 1},
                        },
                    }
                ],
            },
        },
    },
    coordinator={"replicatedJob": "rj", "jobIndex": 0, "podIndex": 0},
    volumeClaimPolicies=[
        {"templates": [{"metadata": {"name": "claim"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
    ],
)
ROOTS = (("replicatedJobs", 0, "template", "spec"), ("volumeClaimPolicies", 0, "templates", 0))
WRONG = (None, -3, 1.5, "str", [], [1], {"x": 1})


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else []
    )
    for key, child in items:
        found.extend(_paths(child, (*prefix, key)))
    return found


def _at(document: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = document["spec"]
    for key in path:
        node = node[key]
    return node


def test_rich_template_is_valid() -> None:
    assert validate(load_jobset(RICH)) == []


@pytest.mark.parametrize("root", ROOTS, ids=["job template", "volume claim template"])
def test_malformed_values_anywhere_are_reported_not_raised(root: tuple[Any, ...]) -> None:
    checked = 0
    for path in _paths(_at(RICH, root)):
        for wrong in WRONG:
            document = copy.deepcopy(RICH)
            _at(document, root + path[:-1])[path[-1]] = wrong
            validate(load_jobset(document))  # must not raise
            checked += 1
    assert checked >= 5 * len(WRONG)  # every node of the template was replaced


#: Quantity spellings around the edges of Go's parser (``resource.ParseQuantity``).
QUANTITY_SPELLINGS = [
    *("1", "0", "-0", "+1", "1.", ".5", ".", "-", "+", "Ki", "-Ki", "1e3", "1E-3", "1e+3"),
    *(
        "500m",
        "1.5Gi",
        " 2 ",
        "\t1Mi\n",
        "\u00a01",
        "1 Gi",
        "1Gb",
        "1.2.3",
        "",
        " ",
        "e",
        "1e",
        "1e+",
    ),
    *("1i", "1Kib", "-e-20", "1ee", "12345678901234567890", "1e400", "0x10", "1_000"),
    *(2, 0.5, 1e16, -3),
]


def test_quantity_spellings_match_the_table() -> None:
    from jobset_core.validation._quantity import quantity_error

    accepted = [q for q in QUANTITY_SPELLINGS if not quantity_error(q)]
    assert accepted == [
        *("1", "0", "-0", "+1", "1.", ".5", ".", "-", "+", "Ki", "-Ki", "1e3", "1E-3", "1e+3"),
        *("500m", "1.5Gi", " 2 ", "\u00a01", "12345678901234567890", "1e400"),
        *(2, 0.5, 1e16, -3),
    ]


@pytest.mark.cluster
def test_quantity_parsing_agrees_with_the_server(devcluster: Any, cluster_namespace: str) -> None:
    """The JobSet webhook decodes every quantity with Go's parser: it accepts exactly the
    spellings we accept (values are checked later, by the Job rules)."""
    from jobset_core.validation._quantity import quantity_error

    disagree = []
    for spelling in QUANTITY_SPELLINGS:
        document = jobset(pod=ctr(resources={"limits": {"cpu": spelling}}))
        rejected, reason = _server_rejects(devcluster, cluster_namespace, document)
        if rejected != bool(quantity_error(spelling)):
            disagree.append((spelling, quantity_error(spelling), reason[:200]))
    assert not disagree


@pytest.mark.cluster
def test_quantity_strings_agree_with_the_server(devcluster: Any, cluster_namespace: str) -> None:
    """What the server stores for a quantity is its ``String()``: the spelling where Go keeps
    it, else the canonical form (the divisor rules compare that string)."""
    from jobset_core.validation._quantity import quantity_error, quantity_string

    spellings = [q for q in QUANTITY_SPELLINGS if not quantity_error(q)]
    spellings += ["1000m", "1024Ki", "1536Mi", "0.5Gi", "01", "1.0", "10000", "1e0", "2000000"]
    spellings += [2.0, 6.519347179474125e16, 1e-7, 1.5, 10**30, 1e22, 0.000001]
    body = jobset(
        pod=ctr(resources={"limits": {f"example.com/q{i}": q for i, q in enumerate(spellings)}})
    )
    body["metadata"]["namespace"] = cluster_namespace
    stored = devcluster.custom.create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets", body, dry_run="All"
    )
    pod = stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    limits = pod["containers"][0]["resources"]["limits"]
    theirs = [limits[f"example.com/q{i}"] for i in range(len(spellings))]
    assert [quantity_string(q) for q in spellings] == theirs
