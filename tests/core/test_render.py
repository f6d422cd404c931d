"""The pure renderer against hand-checked expectations.

Cases mirror upstream ``TestConstructJobsFromTemplate`` and ``TestCreateHeadlessSvcIfNecessary``
(``pkg/controllers/jobset_controller_test.go``, v0.12.0) and ``TestGlobalJobIndex`` /
``TestGroupJobIndex`` / ``TestGroupReplicas``; the expected values are written out by hand.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.errors import SpecError
from jobset_core.models import JobSet, OwnerReference, load_jobset
from jobset_core.render import (
    PLACEMENTS,
    RenderedJobSet,
    exclusive_affinity_terms,
    headless_service,
    jobset_owner_reference,
    render,
)

NS = "default"
TOPOLOGY = "cloud.google.com/gke-nodepool"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def rjob(
    name: str,
    replicas: int | None = 1,
    *,
    group: str | None = None,
    job_labels: dict[str, str] | None = None,
    job_annotations: dict[str, str] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    job_spec: dict[str, Any] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One replicated job document (an Indexed Job of 2 pods unless ``job_spec`` says else)."""
    meta: dict[str, Any] = {}
    if job_labels is not None:
        meta["labels"] = job_labels
    if job_annotations is not None:
        meta["annotations"] = job_annotations
    pod_meta: dict[str, Any] = {}
    if pod_labels is not None:
        pod_meta["labels"] = pod_labels
    if pod_annotations is not None:
        pod_meta["annotations"] = pod_annotations
    pod_template: dict[str, Any] = {
        "spec": pod_spec or {"containers": [{"name": "main", "image": "busybox"}]}
    }
    if pod_meta:
        pod_template["metadata"] = pod_meta
    spec = {"parallelism": 2, "completions": 2, **(job_spec or {}), "template": pod_template}
    doc: dict[str, Any] = {"name": name, "template": {"spec": spec}}
    if meta:
        doc["template"]["metadata"] = meta
    if replicas is not None:
        doc["replicas"] = replicas
    if group is not None:
        doc["groupName"] = group
    return doc


def make_jobset(
    *rjobs: dict[str, Any],
    name: str = "test-js",
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    **spec: Any,
) -> JobSet:
    meta: dict[str, Any] = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    if uid is not None:
        meta["uid"] = uid
    doc = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }
    return load_jobset(doc)


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def jobset_keys(
    *,
    js: str = "test-js",
    uid: str = "",
    rj: str,
    attempt: str = "0",
    replicas: str,
    global_replicas: str,
    index: str,
    global_index: str,
    group: str = "default",
    group_replicas: str,
    group_index: str,
    ns: str = NS,
    coordinator: str | None = None,
) -> dict[str, str]:
    """The label set upstream writes, spelled out field by field."""
    out = {
        "jobset.sigs.k8s.io/jobset-name": js,
        "jobset.sigs.k8s.io/jobset-uid": uid,
        "jobset.sigs.k8s.io/replicatedjob-name": rj,
        "jobset.sigs.k8s.io/restart-attempt": attempt,
        "jobset.sigs.k8s.io/replicatedjob-replicas": replicas,
        "jobset.sigs.k8s.io/global-replicas": global_replicas,
        "jobset.sigs.k8s.io/job-index": index,
        "jobset.sigs.k8s.io/job-key": sha1(f"{ns}/{js}-{rj}-{index}"),
        "jobset.sigs.k8s.io/job-global-index": global_index,
        "jobset.sigs.k8s.io/group-name": group,
        "jobset.sigs.k8s.io/group-replicas": group_replicas,
        "jobset.sigs.k8s.io/job-group-index": group_index,
    }
    if coordinator is not None:
        out["jobset.sigs.k8s.io/coordinator"] = coordinator
    return out


def pod_spec_of(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def pod_meta_of(job: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = job["spec"]["template"]["metadata"]
    return meta


# --- names, order, indexes -------------------------------------------------------------------


def test_one_job_per_replica_in_spec_order() -> None:
    js = make_jobset(rjob("workers", 3), rjob("driver", 1), rjob("idle", 0))
    out = render(js, NS)
    assert out.job_names == (
        "test-js-workers-0",
        "test-js-workers-1",
        "test-js-workers-2",
        "test-js-driver-0",
    )
    assert all(job["metadata"]["namespace"] == NS for job in out.jobs)
    assert all(job["apiVersion"] == "batch/v1" and job["kind"] == "Job" for job in out.jobs)


def test_replicas_default_to_one() -> None:
    out = render(make_jobset(rjob("workers", None)), NS)
    assert out.job_names == ("test-js-workers-0",)
    assert out.jobs[0]["metadata"]["labels"][labels.REPLICATED_JOB_REPLICAS] == "1"


GROUPED = (
    rjob("a", 2, group="g1"),
    rjob("b", 1, group="g2"),
    rjob("c", 3, group="g1"),
)


@pytest.mark.parametrize(
    ("job_name", "expected"),
    [
        (
            "test-js-a-1",
            jobset_keys(
                rj="a",
                replicas="2",
                global_replicas="6",
                index="1",
                global_index="1",
                group="g1",
                group_replicas="5",
                group_index="1",
            ),
        ),
        (
            "test-js-b-0",
            jobset_keys(
                rj="b",
                replicas="1",
                global_replicas="6",
                index="0",
                global_index="2",
                group="g2",
                group_replicas="1",
                group_index="0",
            ),
        ),
        (
            "test-js-c-0",
            jobset_keys(
                rj="c",
                replicas="3",
                global_replicas="6",
                index="0",
                global_index="3",
                group="g1",
                group_replicas="5",
                group_index="2",
            ),
        ),
        (
            "test-js-c-2",
            jobset_keys(
                rj="c",
                replicas="3",
                global_replicas="6",
                index="2",
                global_index="5",
                group="g1",
                group_replicas="5",
                group_index="4",
            ),
        ),
    ],
    ids=["first-group-second-job", "other-group", "group-continues-after-gap", "last-job"],
)
def test_global_and_group_indexes(job_name: str, expected: dict[str, str]) -> None:
    out = render(make_jobset(*GROUPED), NS)
    job = out.job(job_name)
    assert job["metadata"]["labels"] == expected
    assert job["metadata"]["annotations"] == expected
    assert pod_meta_of(job)["labels"] == expected
    assert pod_meta_of(job)["annotations"] == expected


def test_default_group_counts_every_replicated_job() -> None:
    out = render(make_jobset(rjob("workers", 2), rjob("driver", 1)), NS)
    assert out.job("test-js-driver-0")["metadata"]["labels"] == jobset_keys(
        rj="driver",
        replicas="1",
        global_replicas="3",
        index="0",
        global_index="2",
        group_replicas="3",
        group_index="2",
    )


def test_job_key_uses_namespace_and_job_name() -> None:
    out = render(make_jobset(rjob("workers", 1), name="myjs"), "default")
    job = out.jobs[0]
    assert job["metadata"]["labels"][labels.JOB_KEY] == "8c93757f4652cb827cc74a49eb07604e615c6993"
    other = render(make_jobset(rjob("workers", 1), name="myjs"), "other").jobs[0]
    assert other["metadata"]["labels"][labels.JOB_KEY] == sha1("other/myjs-workers-0")


def test_label_and_annotation_keys_are_sorted() -> None:
    job = render(make_jobset(rjob("w", 1, job_labels={"zz": "1", "aa": "2"})), NS).jobs[0]
    for meta in (job["metadata"], pod_meta_of(job)):
        assert list(meta["labels"]) == sorted(meta["labels"])
        assert list(meta["annotations"]) == sorted(meta["annotations"])


# --- user metadata ---------------------------------------------------------------------------


def test_user_labels_and_annotations_are_kept_at_their_level() -> None:
    js = make_jobset(
        rjob(
            "rj",
            1,
            job_labels={"job-label": "j"},
            job_annotations={"job-annotation": "ja"},
            pod_labels={"pod-label": "p"},
            pod_annotations={"pod-annotation": "pa"},
        )
    )
    job = render(js, NS).jobs[0]
    keys = jobset_keys(
        rj="rj",
        replicas="1",
        global_replicas="1",
        index="0",
        global_index="0",
        group_replicas="1",
        group_index="0",
    )
    assert job["metadata"]["labels"] == {"job-label": "j", **keys}
    assert job["metadata"]["annotations"] == {"job-annotation": "ja", **keys}
    assert pod_meta_of(job)["labels"] == {"pod-label": "p", **keys}
    assert pod_meta_of(job)["annotations"] == {"pod-annotation": "pa", **keys}


def test_jobset_keys_overwrite_user_keys() -> None:
    js = make_jobset(
        rjob(
            "rj",
            1,
            job_labels={labels.JOBSET_NAME: "spoof", labels.JOB_INDEX: "9"},
            pod_annotations={labels.RESTART_ATTEMPT: "7"},
        )
    )
    job = render(js, NS, restart_attempt=2).jobs[0]
    assert job["metadata"]["labels"][labels.JOBSET_NAME] == "test-js"
    assert job["metadata"]["labels"][labels.JOB_INDEX] == "0"
    assert pod_meta_of(job)["annotations"][labels.RESTART_ATTEMPT] == "2"


def test_template_metadata_name_is_not_copied() -> None:
    doc = rjob("rj", 1)
    doc["template"]["metadata"] = {"name": "ignored", "namespace": "elsewhere"}
    job = render(make_jobset(doc), NS).jobs[0]
    assert set(job["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert job["metadata"]["name"] == "test-js-rj-0"
    assert job["metadata"]["namespace"] == NS


# --- attempts, uid, owner --------------------------------------------------------------------


def test_restart_attempt_label() -> None:
    job = render(make_jobset(rjob("rj", 1)), NS, restart_attempt=3).jobs[0]
    assert job["metadata"]["labels"][labels.RESTART_ATTEMPT] == "3"
    assert pod_meta_of(job)["labels"][labels.RESTART_ATTEMPT] == "3"


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [
        (None, [None, None, None]),
        ({}, ["0", "0", "0"]),
        ({"rj": [2, 0, 5]}, ["2", "0", "5"]),
        ({"rj": [1]}, ["1", "0", "0"]),
        ({"other": [4, 4, 4]}, ["0", "0", "0"]),
    ],
    ids=["gate-off", "gate-on-no-status", "per-job", "short-list", "other-rjob"],
)
def test_job_restart_attempt_label(
    attempts: dict[str, list[int]] | None, expected: list[str | None]
) -> None:
    out = render(make_jobset(rjob("rj", 3)), NS, job_restart_attempts=attempts)
    got = [job["metadata"]["labels"].get(labels.JOB_RESTART_ATTEMPT) for job in out.jobs]
    assert got == expected
    got_pod = [pod_meta_of(job)["annotations"].get(labels.JOB_RESTART_ATTEMPT) for job in out.jobs]
    assert got_pod == expected


def test_uid_and_owner_reference() -> None:
    out = render(make_jobset(rjob("rj", 1)), NS, uid="1234")
    expected_owner = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "test-js",
        "uid": "1234",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for obj in out.objects():
        assert obj["metadata"]["ownerReferences"] == [expected_owner]
    assert out.jobs[0]["metadata"]["labels"][labels.JOBSET_UID] == "1234"
    assert pod_meta_of(out.jobs[0])["annotations"][labels.JOBSET_UID] == "1234"
    assert jobset_owner_reference("test-js", "1234") == expected_owner


def test_uid_defaults_to_metadata_uid() -> None:
    out = render(make_jobset(rjob("rj", 1), uid="from-meta"), NS)
    assert out.jobs[0]["metadata"]["labels"][labels.JOBSET_UID] == "from-meta"
    assert out.jobs[0]["metadata"]["ownerReferences"][0]["uid"] == "from-meta"
    override = render(make_jobset(rjob("rj", 1), uid="from-meta"), NS, uid="explicit")
    assert override.jobs[0]["metadata"]["labels"][labels.JOBSET_UID] == "explicit"


def test_no_uid_means_empty_uid_label_and_no_owner() -> None:
    out = render(make_jobset(rjob("rj", 1)), NS)
    assert out.jobs[0]["metadata"]["labels"][labels.JOBSET_UID] == ""
    for obj in out.objects():
        assert "ownerReferences" not in obj["metadata"]


@pytest.mark.parametrize(
    "owner",
    [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": "cm-uid"},
        OwnerReference(api_version="v1", kind="ConfigMap", name="anchor", uid="cm-uid"),
    ],
    ids=["mapping", "model"],
)
def test_explicit_owner_replaces_the_jobset(owner: Any) -> None:
    out = render(make_jobset(rjob("rj", 1)), NS, uid="js-uid", owner=owner)
    expected = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": "cm-uid"}]
    for obj in out.objects():
        assert obj["metadata"]["ownerReferences"] == expected
    assert out.jobs[0]["metadata"]["labels"][labels.JOBSET_UID] == "js-uid"


# --- spec: defaults, suspend, subdomain, coordinator, volumes --------------------------------


def test_webhook_defaults_are_applied() -> None:
    job = render(make_jobset(rjob("rj", 1)), NS).jobs[0]
    assert job["spec"]["completionMode"] == "Indexed"
    assert pod_spec_of(job)["restartPolicy"] == "OnFailure"


def test_explicit_job_settings_are_kept() -> None:
    doc = rjob(
        "rj",
        1,
        job_spec={"completionMode": "NonIndexed", "backoffLimit": 0},
        pod_spec={"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]},
    )
    job = render(make_jobset(doc), NS).jobs[0]
    assert job["spec"]["completionMode"] == "NonIndexed"
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["parallelism"] == 2
    assert pod_spec_of(job)["restartPolicy"] == "Never"
    assert pod_spec_of(job)["containers"] == [{"name": "m", "image": "x"}]


@pytest.mark.parametrize(
    ("suspend", "expected"),
    [(None, False), (False, False), (True, True)],
    ids=["unset", "false", "true"],
)
def test_suspend_is_always_set(suspend: bool | None, expected: bool) -> None:
    spec = {} if suspend is None else {"suspend": suspend}
    out = render(make_jobset(rjob("a", 2), rjob("b", 1), **spec), NS)
    assert [job["spec"]["suspend"] for job in out.jobs] == [expected] * 3


@pytest.mark.parametrize(
    ("network", "subdomain"),
    [
        (None, "test-js"),
        ({"enableDNSHostnames": True}, "test-js"),
        ({"subdomain": "custom"}, "custom"),
        ({"enableDNSHostnames": False}, None),
        ({"enableDNSHostnames": False, "subdomain": "custom"}, None),
    ],
    ids=["default", "explicit-on", "custom-subdomain", "off", "off-with-subdomain"],
)
def test_pod_subdomain_and_service(network: dict[str, Any] | None, subdomain: str | None) -> None:
    spec = {} if network is None else {"network": network}
    out = render(make_jobset(rjob("rj", 2), **spec), NS)
    assert [pod_spec_of(job).get("subdomain") for job in out.jobs] == [subdomain, subdomain]
    if subdomain is None:
        assert out.service is None
        assert out.objects() == out.jobs
    else:
        assert out.service is not None
        assert out.service["metadata"]["name"] == subdomain
        assert out.objects() == (out.service, *out.jobs)


@pytest.mark.parametrize(
    ("publish", "expected"),
    [
        (None, {"publishNotReadyAddresses": True}),
        (True, {"publishNotReadyAddresses": True}),
        (False, {}),
    ],
    ids=["default", "true", "false-omitted-like-go"],
)
def test_headless_service(publish: bool | None, expected: dict[str, bool]) -> None:
    network = {} if publish is None else {"publishNotReadyAddresses": publish}
    out = render(make_jobset(rjob("rj", 1), network=network), "ns1")
    assert out.service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "test-js", "namespace": "ns1"},
        "spec": {
            "clusterIP": "None",
            "selector": {"jobset.sigs.k8s.io/jobset-name": "test-js"},
            **expected,
        },
    }


@pytest.mark.parametrize(
    ("network", "owner", "expected_name"),
    [
        (None, None, "test-js"),
        (
            {"subdomain": "net"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u"},
            "net",
        ),
        ({"enableDNSHostnames": False}, None, None),
    ],
    ids=["undefaulted-jobset", "custom-subdomain-with-owner", "dns-off"],
)
def test_headless_service_alone_applies_defaults(
    network: dict[str, Any] | None, owner: dict[str, str] | None, expected_name: str | None
) -> None:
    spec = {} if network is None else {"network": network}
    js = make_jobset(rjob("rj", 1), **spec)
    service = headless_service(js, NS, owner=owner)
    if expected_name is None:
        assert service is None
        return
    assert service is not None
    assert service["metadata"]["name"] == expected_name
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["metadata"].get("ownerReferences") == ([owner] if owner else None)
    assert service == render(js, NS, owner=owner).service


def test_coordinator_label_on_every_job() -> None:
    js = make_jobset(
        rjob("driver", 1),
        rjob("workers", 2),
        coordinator={"replicatedJob": "workers", "jobIndex": 1, "podIndex": 1},
        network={"subdomain": "net"},
    )
    out = render(js, NS)
    for job in out.jobs:
        for meta in (job["metadata"], pod_meta_of(job)):
            assert meta["labels"][labels.COORDINATOR] == "test-js-workers-1-1.net"
            assert meta["annotations"][labels.COORDINATOR] == "test-js-workers-1-1.net"


def test_no_coordinator_label_without_coordinator() -> None:
    job = render(make_jobset(rjob("rj", 1)), NS).jobs[0]
    assert labels.COORDINATOR not in job["metadata"]["labels"]


def _pvc(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def test_volume_claim_policies_add_mounted_claims_only() -> None:
    mounted = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
        "initContainers": [
            {
                "name": "init",
                "image": "busybox",
                "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
            }
        ],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }
    js = make_jobset(
        rjob("trainer", 1, pod_spec=mounted),
        rjob("other", 1),
        volumeClaimPolicies=[
            {"templates": [_pvc("data"), _pvc("unused")]},
            {"templates": [_pvc("cache")], "retentionPolicy": {"whenDeleted": "Retain"}},
        ],
    )
    out = render(js, NS)
    assert pod_spec_of(out.job("test-js-trainer-0"))["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-test-js"}},
        {"name": "cache", "persistentVolumeClaim": {"claimName": "cache-test-js"}},
    ]
    assert "volumes" not in pod_spec_of(out.job("test-js-other-0"))


# --- exclusive placement ---------------------------------------------------------------------


NODE_SELECTOR_TOLERATION = {
    "key": "alpha.jobset.sigs.k8s.io/no-schedule",
    "operator": "Exists",
    "effect": "NoSchedule",
}


@pytest.mark.parametrize(
    ("jobset_annotations", "a_annotations", "expected_a", "expected_b"),
    [
        # Upstream "exclusive placement for a ReplicatedJob".
        ({}, {labels.EXCLUSIVE_TOPOLOGY: "rack"}, {labels.EXCLUSIVE_TOPOLOGY: "rack"}, {}),
        # Upstream "exclusive placement for entire JobSet".
        (
            {labels.EXCLUSIVE_TOPOLOGY: "rack"},
            {},
            {labels.EXCLUSIVE_TOPOLOGY: "rack"},
            {labels.EXCLUSIVE_TOPOLOGY: "rack"},
        ),
        # The replicated job's value overrides the JobSet's.
        (
            {labels.EXCLUSIVE_TOPOLOGY: "rack"},
            {labels.EXCLUSIVE_TOPOLOGY: "zone"},
            {labels.EXCLUSIVE_TOPOLOGY: "zone"},
            {labels.EXCLUSIVE_TOPOLOGY: "rack"},
        ),
        # Upstream "exclusive placement using nodeSelectorStrategy for entire JobSet".
        (
            {labels.EXCLUSIVE_TOPOLOGY: "rack", labels.NODE_SELECTOR_STRATEGY: "true"},
            {},
            {labels.EXCLUSIVE_TOPOLOGY: "rack", labels.NODE_SELECTOR_STRATEGY: "true"},
            {labels.EXCLUSIVE_TOPOLOGY: "rack", labels.NODE_SELECTOR_STRATEGY: "true"},
        ),
        # node-selector without exclusive-topology at the JobSet level is not copied.
        ({labels.NODE_SELECTOR_STRATEGY: "true"}, {}, {}, {}),
        # Unrelated JobSet annotations are never copied.
        ({"team": "ml"}, {}, {}, {}),
    ],
    ids=[
        "rjob-level",
        "jobset-level",
        "rjob-overrides",
        "jobset-node-selector",
        "ns-only",
        "other",
    ],
)
def test_exclusive_annotations_on_pods(
    jobset_annotations: dict[str, str],
    a_annotations: dict[str, str],
    expected_a: dict[str, str],
    expected_b: dict[str, str],
) -> None:
    js = make_jobset(
        rjob("a", 1, job_annotations=a_annotations),
        rjob("b", 1),
        annotations=jobset_annotations,
    )
    out = render(js, NS)
    for job_name, expected in (("test-js-a-0", expected_a), ("test-js-b-0", expected_b)):
        pod_annotations = pod_meta_of(out.job(job_name))["annotations"]
        extra = {k: v for k, v in pod_annotations.items() if k.startswith("alpha.")}
        assert extra == expected, job_name


def test_node_selector_strategy_for_a_replicated_job() -> None:
    # Upstream "exclusive placement using nodeSelectorStrategy for a ReplicatedJob".
    js = make_jobset(
        rjob(
            "a",
            1,
            job_annotations={
                labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY,
                labels.NODE_SELECTOR_STRATEGY: "1",
            },
            pod_spec={
                "containers": [{"name": "m", "image": "x"}],
                "nodeSelector": {"pool": "p1"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
            },
        ),
        rjob("b", 1),
    )
    out = render(js, "ns1")
    pod_a = pod_spec_of(out.job("test-js-a-0"))
    assert pod_a["nodeSelector"] == {
        "pool": "p1",
        "alpha.jobset.sigs.k8s.io/namespaced-job": "ns1_test-js-a-0",
    }
    assert pod_a["tolerations"] == [{"key": "gpu", "operator": "Exists"}, NODE_SELECTOR_TOLERATION]
    pod_b = pod_spec_of(out.job("test-js-b-0"))
    assert "nodeSelector" not in pod_b
    assert "tolerations" not in pod_b


def test_node_selector_strategy_from_jobset_for_every_job() -> None:
    js = make_jobset(
        rjob("a", 2),
        annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY, labels.NODE_SELECTOR_STRATEGY: "true"},
    )
    out = render(js, NS)
    assert [pod_spec_of(job)["nodeSelector"] for job in out.jobs] == [
        {"alpha.jobset.sigs.k8s.io/namespaced-job": "default_test-js-a-0"},
        {"alpha.jobset.sigs.k8s.io/namespaced-job": "default_test-js-a-1"},
    ]
    assert [pod_spec_of(job)["tolerations"] for job in out.jobs] == [
        [NODE_SELECTOR_TOLERATION],
        [NODE_SELECTOR_TOLERATION],
    ]


def test_node_selector_strategy_quirk_template_annotation_with_jobset_exclusive() -> None:
    # constructJob checks the *Job's* annotations, which start as a copy of the replicated job
    # template's: a template node-selector annotation plus a JobSet-level exclusive-topology
    # switches the strategy on, although the pods only get exclusive-topology.
    js = make_jobset(
        rjob("a", 1, job_annotations={labels.NODE_SELECTOR_STRATEGY: "true"}),
        annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY},
    )
    job = render(js, NS).jobs[0]
    assert job["metadata"]["annotations"][labels.NODE_SELECTOR_STRATEGY] == "true"
    assert labels.NODE_SELECTOR_STRATEGY not in pod_meta_of(job)["annotations"]
    assert pod_spec_of(job)["nodeSelector"] == {
        "alpha.jobset.sigs.k8s.io/namespaced-job": "default_test-js-a-0"
    }


def expected_affinity(job_key: str, topology: str) -> dict[str, Any]:
    return {
        "podAffinity": {
            REQUIRED: [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {
                                "key": "jobset.sigs.k8s.io/job-key",
                                "operator": "In",
                                "values": [job_key],
                            }
                        ]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
        "podAntiAffinity": {
            REQUIRED: [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "jobset.sigs.k8s.io/job-key", "operator": "Exists"},
                            {
                                "key": "jobset.sigs.k8s.io/job-key",
                                "operator": "NotIn",
                                "values": [job_key],
                            },
                        ]
                    },
                    "topologyKey": topology,
                    "namespaceSelector": {},
                }
            ]
        },
    }


def test_webhook_placement_leaves_pod_template_alone() -> None:
    js = make_jobset(rjob("a", 2), annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY})
    out = render(js, NS)
    assert all("affinity" not in pod_spec_of(job) for job in out.jobs)


def test_affinity_placement_pins_each_job_to_its_own_domain() -> None:
    js = make_jobset(rjob("a", 2), rjob("b", 1), annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY})
    out = render(js, NS, placement="affinity")
    for job in out.jobs:
        key = sha1(f"{NS}/{job['metadata']['name']}")
        assert pod_spec_of(job)["affinity"] == expected_affinity(key, TOPOLOGY)
    assert exclusive_affinity_terms("k", "t") == (
        expected_affinity("k", "t")["podAffinity"][REQUIRED][0],
        expected_affinity("k", "t")["podAntiAffinity"][REQUIRED][0],
    )


def test_affinity_placement_only_for_exclusive_replicated_jobs() -> None:
    js = make_jobset(
        rjob("a", 1, job_annotations={labels.EXCLUSIVE_TOPOLOGY: "zone"}),
        rjob("b", 1),
    )
    out = render(js, NS, placement="affinity")
    key = sha1(f"{NS}/test-js-a-0")
    assert pod_spec_of(out.job("test-js-a-0"))["affinity"] == expected_affinity(key, "zone")
    assert "affinity" not in pod_spec_of(out.job("test-js-b-0"))


def test_affinity_placement_honours_a_pod_template_annotation() -> None:
    # The pod webhook keys on the pod's own annotations, so a pod-template annotation counts.
    js = make_jobset(rjob("a", 1, pod_annotations={labels.EXCLUSIVE_TOPOLOGY: "zone"}))
    job = render(js, NS, placement="affinity").jobs[0]
    assert pod_spec_of(job)["affinity"] == expected_affinity(sha1(f"{NS}/test-js-a-0"), "zone")


def test_affinity_placement_appends_to_user_affinity() -> None:
    user_term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "host"}
    node_affinity = {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": []}]}}
    pod_spec = {
        "containers": [{"name": "m", "image": "x"}],
        "affinity": {"nodeAffinity": node_affinity, "podAffinity": {REQUIRED: [user_term]}},
    }
    js = make_jobset(rjob("a", 1, pod_spec=pod_spec), annotations={labels.EXCLUSIVE_TOPOLOGY: "z"})
    job = render(js, NS, placement="affinity").jobs[0]
    key = sha1(f"{NS}/test-js-a-0")
    want = expected_affinity(key, "z")
    assert pod_spec_of(job)["affinity"] == {
        "nodeAffinity": node_affinity,
        "podAffinity": {REQUIRED: [user_term, *want["podAffinity"][REQUIRED]]},
        "podAntiAffinity": want["podAntiAffinity"],
    }


def test_affinity_placement_defers_to_node_selector_strategy() -> None:
    js = make_jobset(
        rjob("a", 1),
        annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY, labels.NODE_SELECTOR_STRATEGY: "true"},
    )
    job = render(js, NS, placement="affinity").jobs[0]
    assert "affinity" not in pod_spec_of(job)
    assert pod_spec_of(job)["nodeSelector"] == {
        "alpha.jobset.sigs.k8s.io/namespaced-job": "default_test-js-a-0"
    }


def test_affinity_placement_changes_nothing_without_exclusive_topology() -> None:
    js = make_jobset(rjob("a", 2), rjob("b", 1), coordinator={"replicatedJob": "a"})
    assert render(js, NS, placement="affinity") == render(js, NS, placement="webhook")
    assert PLACEMENTS == ("webhook", "affinity")


# --- purity, errors, the result value --------------------------------------------------------


def test_public_names_are_exact_and_sorted() -> None:
    # ``jobset_core.render`` the attribute is the function (re-exported by the package).
    for module in map(importlib.import_module, ("jobset_core.render", "jobset_core.naming")):
        assert module.__all__ == sorted(module.__all__)
        assert all(hasattr(module, name) for name in module.__all__)


def test_render_is_pure_and_order_stable() -> None:
    js = make_jobset(
        rjob("b", 2, job_labels={"z": "1", "a": "2"}),
        rjob("a", 1),
        annotations={labels.EXCLUSIVE_TOPOLOGY: TOPOLOGY},
        volumeClaimPolicies=[{"templates": [_pvc("data")]}],
    )
    before = js.model_dump(by_alias=True)
    first = render(js, NS, uid="u", placement="affinity")
    second = render(copy.deepcopy(js), NS, uid="u", placement="affinity")
    assert first == second
    assert repr(first.objects()) == repr(second.objects())  # same key order too
    assert js.model_dump(by_alias=True) == before
    assert first.job_names == ("test-js-b-0", "test-js-b-1", "test-js-a-0")


def test_jobs_do_not_share_mutable_state() -> None:
    out = render(make_jobset(rjob("a", 2)), NS)
    pod_spec_of(out.jobs[0])["containers"][0]["image"] = "changed"
    out.jobs[0]["metadata"]["labels"]["x"] = "y"
    assert pod_spec_of(out.jobs[1])["containers"][0]["image"] == "busybox"
    assert "x" not in out.jobs[1]["metadata"]["labels"]
    assert "x" not in pod_meta_of(out.jobs[0])["labels"]


def test_rendered_lookups() -> None:
    out = render(make_jobset(rjob("a", 2), rjob("b", 1)), NS)
    assert isinstance(out, RenderedJobSet)
    assert out.job("test-js-b-0") is out.jobs[2]
    assert [j["metadata"]["name"] for j in out.jobs_for("a")] == ["test-js-a-0", "test-js-a-1"]
    assert out.jobs_for("missing") == ()
    with pytest.raises(KeyError):
        out.job("test-js-c-0")


def test_render_needs_a_name() -> None:
    js = JobSet.model_validate(
        {"metadata": {"generateName": "x-"}, "spec": {"replicatedJobs": [rjob("a", 1)]}}
    )
    with pytest.raises(SpecError) as err:
        render(js, NS)
    assert [p.path for p in err.value.problems] == ["metadata.name"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"namespace": ""}, "namespace"),
        ({"namespace": NS, "restart_attempt": -1}, "restart_attempt"),
        ({"namespace": NS, "placement": "scheduler"}, "placement"),
    ],
    ids=["empty-namespace", "negative-attempt", "unknown-placement"],
)
def test_render_rejects_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render(make_jobset(rjob("a", 1)), **kwargs)
