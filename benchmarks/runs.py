"""Many waiting runs at once: create them, wait until their pods run, end some together."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from benchmarks.cluster import BenchCluster, progress
from benchmarks.workloads import BENCH_LABEL, NEVER, finish_at, jobset_body

__all__ = ["WaitingRun", "create_waiting", "finish"]

_JOBSET = ("jobset.x-k8s.io", "v1alpha2")


@dataclass(frozen=True)
class WaitingRun:
    """A JobSet whose one pod runs until told to finish.

    Attributes:
        ns: Its namespace.
        name: The JobSet's name.
        uid: The JobSet's UID.
        job: Its child Job's name.
        pod: Its pod's name.
    """

    ns: str
    name: str
    uid: str
    job: str
    pod: str

    @property
    def key(self) -> str:
        return f"{self.ns}/{self.name}"

    def task(self, **more: Any) -> dict[str, Any]:
        """The fleet's description of it."""
        return {
            "ns": self.ns,
            "name": self.name,
            "uid": self.uid,
            "job": self.job,
            "pod": self.pod,
            **more,
        }


def create_waiting(
    cluster: BenchCluster, namespaces: list[str], count: int, timeout: float = 900
) -> list[WaitingRun]:
    """``count`` waiting JobSets spread over ``namespaces`` (round robin), once every pod runs."""
    items = [(namespaces[i % len(namespaces)], f"w{i}") for i in range(count)]

    def create(item: tuple[str, str]) -> str:
        namespace, name = item
        body = jobset_body(name, annotations=NEVER, run=cluster.run)
        made = cluster.custom.create_namespaced_custom_object(*_JOBSET, namespace, "jobsets", body)
        return str(made["metadata"]["uid"])

    started = time.monotonic()
    uids = cluster.parallel(create, items, workers=24)
    progress(
        f"created {count} JobSets in {len(namespaces)} namespace(s) "
        f"in {time.monotonic() - started:.1f}s"
    )
    wanted = {ns for ns, _ in items}
    deadline = time.monotonic() + timeout
    pods: dict[tuple[str, str], Any] = {}
    while True:
        listed = cluster.core.list_pod_for_all_namespaces(
            label_selector=f"{BENCH_LABEL}={cluster.run},jobset.sigs.k8s.io/jobset-name"
        ).items
        pods = {
            (p.metadata.namespace, p.metadata.labels["jobset.sigs.k8s.io/jobset-name"]): p
            for p in listed
            if p.metadata.namespace in wanted and p.status.phase == "Running"
        }
        if len(pods) >= count:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(pods)} of {count} pods running after {timeout:.0f}s")
        time.sleep(2)
    progress(f"{count} pods running, {time.monotonic() - started:.1f}s after the first create")
    runs = []
    for (namespace, name), uid in zip(items, uids, strict=True):
        pod = pods[(namespace, name)]
        job = (
            pod.metadata.labels.get("batch.kubernetes.io/job-name")
            or pod.metadata.labels["job-name"]
        )
        runs.append(WaitingRun(namespace, name, uid, job, pod.metadata.name))
    return runs


def finish(cluster: BenchCluster, runs: list[WaitingRun], lead: float = 3.0) -> float:
    """Make the pods of ``runs`` exit together, ``lead`` seconds from now; returns when."""
    at = time.time() + lead
    body = {"metadata": {"annotations": finish_at(at)}}
    cluster.parallel(
        lambda r: cluster.core.patch_namespaced_pod(r.pod, r.ns, body), runs, workers=32
    )
    late = time.time() - at
    if late > 0:
        progress(
            f"WARNING: telling {len(runs)} pods to finish took {lead + late:.1f}s (past the moment)"
        )
    return at
