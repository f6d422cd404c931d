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


class _Store:
    """A task state store (Airflow 3.3's ``task_state_store``): a dict behind get and set."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = json.loads(json.dumps(value))  # what a database would keep


class _Killed(BaseException):
    """The try's process killed between the verdict and the end of the try."""


def _try(devcluster: Any, namespace: str, store: _Store, run_id: str, *, kill: bool) -> Any:
    from airflow_provider_jobset.operators import JobSetOperator

    sys.path.insert(0, str(HERE))
    from _run_op import _TI, _jobset

    op = JobSetOperator(
        task_id="train",
        jobset=_jobset({"devcluster/run-seconds": "1", "devcluster/termination-message": "42"}),
        namespace=namespace,
        backend="controller",
        deferrable=False,
        delete_policy="on_success",
    )
    if kill:

        def killed(context: Any, finished: Any) -> Any:
            raise _Killed

        op._conclude = killed  # type: ignore[method-assign]
    said: list[str] = []
    op.log.info = lambda msg, *args: said.append(msg % args)  # type: ignore[method-assign]
    result = op.execute({"ti": _TI(run_id), "task_state_store": store})
    return result, said


def test_a_try_killed_after_its_verdict_is_concluded_by_the_next_never_rerun(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    """The verdict is recorded the moment it comes, before the delete policy acts; a try killed
    after it (its JobSet completed, perhaps deleted already) leaves it to the next try, which
    concludes from it: the result, no second JobSet. A try that concluded leaves its run to be
    replaced: clearing the task runs it afresh."""
    store, run_id = _Store(), "manual__2026-01-03T00:00:00+00:00"
    with pytest.raises(_Killed):
        _try(devcluster, cluster_namespace, store, run_id, kill=True)
    first = store.values["jobset"]
    assert (
        first["finished"] and "concluded" not in first and first["verdict"]["kind"] == "completed"
    )
    result, said = _try(devcluster, cluster_namespace, store, run_id, kill=False)
    assert result == 42
    assert any("ended before it concluded: concluding from it (completed)" in s for s in said), said
    assert not any(s.startswith("created JobSet") for s in said), said  # never run twice
    devcluster.wait_for(
        lambda: not owned(devcluster, cluster_namespace, "controller"), 60, desc="deleted"
    )
    assert store.values["jobset"]["concluded"]
    # The task cleared after it concluded: a new try runs afresh (a new JobSet).
    result, said = _try(devcluster, cluster_namespace, store, run_id, kill=False)
    assert result == 42 and any(s.startswith("created JobSet") for s in said), said
    assert store.values["jobset"]["uid"] != first["uid"]
