"""The objects the benchmarks run (pure): JobSets, bare Jobs and pods on the kwok nodes.

Every pod's container is named ``base`` (what ``KubernetesPodTrigger`` looks for) and carries
either ``devcluster/never-finish`` (it waits until told) or ``devcluster/finish-at`` (its
containers exit at that moment: many runs can end in the same second). A waiting pod is told to
finish by patching its annotations with :func:`finish_at`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

__all__ = [
    "BENCH_LABEL",
    "NEVER",
    "finish_at",
    "gang",
    "iso",
    "job_body",
    "jobset_body",
    "pod_body",
]

#: On every object the benchmarks create (value: the run's id).
BENCH_LABEL = "airflow-provider-jobset/bench"
NEVER = {"devcluster/never-finish": "true"}


def gang(pods: int) -> tuple[int, int]:
    """How a JobSet of (about) ``pods`` pods is cut: Jobs of 8 pods (one Job below 8); the
    number of Jobs and the pods of each."""
    per_job = 8 if pods >= 8 else pods
    return pods // per_job, per_job


def iso(at: float) -> str:
    """``at`` (epoch seconds) as RFC 3339 with nanoseconds, as kwok reads it."""
    stamp = dt.datetime.fromtimestamp(at, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def finish_at(at: float) -> dict[str, str]:
    """Annotations that make a pod's containers exit (code 0) at ``at``."""
    return {"devcluster/never-finish": "false", "devcluster/finish-at": iso(at)}


def _pod_spec() -> dict[str, Any]:
    return {"restartPolicy": "Never", "containers": [{"name": "base", "image": "busybox"}]}


def _template(annotations: dict[str, str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"annotations": dict(annotations), "labels": dict(labels)},
        "spec": _pod_spec(),
    }


def jobset_body(
    name: str,
    *,
    annotations: dict[str, str],
    run: str,
    replicas: int = 1,
    parallelism: int = 1,
    rjob: str = "w",
    dns: bool = False,
) -> dict[str, Any]:
    """A JobSet of ``replicas`` Jobs of ``parallelism`` pods each. ``dns=False`` (the
    default) turns off the headless Service, which a waiter never reads."""
    labels = {BENCH_LABEL: run}
    job = {
        "backoffLimit": 0,
        "completions": parallelism,
        "parallelism": parallelism,
        "template": _template(annotations, labels),
    }
    body: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicatedJobs": [{"name": rjob, "replicas": replicas, "template": {"spec": job}}]
        },
    }
    if not dns:
        body["spec"]["network"] = {"enableDNSHostnames": False}
    return body


def job_body(name: str, *, annotations: dict[str, str], run: str, pods: int = 1) -> dict[str, Any]:
    """A batch/v1 Job of ``pods`` pods, as ``KubernetesJobOperator`` creates one."""
    labels = {BENCH_LABEL: run}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "completions": pods,
            "parallelism": pods,
            "template": _template(annotations, labels),
        },
    }


def pod_body(name: str, *, annotations: dict[str, str], run: str) -> dict[str, Any]:
    """A bare pod, as ``KubernetesPodOperator`` creates one."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BENCH_LABEL: run}, "annotations": dict(annotations)},
        "spec": _pod_spec(),
    }
