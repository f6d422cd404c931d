"""Exclusive placement rendered as pod (anti-)affinity, decided by the real scheduler.

``render(..., placement="affinity")`` must give on its own what upstream gets from its pod
webhook: all pods of one child Job in one topology domain, and no two Jobs in the same domain.
The devcluster has 4 slices (``devcluster/slice``) of 2 nodes each. Five Jobs of 2 pods are
created directly (as the native backend does, without a JobSet object): four must take one
slice each, the fifth must stay unschedulable.

The devcluster also runs the upstream JobSet pod webhook, which a cluster without the controller
does not have. Its object selector is the ``jobset-name`` pod label, so the test drops that label
from the pod templates to keep the webhook out and judge our terms alone.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.models import load_jobset
from jobset_core.render import render

pytestmark = pytest.mark.cluster

SLICE = "devcluster/slice"
JOBS = 5
PODS_PER_JOB = 2


def _jobset() -> Any:
    return load_jobset(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "excl", "annotations": {labels.EXCLUSIVE_TOPOLOGY: SLICE}},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "slice",
                        "replicas": JOBS,
                        "template": {
                            "spec": {
                                "parallelism": PODS_PER_JOB,
                                "completions": PODS_PER_JOB,
                                "template": {
                                    "metadata": {
                                        "annotations": {"devcluster/never-finish": "true"}
                                    },
                                    "spec": {
                                        "containers": [{"name": "main", "image": "busybox:1.36"}]
                                    },
                                },
                            }
                        },
                    }
                ]
            },
        }
    )


def _pods(devcluster: Any, namespace: str) -> list[Any]:
    return list(devcluster.core.list_namespaced_pod(namespace).items)


def _settled(pods: list[Any]) -> bool:
    """Every pod exists and is bound or marked unschedulable, each Job all bound or all not.

    A Job half bound is a passing state (its other pods follow by affinity once the scheduler
    retries them), so the test waits it out instead of judging it.
    """
    if len(pods) < JOBS * PODS_PER_JOB:
        return False
    bound_by_job: dict[str, set[bool]] = defaultdict(set)
    for pod in pods:
        bound = bool(pod.spec.node_name)
        conditions = pod.status.conditions or []
        if not bound and not any(
            c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions
        ):
            return False
        bound_by_job[pod.metadata.labels["batch.kubernetes.io/job-name"]].add(bound)
    return all(len(states) == 1 for states in bound_by_job.values())


def _wait_for_terminating_pods_to_go(devcluster: Any, timeout: float = 60.0) -> None:
    """Give job-keyed pods of earlier tests (namespaces being deleted) time to disappear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = devcluster.core.list_pod_for_all_namespaces(label_selector=labels.JOB_KEY).items
        if all(pod.metadata.deletion_timestamp is None for pod in pods):
            return
        time.sleep(1)


def _foreign_slices(devcluster: Any, namespace: str, slice_of: dict[str, str]) -> set[str]:
    """Slices holding a live pod with a ``job-key`` from another namespace (other tests)."""
    pods = devcluster.core.list_pod_for_all_namespaces(label_selector=labels.JOB_KEY).items
    return {
        slice_of[pod.spec.node_name]
        for pod in pods
        if pod.metadata.namespace != namespace
        and pod.spec.node_name in slice_of
        and pod.status.phase in ("Pending", "Running")
        and pod.metadata.deletion_timestamp is None
    }


def test_affinity_placement_gives_each_job_its_own_slice(
    devcluster: Any, cluster_namespace: str
) -> None:
    slice_of = {name: lbl[SLICE] for name, lbl in devcluster.node_labels().items() if SLICE in lbl}
    _wait_for_terminating_pods_to_go(devcluster)
    foreign_before = _foreign_slices(devcluster, cluster_namespace, slice_of)
    out = render(_jobset(), cluster_namespace, placement="affinity")
    for job in out.jobs:
        del job["spec"]["template"]["metadata"]["labels"][labels.JOBSET_NAME]
        devcluster.batch.create_namespaced_job(cluster_namespace, job)

    def settled_pods() -> list[Any] | None:
        pods = _pods(devcluster, cluster_namespace)
        return pods if _settled(pods) else None

    pods = devcluster.wait_for(settled_pods, timeout=90, desc="every pod bound or unschedulable")
    foreign_after = _foreign_slices(devcluster, cluster_namespace, slice_of)
    slices_by_job: dict[str, set[str]] = defaultdict(set)
    pending_by_job: dict[str, int] = defaultdict(int)
    for pod in pods:
        job = pod.metadata.labels["batch.kubernetes.io/job-name"]
        if pod.spec.node_name:
            slices_by_job[job].add(slice_of[pod.spec.node_name])
        else:
            pending_by_job[job] += 1

    # Each Job in one slice, no two Jobs in one slice, no slice shared with another workload's
    # job-keyed pods (the anti-affinity holds in both directions and across namespaces).
    assert all(len(slices) == 1 for slices in slices_by_job.values()), dict(slices_by_job)
    taken = [next(iter(slices)) for slices in slices_by_job.values()]
    assert len(set(taken)) == len(taken), dict(slices_by_job)
    assert not set(taken) & foreign_after, (taken, foreign_after)
    # Four slices for five Jobs: at least one Job is left out, entirely.
    assert pending_by_job, "all five Jobs were placed on four slices"
    assert all(pending_by_job[job] == PODS_PER_JOB for job in pending_by_job), dict(pending_by_job)
    assert not set(pending_by_job) & set(slices_by_job)
    if not foreign_before and not foreign_after:  # a quiet cluster: every slice is used
        assert sorted(taken) == ["slice-0", "slice-1", "slice-2", "slice-3"]
        assert len(pending_by_job) == 1
