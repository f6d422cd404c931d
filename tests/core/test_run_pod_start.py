"""Pods that cannot start end the run, on both backends, against the devcluster.

The pod states are the kubelet's as the devcluster's kwok stages script them
(``devcluster/cannot-start``, ``devcluster/crash-loop``; ``test_realnode_kwok_parity.py`` holds
them to a real kubelet); unschedulable pods are the real scheduler's. The decisions themselves
are table-tested in ``test_policy_pod_start.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.client import Client
from jobset_core.errors import PodsCannotStart
from jobset_core.lifecycle import (
    ClientSettings,
    Deadline,
    Finished,
    Lifecycle,
    Reporter,
    RunRequest,
    error_for,
)
from jobset_core.lifecycle._wait import EVENTS_GRACE
from jobset_core.models import JobSet
from jobset_core.observe import Observer
from jobset_core.outcome import PODS_CANNOT_START, Progress
from jobset_core.policy.pod_start import PodStartRules
from tests.core._runs import run_request

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def jobset(
    name: str,
    *,
    notes: dict[str, str] | None = None,
    container: dict[str, Any] | None = None,
    restart_policy: str = "Never",
    backoff_limit: int = 0,
    pod_spec: dict[str, Any] | None = None,
    replicas: int = 1,
) -> JobSet:
    pod = {
        "restartPolicy": restart_policy,
        "containers": [{"name": "main", "image": "busybox", **(container or {})}],
        **(pod_spec or {}),
    }
    annotations = {"devcluster/run-seconds": "1", **(notes or {})}
    job = {"backoffLimit": backoff_limit, "template": {"metadata": {"annotations": annotations}}}
    job["template"]["spec"] = pod
    return JobSet.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": job}}]
            },
        }
    )


async def execute(
    run: Lifecycle,
    js: JobSet,
    namespace: str,
    backend: str,
    rules: PodStartRules,
    *,
    delete_policy: str = "never",
    timeout: float = 120,
) -> tuple[Finished, list[Progress], float]:
    said: list[Progress] = []
    started = time.time()
    request = run_request(
        js, namespace, backend, timeout=timeout, pod_start=rules, delete_policy=delete_policy
    )
    finished = await run.execute(request, Reporter(progress=said.append))
    return finished, said, time.time() - started


def pods_of(devcluster: Any, namespace: str, name: str) -> list[Any]:
    selector = f"{labels.JOBSET_NAME}={name}"
    return list(devcluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


async def test_a_wrong_image_fails_the_run_after_the_grace_period(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    js = jobset("badimage", notes={"devcluster/cannot-start": "ErrImagePull"}, replicas=2)
    finished, said, took = await execute(
        run, js, cluster_namespace, backend, PodStartRules(grace=4)
    )
    verdict = finished.verdict
    assert verdict.kind == "failed" and verdict.pods_cannot_start, verdict
    assert isinstance(error_for(verdict), PodsCannotStart)
    assert verdict.outcome is not None and verdict.outcome.reason == PODS_CANNOT_START
    # who, which container, the reason, the kubelet's message and the pod's last events
    message = verdict.message
    assert (
        f"JobSet {cluster_namespace}/badimage failed: PodsCannotStart: pod badimage-w-" in message
    )
    assert " container main cannot start: " in message
    assert "ErrImagePull" in message or "ImagePullBackOff" in message
    assert "failed to pull and unpack image" in message
    assert 'last events: Failed: Failed to pull image "busybox"' in message
    assert "; 1 more cannot start: badimage-w-" in message
    # the grace period counted (from when the pods failed to pull: about 1.4 s after creation)
    assert 4 <= took < 20, took
    # the user was told while it waited, once per pod
    notices = [p for p in said if p.kind == "cannot-start"]
    assert len(notices) == 2 and "the run fails in " in notices[0].message
    # kept for inspection (delete policy never): the pods still wait
    assert not finished.deleted
    assert {p.status.phase for p in pods_of(devcluster, cluster_namespace, "badimage")} == {
        "Pending"
    }


async def test_a_missing_secret_with_grace_zero_fails_at_once_and_the_delete_policy_applies(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    secret_env = [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]
    js = jobset(
        "nosecret",
        notes={"devcluster/cannot-start": "CreateContainerConfigError"},
        container={"env": secret_env},
    )
    finished, _, took = await execute(
        run, js, cluster_namespace, backend, PodStartRules(grace=0), delete_policy="always"
    )
    assert finished.verdict.pods_cannot_start, finished.verdict
    assert 'CreateContainerConfigError: secret "absent" not found' in finished.verdict.message
    assert 'last events: Failed: Error: secret "absent" not found' in finished.verdict.message
    assert took < 15, took
    assert finished.deleted  # "always", as for any failure


async def test_a_crash_loop_fails_the_run_at_its_restart_count(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    js = jobset(
        "crashing",
        notes={
            "devcluster/crash-loop": "true",
            "devcluster/exit-code": "3",
            "devcluster/termination-message": "out of cheese",
            "devcluster/crash-backoff-seconds": "1",
            "devcluster/log": "loading\nout of cheese",
        },
        restart_policy="OnFailure",
        backoff_limit=20,  # the Job would go on restarting it for a long time
    )
    finished, _, _ = await execute(
        run, js, cluster_namespace, backend, PodStartRules(crash_loop_restarts=2)
    )
    verdict = finished.verdict
    assert verdict.pods_cannot_start, verdict
    assert " container main is crash-looping: CrashLoopBackOff: back-off " in verdict.message
    assert (
        "crash_loop_restarts=2); last exit: exit code 3 (Error): out of cheese" in verdict.message
    )
    assert "Back-off restarting failed container main in pod crashing-w-0-0-" in verdict.message
    # the tail of the crashed container's log
    ((pod, tail),) = finished.pod_logs.items()
    assert pod.startswith("crashing-w-0-0-") and "out of cheese" in tail


async def test_an_unschedulable_pod_fails_after_the_pending_timeout(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    js = jobset("nowhere", pod_spec={"nodeSelector": {"devcluster/no-such-label": "x"}})
    began = time.time()
    finished, _, took = await execute(
        run, js, cluster_namespace, backend, PodStartRules(pending_timeout=3)
    )
    verdict = finished.verdict
    assert verdict.pods_cannot_start, verdict
    assert " cannot be scheduled: Unschedulable: 0/" in verdict.message
    assert "node(s) didn't match Pod's node affinity/selector" in verdict.message
    if "last events: FailedScheduling: 0/" not in verdict.message:
        # After its verdict the run waits EVENTS_GRACE for the scheduler's Event: it may
        # leave the Event out only when the cluster wrote it near that grace's end or later
        # (a loaded machine). The verdict came after the pending_timeout of a pod created
        # after ``began``, so the grace ended no earlier than ``began + 3 + EVENTS_GRACE``;
        # a second is left for the Event's watch to bring it.
        # the scheduler writes its Events apart from the pod's status
        written = devcluster.first_event_at(cluster_namespace, "reason=FailedScheduling", 60)
        assert written > began + 3 + EVENTS_GRACE - 1, (
            f"the scheduler's Event was written {written - began:.1f}s after the run began, "
            f"well within its grace of {EVENTS_GRACE}s, and the message leaves it out: "
            f"{verdict.message}"
        )
        print(f"the scheduler's Event was written {written - began:.1f}s after the run began")
    assert 3 <= took < 20, took


async def test_a_slow_start_is_not_a_failure(
    run: Lifecycle, backend: str, cluster_namespace: str
) -> None:
    """ContainerCreating (a big image being pulled) never counts, even with grace 0."""
    js = jobset("slowpull", notes={"devcluster/start-seconds": "4"})
    finished, said, took = await execute(
        run, js, cluster_namespace, backend, PodStartRules(grace=0)
    )
    assert finished.verdict.kind == "completed", finished.verdict
    assert not [p for p in said if p.kind == "cannot-start"]
    assert took >= 4


async def test_a_waiter_that_comes_late_dates_the_failure_from_the_kubelets_events(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    """A triggerer that restarted, a sensor's new poke: the grace period counts from when the
    pods began to fail, not from when this waiter first looked."""
    js = jobset("late", notes={"devcluster/cannot-start": "InvalidImageName"})
    request = RunRequest(jobset=js, namespace=cluster_namespace, backend=backend)  # type: ignore[arg-type]
    submission = (await run.start(request)).submission
    devcluster.wait_for(
        lambda: any(
            (p.status.container_statuses or [None])[0] is not None
            and p.status.container_statuses[0].state.waiting is not None
            and p.status.container_statuses[0].state.waiting.reason == "InvalidImageName"
            for p in pods_of(devcluster, cluster_namespace, "late")
        ),
        60,
        desc="the pod shows InvalidImageName",
    )
    time.sleep(6)
    async with Client(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))) as client:
        observer = Observer(client, scope="run")
        try:
            started = time.time()
            waiting = request.but(
                deadline=Deadline(timeout=60).begin(time.time()),
                pod_start=PodStartRules(grace=5),
            )
            verdict = await Lifecycle(observer).wait(waiting, submission.handle)
        finally:
            await observer.aclose()
    assert verdict.pods_cannot_start, verdict
    assert time.time() - started < 3  # the kubelet's first event says it began 6 s ago
    assert "InspectFailed: Failed to apply default image tag" in verdict.message
