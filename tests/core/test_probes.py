"""The server checks' pure half: which objects are dry-run, and how a refusal reads (the
cluster's side is tests/core/test_server_checks.py)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.errors import ApiError, Forbidden, Invalid
from jobset_core.models import load_jobset
from jobset_core.render import (
    admission_plugin,
    child_probes,
    refusal_problems,
    run_object_probe,
    unsupported_dry_run,
)
from jobset_core.render._probes import jobset_path, pod_of
from jobset_core.resources import CONFIG_MAP, JOB, POD, SERVICE
from tests.cluster.bodies import jobset, replicated_job


@pytest.mark.parametrize(
    ("message", "plugin"),
    [
        (
            'pods "w-0-x" is forbidden: violates PodSecurity "restricted:latest": '
            "allowPrivilegeEscalation != false",
            'PodSecurity "restricted:latest"',
        ),
        (
            'pods "w" is forbidden: exceeded quota: compute, requested: requests.memory=2Gi, '
            "used: requests.memory=0, limited: requests.memory=1Gi",
            "ResourceQuota compute",
        ),
        (
            'pods "w" is forbidden: maximum cpu usage per Container is 1, but limit is 2',
            "LimitRange",
        ),
        (
            'pods "w" is forbidden: minimum memory usage per Pod is 1Gi, but request is 1Mi',
            "LimitRange",
        ),
        (
            "cpu max limit to request ratio per Container is 2, but provided ratio is 4",
            "LimitRange",
        ),
        (
            'pods "w" is forbidden: error looking up service account ns/nobody: '
            'serviceaccount "nobody" not found',
            "ServiceAccount",
        ),
        (
            'admission webhook "vjobset.kb.io" denied the request: spec: Invalid value',
            'admission webhook "vjobset.kb.io"',
        ),
        (
            "jobs.batch \"w\" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding "
            "'no-latest' denied request: images must be pinned",
            "ValidatingAdmissionPolicy no-latest",
        ),
        # The API server's own validation names no plugin.
        ('Job.batch "w" is invalid: spec.template.spec.containers[0].image: Required value', None),
        ("must be less than or equal to cpu limit of 1", None),
        # The cluster's own trouble is no refusal.
        (
            'Internal error occurred: failed calling webhook "vjobset.kb.io": connection refused',
            None,
        ),
    ],
)
def test_the_plugin_a_refusal_names(message: str, plugin: str | None) -> None:
    assert admission_plugin(message) == plugin


def test_a_webhook_that_cannot_take_a_dry_run_is_not_a_refusal() -> None:
    said = 'admission webhook "audit.example.com" does not support dry run'
    assert unsupported_dry_run(ApiError(400, "BadRequest", said)) == "audit.example.com"
    assert unsupported_dry_run(ApiError(400, "BadRequest", "strict decoding error")) is None


def _probes(**spec: Any) -> list[Any]:
    body = jobset("train", replicated_job("leader"), replicated_job("workers", replicas=3), **spec)
    body["metadata"]["namespace"] = "ns"
    return child_probes(load_jobset(body), "ns", placement="webhook", service="network" in spec)


def test_a_job_and_a_pod_a_replicated_job_never_one_a_replica() -> None:
    probes = _probes()
    assert [(p.resource, p.path) for p in probes] == [
        (JOB, "spec.replicatedJobs[0].template"),
        (POD, "spec.replicatedJobs[0].template.spec.template"),
        (JOB, "spec.replicatedJobs[1].template"),
        (POD, "spec.replicatedJobs[1].template.spec.template"),
    ]
    assert probes[2].body["metadata"]["name"] == "train-workers-0"
    assert "ownerReferences" not in probes[2].body["metadata"]


def test_the_native_service_comes_first() -> None:
    probes = _probes(network={"enableDNSHostnames": True, "subdomain": "net"})
    assert (probes[0].resource, probes[0].path) == (SERVICE, "spec.network")
    assert probes[0].body["metadata"]["name"] == "net"


def test_the_pod_is_the_first_index_as_the_job_controller_makes_it() -> None:
    job = _probes(network={"enableDNSHostnames": True})[3].body
    pod = pod_of(job)
    meta = pod["metadata"]
    assert meta["generateName"] == "train-workers-0-0-"
    assert meta["labels"]["batch.kubernetes.io/job-name"] == "train-workers-0"
    assert meta["labels"]["job-name"] == "train-workers-0"
    assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    assert meta["labels"]["jobset.sigs.k8s.io/job-index"] == "0"
    assert pod["spec"]["hostname"] == "train-workers-0-0"
    assert pod["spec"]["subdomain"] == "train"
    assert job["spec"]["template"]["spec"].get("hostname") is None  # the Job is untouched


@pytest.mark.parametrize(
    ("index", "path", "expected"),
    [
        (0, "metadata.name", "spec.replicatedJobs[0].name"),  # a Job's name: its only source
        (0, "spec.backoffLimit", "spec.replicatedJobs[0].template.spec.backoffLimit"),
        (
            1,
            "spec.containers[0].image",
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].image",
        ),
        (1, "metadata.labels", "spec.replicatedJobs[0].template.spec.template.metadata.labels"),
        (1, "", "spec.replicatedJobs[0].template.spec.template"),
    ],
)
def test_a_childs_field_path_is_the_jobsets(index: int, path: str, expected: str) -> None:
    assert jobset_path(_probes()[index], path) == expected


def test_the_service_name_is_the_subdomain_and_the_run_objects_paths_are_its_own() -> None:
    service = _probes(network={"enableDNSHostnames": True})[0]
    assert jobset_path(service, "metadata.name") == "spec.network.subdomain"
    head = run_object_probe(CONFIG_MAP, {"metadata": {"name": "a", "ownerReferences": [{}]}})
    assert head.path == "" and "ownerReferences" not in head.body["metadata"]
    assert jobset_path(head, "data") == "data"


def test_causes_on_their_paths_and_a_plugin_on_the_objects() -> None:
    job, pod = _probes()[2:4]
    invalid = Invalid(
        422,
        "Invalid",
        'Job.batch "train-workers-0" is invalid: ...',
        {
            "causes": [
                {"field": "spec.template.spec.containers[0].image", "message": "Required value"}
            ]
        },
    )
    (problem,) = refusal_problems(job, invalid)
    assert problem.path == "spec.replicatedJobs[1].template.spec.template.spec.containers[0].image"
    assert (
        problem.message
        == "Required value (the API server, on the Jobs of replicated job 'workers')"
    )
    psa = Forbidden(
        403,
        "Forbidden",
        'pods "train-workers-0-0-abcde" is forbidden: violates PodSecurity "baseline:v1.36": '
        'privileged (container "main" must not set securityContext.privileged=true)',
    )
    (problem,) = refusal_problems(pod, psa)
    assert problem.path == "spec.replicatedJobs[1].template.spec.template"
    assert problem.message == (
        "PodSecurity \"baseline:v1.36\" refuses the pods of replicated job 'workers': privileged "
        '(container "main" must not set securityContext.privileged=true)'
    )
