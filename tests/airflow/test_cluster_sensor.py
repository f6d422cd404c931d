"""JobSetSensor on the devcluster: by name and by labels, poke and deferrable, on both
backends, and a JobSet that ends in a phase that is not a target fails the sensor."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_provider_jobset._compat import AirflowFailException
from airflow_provider_jobset.sensors import JobSetSensor

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]


def body(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    job = {"backoffLimit": 0, "template": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"team": "ml"}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": job}}]},
    }


def poke_until(sensor: JobSetSensor, timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sensor.poke({}):
            return True
        time.sleep(1)
    return False


def test_poke_by_name_and_by_labels(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    by_name = JobSetSensor(task_id="s", name="later", namespace=cluster_namespace)
    assert by_name.poke({}) is False  # not there yet: keep waiting
    devcluster.create_jobset(cluster_namespace, body("later", {"devcluster/run-seconds": "2"}))
    devcluster.create_jobset(cluster_namespace, body("other", {"devcluster/run-seconds": "4"}))
    running = JobSetSensor(
        task_id="r",
        name="later",
        namespace=cluster_namespace,
        target_phases=["Running", "Completed"],
    )
    assert poke_until(running)
    assert poke_until(by_name)
    by_labels = JobSetSensor(
        task_id="l", label_selector={"team": "ml"}, namespace=cluster_namespace
    )
    assert poke_until(by_labels)


def test_failed_jobset_fails_the_sensor(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("broken", {"devcluster/exit-code": "2"}))
    sensor = JobSetSensor(task_id="s", name="broken", namespace=cluster_namespace)
    with pytest.raises(AirflowFailException, match="ended Failed"):
        poke_until(sensor)


def test_deferrable_sensor(cluster_namespace: str, kube_conn: str, devcluster: Any) -> None:
    from tests.airflow._airflow_compat import TaskDeferred

    devcluster.create_jobset(cluster_namespace, body("slow", {"devcluster/run-seconds": "8"}))
    sensor = JobSetSensor(
        task_id="s", name="slow", namespace=cluster_namespace, deferrable=True, timeout=120
    )
    devcluster.wait_for(
        lambda: sensor._look({}, wait=0.0)[1] is not None, 30, desc="the JobSet seen"
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    event = asyncio.run(anext(deferred.value.trigger.run()))
    assert event.payload["kind"] == "completed"  # a terminal target phase is the end itself
    assert event.payload["outcome"]["phase"] == "Completed"
    assert sensor.execute_complete({}, event.payload) is None


def test_deferrable_sensor_started_before_its_jobset_exists(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    """Nothing to wait for yet: the sensor defers to look again after ``poke_interval``, and
    the look-again resumes it to look (not to read a verdict), then to wait in the trigger."""
    from airflow_provider_jobset.triggers import JobSetTrigger, LookAgainTrigger
    from tests.airflow._airflow_compat import TaskDeferred

    sensor = JobSetSensor(
        task_id="s",
        name="later",
        namespace=cluster_namespace,
        deferrable=True,
        poke_interval=1,
        timeout=120,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    look_again = deferred.value.trigger
    assert isinstance(look_again, LookAgainTrigger)
    devcluster.create_jobset(cluster_namespace, body("later", {"devcluster/run-seconds": "6"}))
    event = asyncio.run(anext(look_again.run()))
    assert event.payload == {"kind": "look_again"}
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute_complete({}, event.payload)
    assert isinstance(deferred.value.trigger, JobSetTrigger)
    event = asyncio.run(anext(deferred.value.trigger.run()))
    assert event.payload["kind"] == "completed"
    assert sensor.execute_complete({}, event.payload) is None


def _native_run(devcluster: Any, namespace: str, name: str, seconds: str) -> None:
    """Submit a native run (anchor + first pass) the way an operator would, then leave it:
    the sensor's wait drives it on."""
    from jobset_core.lifecycle import ClientSettings, RunRequest, blocking
    from jobset_core.models import load_jobset

    request = RunRequest(
        jobset=load_jobset(body(name, {"devcluster/run-seconds": seconds})),
        namespace=namespace,
        backend="native",
    )
    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    blocking(settings, lambda lifecycle: lifecycle.start(request))


def test_sensor_on_native_runs_by_name_and_labels(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    _native_run(devcluster, cluster_namespace, "nat", "2")
    started = time.monotonic()
    by_name = JobSetSensor(
        task_id="n", name="nat", namespace=cluster_namespace, backend="native", poke_interval=60
    )
    assert by_name.poke({})  # one poke waits for the answer: no 60 s lag
    assert time.monotonic() - started < 45
    by_labels = JobSetSensor(
        task_id="l", label_selector={"team": "ml"}, namespace=cluster_namespace
    )
    assert by_labels.poke({})  # auto: JobSets and native runs alike
