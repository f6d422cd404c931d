"""Kueue in the devcluster, for tests: a LocalQueue in a test's own namespace, the queues and
priority classes the cluster comes up with (``localcluster/kueue.py``), a JobSet's Workload.

A queued JobSet carries the label :data:`QUEUE_LABEL` naming a LocalQueue of its namespace,
and its pods request ``cpu`` and/or ``memory`` (Kueue counts requests, not node capacity;
the ClusterQueue's quota is :data:`QUOTA`; a pod without requests counts 0 and always fits, a
pod requesting a resource the ClusterQueue does not cover is never admitted).
"""

from __future__ import annotations

from typing import Any

from tests.cluster.localcluster.kueue import CLUSTER_QUEUE, FLAVOR, HIGH, LOW, QUEUE_LABEL, QUOTA

__all__ = [
    "CLUSTER_QUEUE",
    "FLAVOR",
    "HIGH",
    "LOCAL_QUEUE",
    "LOW",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "QUOTA",
    "condition",
    "create_local_queue",
    "workload_of",
]

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
#: The LocalQueue name tests use (never ``default``: see the module's docstring).
LOCAL_QUEUE = "devcluster-queue"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def create_local_queue(
    custom: Any, namespace: str, name: str = LOCAL_QUEUE, cluster_queue: str = CLUSTER_QUEUE
) -> dict[str, Any]:
    """Create a LocalQueue of the devcluster's ClusterQueue in ``namespace`` (``custom`` is a
    ``kubernetes.client.CustomObjectsApi``); it goes with the namespace."""
    if name == "default":
        raise ValueError("a LocalQueue named default would queue every JobSet of the namespace")
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }
    created: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "localqueues", body
    )
    return created


def workload_of(custom: Any, namespace: str, uid: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the job with this UID (label ``kueue.x-k8s.io/job-uid``)."""
    items = custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, "workloads", label_selector=f"{JOB_UID_LABEL}={uid}"
    )["items"]
    return dict(items[0]) if items else None


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The condition ``ctype`` of an object's status (any status value), or None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None
