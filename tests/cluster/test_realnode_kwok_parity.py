"""Ground truth for the kwok stages: a real kubelet's pod states beside the scripted ones.

Each case starts the same pod twice in one namespace: on the real node (kubelet v1.36 +
containerd v2.4 really fail to start it) and on a kwok node with the matching devcluster
annotation (``devcluster/cannot-start``, ``devcluster/crash-loop``). Both are watched until the
states of interest were seen; then the order of states and the status fields (phase,
conditions, container states with reasons and messages, lastState, ready/started) must be the
same, ignoring timestamps, IDs, IPs and the pods' own names, and, for the crash loop, the
back-off durations (kwok's are shortened by ``devcluster/crash-backoff-seconds``). The pods'
``Warning`` Events (what the core's pod start rules read and show) must be the same too: type,
reason and message, ignoring counts and times.
"""

from __future__ import annotations

import copy
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.cluster.pytest_devcluster import SHELL_IMAGE, DevCluster, RealNode

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

ABSENT_IMAGE = "devcluster.local/absent:1"


@dataclass
class Case:
    container: dict[str, Any]
    annotations: dict[str, str]
    #: state keys (see :func:`state_key`) that must all be seen, in this order
    wanted: list[str]
    restart_policy: str = "Never"
    volumes: list[dict[str, Any]] = field(default_factory=list)
    kwok_only: dict[str, Any] = field(default_factory=dict)


CASES = {
    "ErrImagePull": Case(
        {"image": ABSENT_IMAGE, "imagePullPolicy": "IfNotPresent"},
        {"devcluster/cannot-start": "ErrImagePull"},
        ["waiting:ContainerCreating", "waiting:ErrImagePull", "waiting:ImagePullBackOff"],
    ),
    "ErrImageNeverPull": Case(
        {"image": ABSENT_IMAGE, "imagePullPolicy": "Never"},
        {"devcluster/cannot-start": "ErrImageNeverPull"},
        ["waiting:ContainerCreating", "waiting:ErrImageNeverPull"],
    ),
    "InvalidImageName": Case(
        {"image": "devcluster.local/Not-Lowercase:1"},
        {"devcluster/cannot-start": "InvalidImageName"},
        ["waiting:ContainerCreating", "waiting:InvalidImageName"],
    ),
    "missing-secret": Case(
        {
            "image": SHELL_IMAGE,
            "imagePullPolicy": "Never",
            "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}],
        },
        {"devcluster/cannot-start": "CreateContainerConfigError"},
        ["waiting:ContainerCreating", "waiting:CreateContainerConfigError"],
    ),
    "missing-configmap": Case(
        {
            "image": SHELL_IMAGE,
            "imagePullPolicy": "Never",
            "envFrom": [{"configMapRef": {"name": "absent-config"}}],
        },
        {"devcluster/cannot-start": "CreateContainerConfigError"},
        ["waiting:ContainerCreating", "waiting:CreateContainerConfigError"],
    ),
    # A host path that is no shared mount cannot be mounted HostToContainer: containerd fails
    # to generate the spec. kwok's default detail is another spec error of the same shape.
    "CreateContainerError": Case(
        {
            "image": SHELL_IMAGE,
            "imagePullPolicy": "Never",
            "volumeMounts": [
                {"name": "h", "mountPath": "/h", "mountPropagation": "HostToContainer"}
            ],
        },
        {"devcluster/cannot-start": "CreateContainerError"},
        ["waiting:ContainerCreating", "waiting:CreateContainerError"],
        volumes=[{"name": "h", "hostPath": {"path": "/tmp", "type": "Directory"}}],
    ),
    "CrashLoopBackOff-Always": Case(
        {
            "image": SHELL_IMAGE,
            "imagePullPolicy": "Never",
            "command": ["sh", "-c", "sleep 1; echo -n why > /dev/termination-log; exit 2"],
        },
        {
            "devcluster/crash-loop": "true",
            "devcluster/exit-code": "2",
            "devcluster/termination-message": "why",
            "devcluster/run-seconds": "1",
        },
        ["running", "terminated:Error", "waiting:CrashLoopBackOff", "running"],
        restart_policy="Always",
        kwok_only={"devcluster/crash-backoff-seconds": "2"},
    ),
    "CrashLoopBackOff-OnFailure": Case(
        {
            "image": SHELL_IMAGE,
            "imagePullPolicy": "Never",
            "command": ["sh", "-c", "sleep 1; exit 3"],
        },
        {
            "devcluster/crash-loop": "true",
            "devcluster/exit-code": "3",
            "devcluster/run-seconds": "1",
        },
        ["running", "terminated:Error", "waiting:CrashLoopBackOff", "running"],
        restart_policy="OnFailure",
        kwok_only={"devcluster/crash-backoff-seconds": "2"},
    ),
}


def state_key(state: dict[str, Any] | None) -> str:
    for kind in ("waiting", "running", "terminated"):
        if state and state.get(kind) is not None:
            reason = state[kind].get("reason")
            return f"{kind}:{reason}" if reason else kind
    return "none"


def normalized(text: str | None, pod: dict[str, Any]) -> str | None:
    """A message without what differs between any two pods (names, IDs, durations)."""
    if text is None:
        return None
    meta = pod["metadata"]
    text = text.replace(meta["uid"], "<uid>").replace(f"{meta['name']}_", "<pod>_")
    text = re.sub(r"[0-9a-f]{64}", "<id>", text)
    text = re.sub(r"back-off \S+ restarting", "back-off <d> restarting", text)
    if "failed to generate spec: " in text:  # the shape, not which spec error
        text = text.split("failed to generate spec: ")[0] + "failed to generate spec: <detail>"
    return text


def view_state(state: dict[str, Any] | None, pod: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, value in (state or {}).items():
        if value is None:
            continue
        out[kind] = {
            k: normalized(v, pod) if k == "message" else v
            for k, v in value.items()
            if k in ("reason", "message", "exitCode")
        }
    return out


def view(pod: dict[str, Any]) -> dict[str, Any]:
    """The fields compared: what a controller or the operator looks at."""
    status = pod.get("status") or {}
    conditions = {
        c["type"]: (c["status"], c.get("reason"), normalized(c.get("message"), pod))
        for c in status.get("conditions") or []
        if c["type"] in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    }
    containers = [
        {
            "name": cs["name"],
            "image": cs.get("image"),
            "ready": cs.get("ready"),
            "started": cs.get("started"),
            "state": view_state(cs.get("state"), pod),
            "lastState": view_state(cs.get("lastState"), pod),
        }
        for cs in status.get("containerStatuses") or []
    ]
    return {"phase": status.get("phase"), "conditions": conditions, "containers": containers}


@dataclass
class Seen:
    keys: list[str] = field(default_factory=list)
    #: the last status of each state key, and the restart counts seen
    at: dict[str, dict[str, Any]] = field(default_factory=dict)
    restarts: list[int] = field(default_factory=list)


def watch(dc: DevCluster, namespace: str, names: list[str], wanted: list[str], timeout: float):
    """Every status the API server stored for the pods (a watch: no state is missed between
    two polls), until each pod has shown ``wanted``."""
    from kubernetes import watch as kwatch

    seen = {name: Seen() for name in names}
    api = dc.api_client()
    deadline = time.monotonic() + timeout
    stream = kwatch.Watch()
    while time.monotonic() < deadline:
        for event in stream.stream(
            dc.core.list_namespaced_pod,
            namespace,
            timeout_seconds=max(1, int(deadline - time.monotonic())),
        ):
            pod = api.sanitize_for_serialization(event["object"])
            record = seen.get(pod["metadata"]["name"])
            if record is None:
                continue
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            key = state_key(statuses[0].get("state")) if statuses else "none"
            if not record.keys or record.keys[-1] != key:
                record.keys.append(key)
            record.at[key] = pod
            if statuses:
                record.restarts.append(statuses[0].get("restartCount", 0))
            if all(in_order(wanted, s.keys) for s in seen.values()):
                stream.stop()
                return seen
    return seen


def in_order(wanted: list[str], keys: list[str]) -> bool:
    """``wanted`` is a subsequence of ``keys``."""
    it = iter(keys)
    return all(any(k == w for k in it) for w in wanted)


def order_of_first_appearance(keys: list[str]) -> list[str]:
    return [k for i, k in enumerate(keys) if k not in keys[:i] and k != "none"]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_kwok_pod_shows_what_the_real_kubelet_reports(
    case: Case, devcluster: DevCluster, real_node: RealNode, cluster_namespace: str
) -> None:
    suffix = uuid.uuid4().hex[:6]
    spec = {
        "restartPolicy": case.restart_policy,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", **copy.deepcopy(case.container)}],
        "volumes": copy.deepcopy(case.volumes),
    }
    real = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"real-{suffix}"},
        "spec": real_node.place(copy.deepcopy(spec)),
    }
    kwok = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kwok-{suffix}",
            "annotations": {**case.annotations, **case.kwok_only},
        },
        "spec": {**copy.deepcopy(spec), "nodeSelector": {"type": "kwok"}},
    }
    for body in (real, kwok):
        devcluster.core.create_namespaced_pod(cluster_namespace, body)
    names = [real["metadata"]["name"], kwok["metadata"]["name"]]
    seen = watch(devcluster, cluster_namespace, names, case.wanted, timeout=120)
    real_seen, kwok_seen = seen[names[0]], seen[names[1]]
    assert in_order(case.wanted, real_seen.keys), f"the real kubelet went {real_seen.keys}"
    assert in_order(case.wanted, kwok_seen.keys), f"kwok went {kwok_seen.keys}"
    # the same states, first seen in the same order
    assert order_of_first_appearance(kwok_seen.keys) == order_of_first_appearance(real_seen.keys)
    # and in each of them the same fields (ContainerCreating is transient on both: the
    # sandbox may or may not be ready yet when it is seen)
    for key in dict.fromkeys(case.wanted):
        if key != "waiting:ContainerCreating":
            assert view(kwok_seen.at[key]) == view(real_seen.at[key]), key
    # restart counts only grow, and both have restarted the container
    for record in (real_seen, kwok_seen):
        assert record.restarts == sorted(record.restarts)
    if case.restart_policy != "Never":
        assert real_seen.restarts[-1] >= 2 and kwok_seen.restarts[-1] >= 2
    # the same Warning Events about each (the kubelet may write its last one a moment later)
    pods = {name: real_seen.at[case.wanted[-1]] for name in names[:1]}
    pods[names[1]] = kwok_seen.at[case.wanted[-1]]
    deadline = time.monotonic() + 20
    while True:
        found = {
            name: warnings_about(devcluster, cluster_namespace, pod) for name, pod in pods.items()
        }
        if found[names[0]] == found[names[1]] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert found[names[0]], "the real kubelet wrote no Warning Event"
    assert found[names[1]] == found[names[0]]


def warnings_about(
    dc: DevCluster, namespace: str, pod: dict[str, Any]
) -> set[tuple[str, str, str]]:
    """The pod's Warning Events as ``(reason, message, fieldPath)``, messages normalized."""
    name = pod["metadata"]["name"]
    events = dc.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},type=Warning"
    ).items
    return {
        (e.reason, normalized(e.message, pod) or "", e.involved_object.field_path or "")
        for e in events
    }


def test_a_long_termination_message_is_cut_as_the_kubelet_cuts_it(
    devcluster: DevCluster, real_node: RealNode, cluster_namespace: str
) -> None:
    """The kubelet keeps the last 4096 bytes of a longer termination message (what the core's
    result check expects); kwok's ``devcluster/termination-message`` does the same."""
    text = "".join(f"{i:09d}\n" for i in range(500))  # 5,000 bytes
    suffix = uuid.uuid4().hex[:6]
    script = 'i=0; while [ $i -lt 500 ]; do printf "%09d\\n" $i; i=$((i+1)); done'
    container = {"name": "c", "image": SHELL_IMAGE, "imagePullPolicy": "IfNotPresent"}
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1}
    real = {
        "metadata": {"name": f"real-{suffix}"},
        "spec": real_node.place(
            {
                **spec,
                "containers": [
                    {**container, "command": ["sh", "-c", f"{script} > /dev/termination-log"]}
                ],
            }
        ),
    }
    kwok = {
        "metadata": {
            "name": f"kwok-{suffix}",
            "annotations": {"devcluster/termination-message": text, "devcluster/run-seconds": "1"},
        },
        "spec": {**spec, "containers": [container], "nodeSelector": {"type": "kwok"}},
    }
    for body in (real, kwok):
        devcluster.core.create_namespaced_pod(cluster_namespace, {"kind": "Pod", **body})
    names = [real["metadata"]["name"], kwok["metadata"]["name"]]
    seen = watch(devcluster, cluster_namespace, names, ["terminated:Completed"], timeout=120)
    messages = [
        seen[name].at["terminated:Completed"]["status"]["containerStatuses"][0]["state"][
            "terminated"
        ]["message"]
        for name in names
    ]
    assert messages[0] == text[-4096:], f"the real kubelet kept {len(messages[0])} bytes"
    assert messages[1] == messages[0]
