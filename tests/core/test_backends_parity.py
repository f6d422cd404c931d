"""Parity: the same manifest ends the same way on the ``controller`` and the ``native`` backend.

Each case runs once through the upstream JobSet controller (``controller`` backend) and once
through the native backend, side by side in two namespaces of the devcluster, and compares
what a user sees: terminal state, reason, restart counters, the failed Job, the status
conditions (type, status, reason) and the ``restart-attempt`` labels of the final Jobs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.models import JobSet
from tests.core._runs import RunFace, open_face

pytestmark = pytest.mark.cluster

POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}


def rjob(name: str, replicas: int = 1, **notes: str) -> dict[str, Any]:
    annotations = {"devcluster/run-seconds": "0.5"}
    annotations.update({f"devcluster/{k.replace('_', '-')}": v for k, v in notes.items()})
    pod = {"metadata": {"annotations": annotations}, "spec": POD_SPEC}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"backoffLimit": 0, "template": pod}},
    }


def manifest(*rjobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "same"}, "spec": {"replicatedJobs": list(rjobs), **spec}}


CASES = [
    pytest.param(manifest(rjob("a", 2), rjob("b")), id="success"),
    pytest.param(
        manifest(rjob("w", 2, fail_until_attempt="1"), failurePolicy={"maxRestarts": 2}),
        id="restart-then-success",
    ),
    pytest.param(
        manifest(rjob("w", exit_code="1"), failurePolicy={"maxRestarts": 2}),
        id="max-restarts",
    ),
    pytest.param(
        manifest(
            rjob("w", exit_code="2"),
            failurePolicy={
                "maxRestarts": 3,
                "rules": [
                    {
                        "name": "fatal",
                        "action": "FailJobSet",
                        "onJobFailureReasons": ["BackoffLimitExceeded"],
                    }
                ],
            },
        ),
        id="fail-jobset",
    ),
]


async def run(backend: RunFace, jobset: JobSet, namespace: str, devcluster: Any) -> dict[str, Any]:
    sub = await backend.submit(jobset, namespace=namespace)
    outcome = await backend.wait(sub.handle, timeout=120)
    status = await backend.jobset_status(sub.handle)
    selector = f"{labels.JOBSET_NAME}={jobset.name}"
    jobs = devcluster.batch.list_namespaced_job(namespace, label_selector=selector).items
    return {
        "terminal_state": outcome.terminal_state,
        "reason": outcome.reason,
        "message": outcome.message,
        "restarts": outcome.restarts,
        "restarts_count_towards_max": outcome.restarts_count_towards_max,
        "failed_job": outcome.failed_job,
        "conditions": sorted((x.type, x.status, x.reason) for x in status.conditions or []),
        "final_jobs": sorted(
            (j.metadata.name, j.metadata.labels[labels.RESTART_ATTEMPT])
            for j in jobs
            if j.metadata.deletion_timestamp is None
        ),
        "owner_kinds": sorted({o.kind for j in jobs for o in j.metadata.owner_references}),
    }


@pytest.mark.parametrize("document", CASES)
async def test_same_manifest_same_end(document: dict[str, Any], devcluster: Any) -> None:
    jobset = JobSet.model_validate(document)
    namespaces = {kind: devcluster.create_namespace(kind[:4]) for kind in ("controller", "native")}
    try:
        async with (
            open_face("async", devcluster.kubeconfig, "controller") as controller_run,
            open_face("async", devcluster.kubeconfig, "native") as native_run,
        ):
            ends = await asyncio.gather(
                run(controller_run, jobset, namespaces["controller"], devcluster),
                run(native_run, jobset, namespaces["native"], devcluster),
            )
    finally:
        for namespace in namespaces.values():
            devcluster.delete_namespace(namespace)
    controller, native = ends
    assert controller.pop("owner_kinds") == ["JobSet"]
    assert native.pop("owner_kinds") == ["ConfigMap"]
    assert native == controller
