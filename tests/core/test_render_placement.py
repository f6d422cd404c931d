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
    """Every pod exists and is either bound to a node or marked unschedulable."""
    if len(pods) < JOBS * PODS_PER_JOB:
        return False
    for pod in pods:
        if pod.spec.node_name:
            continue
        conditions = pod.status.conditions or []
        if not any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conditions):
            return False
    return True


def test_affinity_placement_gives_each_job_its_own_slice(
    devcluster: Any, cluster_namespace: str
) -> None:
    out = render(_jobset(), cluster_namespace, placement="affinity")
    for job in out.jobs:
        del job["spec"]["template"]["metadata"]["labels"][labels.JOBSET_NAME]
        devcluster.batch.create_namespaced_job(cluster_namespace, job)

    def settled_pods() -> list[Any] | None:
        pods = _pods(devcluster, cluster_namespace)
        return pods if _settled(pods) else None

    pods = devcluster.wait_for(
        settled_pods,
        timeout=90,
        desc="every pod bound or unschedulable",
    )
    slice_of = {name: lbl[SLICE] for name, lbl in devcluster.node_labels().items()}
    slices_by_job: dict[str, set[str]] = defaultdict(set)
    pending_by_job: dict[str, int] = defaultdict(int)
    for pod in pods:
        job = pod.metadata.labels["batch.kubernetes.io/job-name"]
        if pod.spec.node_name:
            slices_by_job[job].add(slice_of[pod.spec.node_name])
        else:
            pending_by_job[job] += 1

    assert all(len(slices) == 1 for slices in slices_by_job.values()), dict(slices_by_job)
    taken = [next(iter(slices)) for slices in slices_by_job.values()]
    assert sorted(taken) == ["slice-0", "slice-1", "slice-2", "slice-3"]
    assert len(pending_by_job) == 1, dict(pending_by_job)
    (left_out,) = pending_by_job
    assert pending_by_job[left_out] == PODS_PER_JOB
    assert left_out not in slices_by_job
