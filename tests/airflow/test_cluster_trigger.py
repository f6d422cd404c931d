"""The trigger on the devcluster: many triggers of one process share one client and one
informer per kind; the deadline fires ``timeout``; a deleted JobSet fires ``gone``; the event
loop is never blocked (asyncio debug mode)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from airflow_provider_jobset.triggers import JobSetTrigger
from jobset_core.lifecycle import Verdict
from jobset_core.observe import shared_stats

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


async def fire(trigger: JobSetTrigger, timeout: float = 120) -> Verdict:
    event = await asyncio.wait_for(anext(trigger.run()), timeout)
    return Verdict.model_validate(event.payload)


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
    loop = asyncio.get_running_loop()
    loop.set_debug(True)  # report any callback that blocks the loop for 100 ms or more
    slow: list[str] = []
    handler = _SlowCallbacks(slow)
    logging.getLogger("asyncio").addHandler(handler)
    try:
        triggers = [JobSetTrigger(name=n, namespace=cluster_namespace) for n in names]
        runs = [asyncio.ensure_future(fire(t)) for t in triggers]
        await asyncio.sleep(2)
        (shared,) = shared_stats().values()  # one observer (one client) for every trigger
        assert shared["leases"] == len(names)
        # One informer per kind, whatever the number of triggers (cluster-wide for the admin).
        assert shared["informers"] == {"event": 1, "job": 1, "jobset": 1, "pod": 1}
        assert shared["kept"]["runs"] == len(names)
        verdicts = await asyncio.gather(*runs)
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
        loop.set_debug(False)
    assert [v.kind for v in verdicts] == ["completed"] * len(names)
    assert [v.result for v in verdicts] == names
    assert shared_stats() == {}  # the last lease closed the observer and its client
    assert slow == []


async def test_deadline_fires_timeout(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(
        cluster_namespace, body("forever", {"devcluster/never-finish": "true"})
    )
    trigger = JobSetTrigger(name="forever", namespace=cluster_namespace, deadline=time.time() + 3)
    verdict = await fire(trigger, 60)
    assert verdict.kind == "timeout" and "did not finish within" in verdict.message
    assert devcluster.get_jobset(cluster_namespace, "forever")  # a timeout deletes nothing


async def test_deleted_jobset_fires_gone(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("doomed", {"devcluster/never-finish": "true"}))
    trigger = JobSetTrigger(name="doomed", namespace=cluster_namespace)
    run = asyncio.ensure_future(fire(trigger, 90))
    await asyncio.sleep(2)
    devcluster.delete_jobset(cluster_namespace, "doomed")
    verdict = await run
    assert verdict.kind == "gone" and "was deleted" in verdict.message


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


class _SlowCallbacks(logging.Handler):
    """Collects asyncio debug mode's "Executing ... took N seconds" warnings."""

    def __init__(self, found: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "took" in message and "seconds" in message:
            self.found.append(message)
