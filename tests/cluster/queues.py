"""Kueue in the devcluster, for tests: a LocalQueue in a test's own namespace, the queues and
priority classes the cluster comes up with (``localcluster/kueue.py``), a JobSet's Workload.

A queued JobSet carries the label :data:`QUEUE_LABEL` naming a LocalQueue of its namespace,
and its pods request ``cpu`` and/or ``memory`` (Kueue counts requests, not node capacity;
the ClusterQueue's quota is :data:`QUOTA`; a pod without requests counts 0 and always fits, a
pod requesting a resource the ClusterQueue does not cover is never admitted).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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
    "own_queue",
    "queued_jobset",
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


@contextlib.contextmanager
def own_queue(custom: Any, namespace: str, cpu: str = "4") -> Iterator[str]:
    """A ClusterQueue of this test alone (``cpu`` CPUs of the devcluster's flavor, preemption
    by priority within it), for ``namespace`` only, and a LocalQueue of it there: tests that
    run at once never share quota. Yields the LocalQueue's name; the ClusterQueue is deleted
    afterwards (Kueue finishes deleting it once its Workloads are gone with the namespace)."""
    name = f"cq-{namespace}"[:63]
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": namespace},
            },
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        }
                    ],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", body)
    try:
        create_local_queue(custom, namespace, LOCAL_QUEUE, cluster_queue=name)
        yield LOCAL_QUEUE
    finally:
        with contextlib.suppress(Exception):
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)


def queued_jobset(
    name: str,
    *,
    cpu: str,
    run_seconds: float,
    replicas: int = 1,
    queue: str | None = LOCAL_QUEUE,
    priority: str | None = None,
    labels: dict[str, str] | None = None,
    notes: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet of ``replicas`` pods of one replicated job ``w``, each requesting ``cpu``
    CPUs (Kueue counts requests) and running ``run_seconds`` on the kwok nodes; labelled for
    ``queue`` (and ``priority``) unless they are ``None``."""
    annotations = {"devcluster/run-seconds": str(run_seconds), **(notes or {})}
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
        },
    }
    job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}
    marks = dict(labels or {})
    if queue:
        marks[QUEUE_LABEL] = queue
    if priority:
        marks[PRIORITY_LABEL] = priority
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": marks},
        "spec": {
            "replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": job}}]
        },
    }
