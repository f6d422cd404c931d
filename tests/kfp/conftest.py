"""Shared helpers of the KFP tests.

They run in the KFP environment (``.venv/kfp``); elsewhere (the Airflow environment has no
kfp) the test modules are not collected.
"""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

if importlib.util.find_spec("kfp") is None:
    collect_ignore_glob = ["test_*.py"]

LEADER = "leader"
WORKERS = "workers"


def pod_spec(**extra: Any) -> dict[str, Any]:
    """A pod spec with one container ``main`` (plus ``extra`` fields)."""
    return {"restartPolicy": "Never", "containers": [{"name": "main", "image": "img"}], **extra}


def make_jobset(
    name: str = "train",
    *,
    annotations: dict[str, str] | None = None,
    worker_annotations: dict[str, str] | None = None,
    max_restarts: int | None = None,
    workers: int = 2,
) -> dict[str, Any]:
    """A two-replicated-job JobSet: an Indexed leader (the coordinator) and ``workers``."""
    leader_meta = {"annotations": dict(annotations or {})}
    worker_meta = {"annotations": dict(worker_annotations or annotations or {})}
    spec: dict[str, Any] = {
        "coordinator": {"replicatedJob": LEADER},
        "replicatedJobs": [
            {
                "name": LEADER,
                "replicas": 1,
                "template": {
                    "spec": {
                        "completionMode": "Indexed",
                        "completions": 1,
                        "parallelism": 1,
                        "backoffLimit": 0,
                        "template": {"metadata": leader_meta, "spec": pod_spec()},
                    }
                },
            },
            {
                "name": WORKERS,
                "replicas": workers,
                "template": {
                    "spec": {
                        "backoffLimit": 0,
                        "template": {"metadata": copy.deepcopy(worker_meta), "spec": pod_spec()},
                    }
                },
            },
        ],
    }
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": spec,
    }
