"""A worker SIGKILLed mid-wait leaves its JobSet running; the next try (same task instance)
reattaches to it instead of creating a second one. Killing a task (worker ``on_kill`` or the
trigger's kill path) deletes everything the run created."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]

HERE = Path(__file__).resolve().parent
GROUP, VERSION = "jobset.x-k8s.io", "v1alpha2"


def spawn(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "_run_op.py"), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),
    )


def lines(proc: subprocess.Popen[str], timeout: float = 240) -> list[dict[str, Any]]:
    out, _ = proc.communicate(timeout=timeout)
    return [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]


def owned(devcluster: Any, namespace: str, backend: str) -> list[tuple[str, str]]:
    """(name, uid) of every object the operator created for the task, by identity labels."""
    selector = "airflow-jobset/task-id=train"
    if backend == "controller":
        items = devcluster.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "jobsets", label_selector=selector
        )["items"]
        return [(i["metadata"]["name"], i["metadata"]["uid"]) for i in items]
    maps = devcluster.core.list_namespaced_config_map(namespace, label_selector=selector).items
    return [(m.metadata.name, m.metadata.uid) for m in maps]


@pytest.mark.airflow_matrix
@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferrable"])
@pytest.mark.parametrize("backend", ["controller", "native"])
def test_reattach_after_sigkill_never_duplicates(
    backend: str, deferrable: bool, cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    spec = {
        "namespace": cluster_namespace,
        "backend": backend,
        "deferrable": deferrable,
        "run_id": "manual__2026-01-01T00:00:00+00:00",
        "annotations": {"devcluster/run-seconds": "8", "devcluster/termination-message": "42"},
    }
    first = spawn(spec)
    devcluster.wait_for(
        lambda: owned(devcluster, cluster_namespace, backend), 120, desc="the first try's JobSet"
    )
    time.sleep(2)  # mid-wait
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    before = owned(devcluster, cluster_namespace, backend)
    assert len(before) == 1

    second = lines(spawn(spec))
    assert second[-1] == {"result": 42}, second
    after = owned(devcluster, cluster_namespace, backend)
    assert after == before, "the second try must reattach to the same object (same uid)"

    # Another run of the same task gets its own JobSet, never the first run's.
    other = lines(spawn({**spec, "run_id": "manual__2026-01-02T00:00:00+00:00"}))
    assert other[-1] == {"result": 42}
    assert len(owned(devcluster, cluster_namespace, backend)) == 2


def _leftovers(devcluster: Any, namespace: str) -> list[str]:
    left = [
        f"jobset/{i['metadata']['name']}"
        for i in devcluster.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "jobsets"
        )["items"]
    ]
    left += [
        f"job/{j.metadata.name}" for j in devcluster.batch.list_namespaced_job(namespace).items
    ]
    left += [f"pod/{p.metadata.name}" for p in devcluster.core.list_namespaced_pod(namespace).items]
    left += [
        f"service/{s.metadata.name}"
        for s in devcluster.core.list_namespaced_service(namespace).items
    ]
    left += [
        f"configmap/{m.metadata.name}"
        for m in devcluster.core.list_namespaced_config_map(
            namespace, label_selector="airflow-jobset/task-id"
        ).items
    ]
    return left


@pytest.mark.airflow_matrix
@pytest.mark.parametrize("deferrable", [False, True], ids=["worker-on_kill", "trigger-on_kill"])
@pytest.mark.parametrize("backend", ["controller", "native"])
def test_kill_deletes_everything(
    backend: str, deferrable: bool, cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    spec = {
        "namespace": cluster_namespace,
        "backend": backend,
        "deferrable": deferrable,
        "run_id": "manual__kill",
        "annotations": {"devcluster/never-finish": "true"},
        "mode": "kill",
    }
    out = lines(spawn(spec))
    assert any(line.get("killed") for line in out), out
    devcluster.wait_for(
        lambda: not _leftovers(devcluster, cluster_namespace), 90, desc="everything deleted"
    )
