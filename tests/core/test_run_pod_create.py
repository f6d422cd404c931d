"""Pods that can never be created end the run, on both backends, against the devcluster.

The refusals are the devcluster's own API server's (its default admission plugins: PodSecurity,
ResourceQuota, ServiceAccount); the Job controller writes them as ``FailedCreate`` Events on the
child Jobs. Nothing is mocked. The decisions themselves are table-tested in
``test_policy_pod_create.py``.

The refusals come after the submit, once the Jobs exist (the namespace turns ``restricted``, or
the ServiceAccount goes, while the JobSet is suspended; it is resumed then; a quota fits one pod
of two): a check at submit cannot refuse them first, and this is also what a policy that
changed between the submit and the pods' creation looks like.

Each test measures the time from the first ``FailedCreate`` of the run (as the test's own list
of Events dates it: ``firstTimestamp``, whole seconds, so up to a second early) to the verdict:
it must stay within :data:`WITHIN` seconds (the issue's 20 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from jobset_core.errors import NotFound, PodsRefused
from jobset_core.lifecycle import (
    Finished,
    Lifecycle,
    Reporter,
    RunRequest,
    error_for,
)
from jobset_core.models import JobSet
from jobset_core.outcome import Progress
from jobset_core.policy.pod_create import FAILED_CREATE, PODS_REFUSED, QUOTA_GRACE
from tests.core._runs import run_request

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

#: Seconds from the first refusal to the verdict, at most.
WITHIN = 20.0
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def jobset(
    name: str, *, replicas: int = 1, pod_spec: dict[str, Any] | None = None, suspend: bool = False
) -> JobSet:
    notes = {"devcluster/never-finish": "true"}
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
    job = {"backoffLimit": 0, "template": {"metadata": {"annotations": notes}, "spec": pod}}
    job["template"]["spec"].update(pod_spec or {})
    spec: dict[str, Any] = {
        "replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": job}}]
    }
    if suspend:
        spec["suspend"] = True
    return JobSet.model_validate({"metadata": {"name": name}, "spec": spec})


def request(js: JobSet, namespace: str, backend: str) -> RunRequest:
    return run_request(js, namespace, backend, timeout=120, delete_policy="never")  # type: ignore[no-any-return]


async def execute(
    run: Lifecycle, js: JobSet, namespace: str, backend: str
) -> tuple[Finished, list[Progress], float]:
    said: list[Progress] = []
    finished = await run.execute(request(js, namespace, backend), Reporter(progress=said.append))
    return finished, said, time.time()


def first_refusal(devcluster: Any, namespace: str) -> float:
    """When the first ``FailedCreate`` of the namespace happened (epoch seconds)."""
    return float(
        devcluster.first_event_at(namespace, f"reason={FAILED_CREATE},involvedObject.kind=Job")
    )


def assert_refused(finished: Finished, ended: float, devcluster: Any, namespace: str) -> str:
    """The verdict is the refusal's, in the server's words, within :data:`WITHIN` seconds of
    the first refusal; the time it took."""
    verdict = finished.verdict
    assert verdict.kind == "failed" and verdict.reason == PODS_REFUSED, verdict
    assert verdict.pods_cannot_start
    assert isinstance(error_for(verdict), PodsRefused)
    assert verdict.outcome is not None and verdict.outcome.failed_job, verdict
    assert f"job {verdict.outcome.failed_job} cannot create its pods: " in verdict.message
    took = ended - first_refusal(devcluster, namespace)
    assert took < WITHIN, f"{took:.1f}s from the first refusal to the verdict"
    print(f"{namespace}: {took:.1f}s from the first FailedCreate to the verdict")
    return verdict.message


async def resumed_after(
    run: Lifecycle,
    devcluster: Any,
    js: JobSet,
    namespace: str,
    backend: str,
    *,
    change: Callable[[], Any],
) -> tuple[Finished, list[Progress], float]:
    """Run ``js`` (suspended) until its Jobs exist, then ``change`` the namespace and resume
    it: its pods are created (and refused) only then."""
    name = js.metadata.name
    assert name and js.spec.suspend
    waiting = asyncio.create_task(execute(run, js, namespace, backend))
    try:
        found = None
        for _ in range(300):
            try:
                found = await run.runs.locate(name, namespace=namespace, backend=backend)
                break
            except NotFound:  # not created yet
                await asyncio.sleep(0.1)
        assert found is not None
        for _ in range(300):  # on this loop: a native run's first pass creates them here
            if (await asyncio.to_thread(devcluster.batch.list_namespaced_job, namespace)).items:
                break
            await asyncio.sleep(0.1)
        jobs = await asyncio.to_thread(devcluster.batch.list_namespaced_job, namespace)
        assert jobs.items, "the suspended Jobs were never created"
        assert not waiting.done()
        change()
        await run.runs.set_suspend(found.handle, False)
        return await asyncio.wait_for(waiting, 90)
    finally:
        waiting.cancel()


def restrict(devcluster: Any, namespace: str) -> Callable[[], None]:
    return lambda: devcluster.core.patch_namespace(namespace, {"metadata": {"labels": RESTRICTED}})


async def test_pod_security_refuses_the_pods_and_the_run_fails_at_once(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    js = jobset("psa", replicas=2, suspend=True)
    restricted = restrict(devcluster, cluster_namespace)
    finished, said, ended = await resumed_after(
        run, devcluster, js, cluster_namespace, backend, change=restricted
    )
    message = assert_refused(finished, ended, devcluster, cluster_namespace)
    assert 'PodSecurity "restricted:latest" refuses them: pods "psa-w-' in message
    assert 'is forbidden: violates PodSecurity "restricted:latest": ' in message
    assert "runAsNonRoot != true" in message and "waiting cannot lift it" in message
    # a one-off look (jobsetctl status, a rescheduled sensor) reaches the same verdict
    found = await run.runs.locate("psa", namespace=cluster_namespace, backend=backend)
    _, looked = await run.runs.look(found.handle)
    assert looked is not None and looked.reason == PODS_REFUSED, looked
    assert looked.outcome is not None and looked.outcome.failed_job
    assert not [p for p in said if p.kind == "cannot-start"]  # at once: nothing to announce


async def test_a_quota_one_pod_fits_fails_the_run_after_the_short_grace(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    from kubernetes import client

    hard = client.V1ResourceQuotaSpec(hard={"pods": "1"})
    quota = client.V1ResourceQuota(metadata=client.V1ObjectMeta(name="pods"), spec=hard)
    devcluster.core.create_namespaced_resource_quota(cluster_namespace, quota)
    devcluster.wait_for(
        lambda: (
            devcluster.core.read_namespaced_resource_quota("pods", cluster_namespace).status.used
            is not None
        ),
        30,
        desc="the quota counted",
    )
    js = jobset("quota", replicas=2)
    finished, said, ended = await execute(run, js, cluster_namespace, backend)
    message = assert_refused(finished, ended, devcluster, cluster_namespace)
    assert "ResourceQuota pods refuses them: pods " in message
    assert "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1" in message
    assert f"grace {QUOTA_GRACE:g}s" in message
    took = ended - first_refusal(devcluster, cluster_namespace)
    assert took >= QUOTA_GRACE - 1, f"failed after {took:.1f}s, before the grace period ended"
    (notice,) = [p for p in said if p.kind == "cannot-start"]
    assert notice.reason == FAILED_CREATE and "unless its pods are created" in notice.message
    # one pod of the run was created and runs: the other Job is the refused one
    outcome = finished.verdict.outcome
    assert outcome is not None
    (pod,) = devcluster.core.list_namespaced_pod(cluster_namespace).items
    assert pod.metadata.owner_references[0].name != outcome.failed_job


async def test_a_missing_service_account_fails_the_run_at_once(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    from kubernetes import client

    account = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="trainer"))
    devcluster.core.create_namespaced_service_account(cluster_namespace, account)
    js = jobset("nosa", pod_spec={"serviceAccountName": "trainer"}, suspend=True)

    def remove() -> None:  # the ServiceAccount goes after the submit
        devcluster.core.delete_namespaced_service_account("trainer", cluster_namespace)

    finished, _, ended = await resumed_after(
        run, devcluster, js, cluster_namespace, backend, change=remove
    )
    message = assert_refused(finished, ended, devcluster, cluster_namespace)
    assert "ServiceAccount refuses them: " in message
    said = f"error looking up service account {cluster_namespace}/trainer: serviceaccount"
    assert f'{said} "trainer" not found' in message
