"""A list page is kept as its objects' trimmed parts, each made as the object is decoded, and
the stores keep each as its compact JSON text: what they then keep, and how they route it,
must be what the whole objects gave, and a waiting run holds text only between looks."""

from __future__ import annotations

import copy
import gc
import json
from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.client._answers import decode_list
from jobset_core.observe._informer import _keeper
from jobset_core.observe._store import DECODED_FROM, Stores
from jobset_core.observe._views import Kind, pack, run_of, trim, unpack
from jobset_core.resources import ApiResource

_META = {
    "namespace": "ns",
    "uid": "u-1",
    "resourceVersion": "42",
    "creationTimestamp": "2026-12-01T00:00:00Z",
    "generation": 2,
    "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:status": {}}}],
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{" * 200},
}
_CHILD = {
    L.JOBSET_NAME: "train",
    L.REPLICATED_JOB_NAME: "workers",
    L.JOB_INDEX: "0",
    "unrelated": "dropped",
}
_CONDITIONS = [
    {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "t"},
]

OBJECTS: dict[Kind, dict[str, Any]] = {
    Kind.JOBSET: {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {**_META, "name": "train", "labels": {"team": "ml"}},
        "spec": {
            "successPolicy": {"operator": "All"},
            "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}}
            ],
        },
        "status": {"restarts": 1, "replicatedJobsStatus": [{"name": "workers", "ready": 2}]},
    },
    Kind.ANCHOR: {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {**_META, "name": "train", "labels": {L.ANCHOR_LABEL: L.ANCHOR_VALUE}},
        "data": {"status": "{}"},
    },
    Kind.JOB: {
        "metadata": {
            **_META,
            "name": "train-workers-0",
            "labels": _CHILD,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "JobSet", "name": "train", "uid": "u", "x": 1}
            ],
        },
        "spec": {"parallelism": 4, "completions": 4, "template": {"spec": {"containers": []}}},
        "status": {"active": 4, "conditions": _CONDITIONS},
    },
    Kind.POD: {
        "metadata": {
            **_META,
            "name": "train-workers-0-0-abcde",
            "labels": _CHILD,
            "annotations": {L.JOB_COMPLETION_INDEX: "0", "other": "dropped"},
        },
        "spec": {
            "nodeName": "node-1",
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x", "env": [{"name": "A", "value": "1"}]}],
        },
        "status": {
            "phase": "Running",
            "conditions": _CONDITIONS,
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0}],
            "podIP": "10.0.0.1",
        },
    },
    Kind.EVENT: {
        "metadata": {**_META, "name": "train.1"},
        "type": "Warning",
        "reason": "FailedCreate",
        "message": "quota",
        "count": 3,
        "involvedObject": {"kind": "JobSet", "namespace": "ns", "name": "train", "uid": "u"},
        "source": {"component": "jobset"},
    },
    Kind.WORKLOAD: {
        "metadata": {
            **_META,
            "name": "jobset-train-1",
            "labels": {L.KUEUE_QUEUE: "q", "other": "dropped"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "JobSet", "name": "train"}],
        },
        "spec": {"active": True, "queueName": "q", "podSets": [{"name": "workers"}]},
        "status": {
            "conditions": _CONDITIONS,
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "workers", "count": 8, "resourceUsage": {}}],
            },
        },
    },
}


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.value)
def test_what_is_kept_of_a_trimmed_object_is_itself(kind: Kind) -> None:
    whole = OBJECTS[kind]
    trimmed = trim(kind, whole)
    assert trim(kind, trimmed) == trimmed
    assert run_of(kind, trimmed) == run_of(kind, whole)
    assert run_of(kind, whole) == ("ns", "train")


def _decoded(kind: Kind, page: list[dict[str, Any]], stores: Stores) -> tuple[Any, ...]:
    """An informer's list of a page of ``page``'s objects, read as the server writes it, into
    ``stores``: what the page keeps itself, what the stores listed, and the runs changed."""
    resource = ApiResource("", "v1", "Thing", "things")
    body = json.dumps({"kind": "ThingList", "metadata": {}, "items": page}).encode()
    listed: dict[tuple[str, str], set[str]] = {}
    changed: set[tuple[str, str]] = set()
    items = decode_list(body, resource, _keeper(kind, stores, listed, changed)).items
    return items, listed, changed


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.value)
def test_a_page_kept_as_it_is_decoded_is_stored_as_the_whole_page_would_be(kind: Kind) -> None:
    """The stores keep what they kept of the whole objects, and list the same names, from a
    page applied object by object as it is decoded; the page itself keeps nothing."""
    other = copy.deepcopy(OBJECTS[kind])
    other["metadata"]["namespace"] = "elsewhere"
    if kind is Kind.EVENT:
        other["involvedObject"]["namespace"] = "elsewhere"
    seen = []
    for as_decoded in (False, True):
        stores = Stores()
        stores.track(("ns", "train"), tuple(Kind))
        page = [copy.deepcopy(other), copy.deepcopy(OBJECTS[kind])]
        if as_decoded:
            items, listed, changed = _decoded(kind, page, stores)
            assert items == []
        else:
            listed = {}
            changed = stores.relist_page(kind, page, listed)
        stores.relist_end(kind, listed, "50", [("ns", "train")])
        seen.append((changed, listed, stores.tracked(("ns", "train")).observation()))
    assert seen[0] == seen[1]
    assert seen[1][0] == {("ns", "train")}


def test_objects_no_one_keeps_are_neither_trimmed_nor_kept() -> None:
    ours = copy.deepcopy(OBJECTS[Kind.POD])
    theirs = copy.deepcopy(OBJECTS[Kind.POD])
    theirs["metadata"]["labels"] = {**_CHILD, L.JOBSET_NAME: "other"}
    stores = Stores()
    stores.track(("ns", "train"), (Kind.POD,))
    _, listed, changed = _decoded(Kind.POD, [theirs, ours], stores)
    assert listed == {("ns", "train"): {"train-workers-0-0-abcde"}}
    assert changed == {("ns", "train")}
    assert stores.size["pods"] == 1
    assert stores.tracked(("ns", "train")).observation().pods == (trim(Kind.POD, ours),)


@pytest.mark.parametrize("kind", list(Kind), ids=lambda k: k.value)
def test_a_packed_object_reads_back_as_itself_and_equal_objects_pack_equal(kind: Kind) -> None:
    trimmed = trim(kind, OBJECTS[kind])
    text = pack(trimmed)
    assert isinstance(text, bytes)
    assert unpack(text) == trimmed
    assert pack(copy.deepcopy(trimmed)) == text
    assert unpack(text) is not unpack(text)
    assert pack({**trimmed, "metadata": {**trimmed["metadata"], "uid": "u-2"}}) != text


def test_a_run_keeps_text_between_looks_and_one_snapshot_while_it_is_held() -> None:
    """The stores keep each object packed; the looks of one change share one snapshot; once
    nobody holds it, it is gone, and the next look reads the text back."""
    stores = Stores()
    key = ("ns", "train")
    stores.track(key, tuple(Kind))
    for kind in (Kind.JOBSET, Kind.JOB, Kind.POD, Kind.EVENT, Kind.WORKLOAD):
        stores.relist(kind, [copy.deepcopy(OBJECTS[kind])], "50", [key])
    run = stores.tracked(key)
    assert run is not None
    kept = run.texts()
    assert len(kept) == 5 and all(isinstance(text, bytes) for text in kept)
    first = run.observation()
    assert first.jobset == trim(Kind.JOBSET, OBJECTS[Kind.JOBSET])
    assert first.pods == (trim(Kind.POD, OBJECTS[Kind.POD]),)
    assert run.observation() is first  # held: the same snapshot
    pod = first.pods[0]
    del first
    gc.collect()
    again = run.observation()
    assert again.pods == (pod,) and again.pods[0] is not pod  # read back from the text
    assert stores.apply(Kind.POD, "MODIFIED", copy.deepcopy(OBJECTS[Kind.POD])) is None
    assert run.observation() is again  # an unchanged object changes nothing


#: A pod as a kubelet reports one that ran, failed once and runs again: every condition,
#: init and regular containers, a last state, IDs and images.
_FULL_POD: dict[str, Any] = {
    "metadata": {
        **OBJECTS[Kind.POD]["metadata"],
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train-workers-0", "uid": "j"}
        ],
    },
    "spec": OBJECTS[Kind.POD]["spec"],
    "status": {
        "phase": "Running",
        "startTime": "t0",
        "conditions": [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": "t1"}
            for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady")
        ]
        + [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "m"},
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": "t0",
            },
        ],
        "initContainerStatuses": [
            {
                "name": "init",
                "image": "i",
                "imageID": "sha256:1",
                "containerID": "c://1",
                "ready": True,
                "started": False,
                "restartCount": 0,
                "lastState": {},
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "containerID": "c://1",
                        "finishedAt": "t1",
                    }
                },
            },
        ],
        "containerStatuses": [
            {
                "name": "main",
                "image": "x",
                "imageID": "sha256:2",
                "containerID": "c://2",
                "ready": False,
                "started": True,
                "restartCount": 1,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                "lastState": {
                    "terminated": {
                        "exitCode": 3,
                        "reason": "Error",
                        "message": "boom",
                        "containerID": "c://2",
                    }
                },
            },
        ],
        "hostIP": "10.0.0.2",
        "podIP": "10.0.0.1",
        "qosClass": "BestEffort",
    },
}


def test_a_trimmed_pod_reads_as_the_whole_one_and_keeps_only_what_is_read() -> None:
    from dataclasses import replace

    from jobset_core.pods import PodView

    trimmed = trim(Kind.POD, _FULL_POD)
    whole = PodView.of(_FULL_POD)
    read = [c for c in whole.conditions if c.type in ("PodScheduled", "Ready")]
    labels = {k: v for k, v in whole.labels.items() if k != "unrelated"}
    assert replace(PodView.of(trimmed), raw=whole.raw) == replace(
        whole, conditions=tuple(read), labels=labels
    )
    status = trimmed["status"]
    assert [c["type"] for c in status["conditions"]] == ["Ready", "PodScheduled"]
    assert "lastProbeTime" not in status["conditions"][1]
    assert [sorted(s) for s in status["initContainerStatuses"]] == [
        ["name", "restartCount", "state"]  # an empty last state is no state
    ]
    assert sorted(status["containerStatuses"][0]) == ["lastState", "name", "restartCount", "state"]
    assert trim(Kind.POD, trimmed) == trimmed


def _pod(name: str, version: str, phase: str = "Running") -> dict[str, Any]:
    pod = copy.deepcopy(OBJECTS[Kind.POD])
    pod["metadata"] = {**pod["metadata"], "name": name, "resourceVersion": version}
    pod["status"] = {**pod["status"], "phase": phase}
    return pod


@pytest.mark.parametrize("pods", [DECODED_FROM - 1, DECODED_FROM])
def test_a_big_run_reads_back_only_what_changed(pods: int) -> None:
    """From :data:`DECODED_FROM` children on, a snapshot reuses what the last one read back
    for every object that did not change; a smaller run reads everything back each time."""
    stores = Stores()
    key = ("ns", "train")
    stores.track(key, (Kind.POD,))
    stores.relist(Kind.POD, [_pod(f"p{i:03d}", "10") for i in range(pods)], "50", [key])
    run = stores.tracked(key)
    assert run is not None
    first = run.observation().pods
    assert stores.apply(Kind.POD, "MODIFIED", _pod("p000", "11", "Succeeded")) == key
    second = run.observation().pods
    assert second[0]["status"]["phase"] == "Succeeded" and second[0] is not first[0]
    assert second[1:] == first[1:]
    big = pods >= DECODED_FROM
    assert all((a is b) == big for a, b in zip(first[1:], second[1:], strict=True))
