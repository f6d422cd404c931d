"""The trigger on the devcluster: many triggers of one process share one client and one
watch per namespace; the deadline fires ``timeout``; a deleted JobSet fires ``gone``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_provider_jobset._shared import registry_stats
from airflow_provider_jobset.events import JobSetEvent
from airflow_provider_jobset.triggers import JobSetTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]


def body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"backoffLimit": 0, "template": pod}},
                }
            ]
        },
    }


async def fire(trigger: JobSetTrigger, timeout: float = 120) -> JobSetEvent:
    event = await asyncio.wait_for(anext(trigger.run()), timeout)
    return JobSetEvent.model_validate(event.payload)


async def test_triggers_share_one_client_and_one_watch(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    names = [f"shared-{i}" for i in range(6)]
    for i, name in enumerate(names):
        devcluster.create_jobset(
            cluster_namespace,
            body(
                name,
                {"devcluster/run-seconds": str(3 + i % 3), "devcluster/termination-message": name},
            ),
        )
    triggers = [JobSetTrigger(name=n, namespace=cluster_namespace) for n in names]
    runs = [asyncio.ensure_future(fire(t)) for t in triggers]
    await asyncio.sleep(2)
    assert registry_stats() == {"clients": 1, "watches": {cluster_namespace: len(names)}}
    events = await asyncio.gather(*runs)
    assert [e.kind for e in events] == ["outcome"] * len(names)
    assert [e.outcome.terminal_state for e in events if e.outcome] == ["Completed"] * len(names)
    assert [e.outcome.result for e in events if e.outcome] == names
    assert registry_stats() == {"clients": 0, "watches": {}}


async def test_deadline_fires_timeout(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(
        cluster_namespace, body("forever", {"devcluster/never-finish": "true"})
    )
    trigger = JobSetTrigger(name="forever", namespace=cluster_namespace, deadline=time.time() + 3)
    event = await fire(trigger, 60)
    assert event.kind == "timeout"
    assert devcluster.get_jobset(cluster_namespace, "forever")  # a timeout deletes nothing


async def test_deleted_jobset_fires_gone(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("doomed", {"devcluster/never-finish": "true"}))
    trigger = JobSetTrigger(name="doomed", namespace=cluster_namespace)
    run = asyncio.ensure_future(fire(trigger, 90))
    await asyncio.sleep(2)
    devcluster.delete_jobset(cluster_namespace, "doomed")
    event = await run
    assert event.kind == "gone"


async def test_cleanup_never_deletes(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("kept", {"devcluster/never-finish": "true"}))
    trigger = JobSetTrigger(name="kept", namespace=cluster_namespace)
    run = asyncio.ensure_future(fire(trigger))
    await asyncio.sleep(2)
    run.cancel()  # what a triggerer restart does
    await trigger.cleanup()
    assert devcluster.get_jobset(cluster_namespace, "kept")["metadata"]["name"] == "kept"
