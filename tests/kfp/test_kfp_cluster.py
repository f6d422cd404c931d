"""``launch_jobset`` and ``cleanup_jobsets`` run through ``kfp.local`` against the devcluster.

The components run exactly as KFP runs them: ``kfp.local.SubprocessRunner(use_venv=False)``
executes the compiled command (``python -m kfp.dsl.executor_main`` on the embedded function)
with this environment standing in for the launcher image (the package is installed, nothing
is pip-installed). Both backends: ``controller`` (the devcluster's JobSet controller) and
``native`` (the launcher creates the Jobs and Service itself).

Not covered here (no KFP backend): the driver's placeholder resolution and TaskConfig
passthrough, Argo retries and termination; see docs/kfp.md for how to check those on a cluster.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import dsl, local

from kfp_components import launch_jobset
from kfp_components.components import cleanup_jobsets
from tests.kfp._cluster import ROOT, RUN_LABEL, annotations, gone, only_run, run_status, runs
from tests.kfp.conftest import LEADER, WORKERS, make_jobset

pytestmark = [pytest.mark.cluster, pytest.mark.kfp]

BACKENDS = ["controller", "native"]


@pytest.fixture
def kfp_local(devcluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``kfp.local`` with the subprocess runner in this environment, pointed at the devcluster."""
    monkeypatch.setenv("KUBECONFIG", str(devcluster.kubeconfig))
    root = tmp_path / "pipeline-root"
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(root),
        raise_on_error=True,
    )
    return root


@pytest.mark.parametrize("backend", BACKENDS)
def test_success_outputs(
    backend: str, kfp_local: Path, devcluster: Any, cluster_namespace: str
) -> None:
    jobset = make_jobset(
        annotations=annotations(
            run_seconds="1", termination_message='{"accuracy": 0.91}', log="epoch 1\nepoch 2"
        ),
        worker_annotations=annotations(run_seconds="1"),
    )
    task = launch_jobset(
        jobset=yaml.safe_dump(jobset),
        namespace=cluster_namespace,
        backend=backend,
        follow_logs=True,
        timeout_seconds=120,
    )
    outputs = task.outputs
    run = only_run(devcluster, cluster_namespace, backend)
    assert outputs["jobset_name"] == run["metadata"]["name"]
    assert outputs["jobset_name"].startswith("train-")
    assert outputs["jobset_uid"] == run["metadata"]["uid"]
    assert outputs["terminal_state"] == "Completed"
    assert outputs["restarts"] == 0
    assert outputs["result"] == {"accuracy": 0.91}
    assert outputs["backend"] == backend
    metrics = outputs["metrics"].metadata
    assert metrics[f"{LEADER}.succeeded"] == 1.0
    assert metrics[f"{WORKERS}.succeeded"] == 2.0
    assert metrics[f"{WORKERS}.failed"] == 0.0
    assert metrics["restarts"] == 0.0
    assert metrics[f"{LEADER}.duration_seconds"] >= 0.0
    assert "duration_seconds" in metrics
    labels = run["metadata"]["labels"]
    assert {"jobset-core/kfp-task-name", "jobset-core/kfp-task-id", RUN_LABEL} <= set(labels)
    # The default policy keeps finished JobSets; the run's own status says Completed.
    assert run_status(run, backend)["terminalState"] == "Completed"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("policy", ["on_timeout", "always"])
@pytest.mark.usefixtures("kfp_local")
def test_failed_jobset_fails_the_step(
    backend: str,
    policy: str,
    devcluster: Any,
    cluster_namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    jobset = make_jobset(
        annotations=annotations(run_seconds="1"),
        worker_annotations=annotations(
            run_seconds="1", exit_code="3", log="CUDA error: out of memory"
        ),
    )
    with pytest.raises(RuntimeError, match="FAILURE"):
        launch_jobset(
            jobset=yaml.safe_dump(jobset),
            namespace=cluster_namespace,
            backend=backend,
            delete_policy=policy,
            timeout_seconds=120,
        )
    printed = capsys.readouterr().out
    assert "launch_jobset: JobSetFailed: JobSet" in printed
    assert "CUDA error: out of memory" in printed  # the failed pod's log tail
    if policy == "always":
        devcluster.wait_for(
            lambda: gone(devcluster, cluster_namespace, backend), 60, desc="deletion"
        )
    else:
        run = only_run(devcluster, cluster_namespace, backend)
        assert run_status(run, backend)["terminalState"] == "Failed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_restart_then_success(
    backend: str, kfp_local: Path, devcluster: Any, cluster_namespace: str
) -> None:
    jobset = make_jobset(
        annotations=annotations(run_seconds="1", termination_message='{"accuracy": 0.5}'),
        worker_annotations=annotations(run_seconds="1", fail_until_attempt="1"),
        max_restarts=2,
    )
    task = launch_jobset(
        jobset=yaml.safe_dump(jobset),
        namespace=cluster_namespace,
        backend=backend,
        timeout_seconds=120,
    )
    assert task.outputs["terminal_state"] == "Completed"
    assert task.outputs["restarts"] == 1
    assert task.outputs["metrics"].metadata["restarts"] == 1.0
    assert task.outputs["result"] == {"accuracy": 0.5}
    assert run_status(only_run(devcluster, cluster_namespace, backend), backend)["restarts"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_fails_and_deletes(
    backend: str,
    kfp_local: Path,
    devcluster: Any,
    cluster_namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    jobset = make_jobset(annotations=annotations(never_finish="true"))
    with pytest.raises(RuntimeError, match="FAILURE"):
        launch_jobset(
            jobset=yaml.safe_dump(jobset),
            namespace=cluster_namespace,
            backend=backend,
            timeout_seconds=3,
        )
    assert "WaitTimeout" in capsys.readouterr().out
    devcluster.wait_for(lambda: gone(devcluster, cluster_namespace, backend), 60, desc="deletion")


@pytest.mark.parametrize("backend", BACKENDS)
def test_retried_step_reattaches(
    backend: str,
    kfp_local: Path,
    devcluster: Any,
    cluster_namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """First attempt gives up (timeout, policy ``never`` keeps the JobSet); the retry adopts."""
    jobset = yaml.safe_dump(
        make_jobset(
            annotations=annotations(run_seconds="9", termination_message='{"accuracy": 0.7}'),
            worker_annotations=annotations(run_seconds="1"),
        )
    )

    @dsl.pipeline(name="retried")
    def retried() -> None:
        # kfp.local draws a new random task id per attempt; the KFP backend resolves the
        # placeholder once per task (the DAG's execution id), so here it is fixed by hand.
        task = launch_jobset(
            jobset=jobset,
            namespace=cluster_namespace,
            backend=backend,
            timeout_seconds=6,
            delete_policy="never",
            task_id="dag-1",
        )
        task.set_retry(num_retries=2, backoff_duration="0s")

    retried()
    printed = capsys.readouterr().out
    assert printed.count(" created; uid ") == 1
    assert "adopted (an earlier attempt created it)" in printed
    assert "WaitTimeout" in printed  # the first attempt did give up
    run = only_run(devcluster, cluster_namespace, backend)
    assert run_status(run, backend)["terminalState"] == "Completed"


_SIGTERM_HELPER = textwrap.dedent(
    """
    import sys
    from kfp import local
    from kfp_components import launch_jobset

    root, path, namespace, backend, run_id = sys.argv[1:]
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=root)
    launch_jobset(
        jobset=open(path).read(), namespace=namespace, backend=backend, run_id=run_id
    )
    """
)


@pytest.fixture
def helper_process() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_deletes_the_jobset(
    backend: str,
    devcluster: Any,
    cluster_namespace: str,
    tmp_path: Path,
    helper_process: list[subprocess.Popen[bytes]],
) -> None:
    """SIGTERM to the step's process group (what Argo does on terminate) deletes the JobSet."""
    path = tmp_path / "jobset.yaml"
    path.write_text(yaml.safe_dump(make_jobset(annotations=annotations(never_finish="true"))))
    run_id = uuid.uuid4().hex
    args = [str(tmp_path / "root"), str(path), cluster_namespace, backend, run_id]
    log = (tmp_path / "helper.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGTERM_HELPER, *args],
        cwd=ROOT,
        env=devcluster.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    helper_process.append(proc)

    def running() -> bool:
        found = runs(devcluster, cluster_namespace, backend)
        pods = devcluster.core.list_namespaced_pod(cluster_namespace).items
        return bool(found) and any(p.status.phase == "Running" for p in pods)

    devcluster.wait_for(running, 180, desc="the JobSet's pods to run")
    os.killpg(proc.pid, signal.SIGTERM)
    started = time.monotonic()
    devcluster.wait_for(
        lambda: all(
            r["metadata"].get("deletionTimestamp")
            for r in runs(devcluster, cluster_namespace, backend)
        ),
        10,
        interval=0.1,
        desc="the DELETE sent on SIGTERM",
    )
    assert time.monotonic() - started < 10
    devcluster.wait_for(lambda: gone(devcluster, cluster_namespace, backend), 60, desc="deletion")
    proc.wait(30)
    assert proc.returncode != 0


def test_cleanup_deletes_every_run_of_the_pipeline_run(
    kfp_local: Path, devcluster: Any, cluster_namespace: str
) -> None:
    jobset = yaml.safe_dump(make_jobset(annotations=annotations(never_finish="true")))
    ours, other = uuid.uuid4().hex, uuid.uuid4().hex
    launches = [
        (ours, "train", "controller"),
        (ours, "train-native", "native"),
        (other, "train", "controller"),
    ]
    for run_id, task_name, backend in launches:
        with pytest.raises(RuntimeError):  # gives up after 2 s; "never" keeps the JobSet
            launch_jobset(
                jobset=jobset,
                namespace=cluster_namespace,
                backend=backend,
                timeout_seconds=2,
                delete_policy="never",
                run_id=run_id,
                task_name=task_name,
            )
    assert len(runs(devcluster, cluster_namespace, "controller")) == 2
    assert len(runs(devcluster, cluster_namespace, "native")) == 1

    task = cleanup_jobsets(namespace=cluster_namespace, run_id=ours)

    assert task.output == 2

    def only_other_left() -> bool:
        jobsets = runs(devcluster, cluster_namespace, "controller")
        live = [j for j in jobsets if not j["metadata"].get("deletionTimestamp")]
        anchors = runs(devcluster, cluster_namespace, "native")
        return not anchors and len(live) == 1 and live[0]["metadata"]["labels"][RUN_LABEL] == other

    devcluster.wait_for(only_other_left, 60, desc="only the other run's JobSet")


# What the KFP driver hands the component for a task with cpu/memory/GPU limits, an env
# variable, a node selector and a toleration (TaskConfig in Kubernetes JSON; the executor
# turns it into dsl.TaskConfig). kfp.local has no driver, so the test passes it as the input.
_TASK_CONFIG = {
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"devcluster/slice": "slice-2"},
    "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
    "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}},
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("kfp_local")
def test_task_config_reaches_the_pods(
    backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    jobset = make_jobset(annotations=annotations(never_finish="true"))
    with pytest.raises(RuntimeError, match="FAILURE"):  # gives up after 3 s, keeps the pods
        launch_jobset(
            jobset=yaml.safe_dump(jobset),
            namespace=cluster_namespace,
            backend=backend,
            task_config=_TASK_CONFIG,
            task_config_replicated_jobs=[WORKERS],
            timeout_seconds=3,
            delete_policy="never",
        )
    slice_nodes = {
        name
        for name, labels in devcluster.node_labels().items()
        if labels.get("devcluster/slice") == "slice-2"
    }

    def pods_by_rjob() -> dict[str, list[Any]] | None:
        pods = devcluster.core.list_namespaced_pod(cluster_namespace).items
        out: dict[str, list[Any]] = {}
        for pod in pods:
            rjob = pod.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]
            out.setdefault(rjob, []).append(pod)
        scheduled = all(p.spec.node_name for group in out.values() for p in group)
        return out if len(out.get(WORKERS, [])) == 2 and out.get(LEADER) and scheduled else None

    pods = devcluster.wait_for(pods_by_rjob, 60, desc="scheduled pods")
    for pod in pods[WORKERS]:
        container = pod.spec.containers[0]
        assert pod.spec.node_name in slice_nodes  # the scheduler honoured the node selector
        assert {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"} in [
            {"key": t.key, "operator": t.operator, "effect": t.effect} for t in pod.spec.tolerations
        ]
        assert container.resources.limits == {"nvidia.com/gpu": "1", "memory": "1Gi"}
        assert container.resources.requests["cpu"] == "1"
        assert ("NCCL_DEBUG", "WARN") in [(e.name, e.value) for e in container.env or []]
    for pod in pods[LEADER]:  # not named in task_config_replicated_jobs
        assert not pod.spec.node_selector
        assert not (pod.spec.containers[0].resources.limits or {})


@pytest.mark.usefixtures("kfp_local")
def test_checked_in_yaml_component_runs(devcluster: Any, cluster_namespace: str) -> None:
    """The compiled ``launch_jobset.yaml``, loaded as users load it, with the identity passed
    as its docs say."""
    from kfp import components

    launch = components.load_component_from_file(
        str(ROOT / "kfp_components" / "launch_jobset.yaml")
    )
    jobset = make_jobset(annotations=annotations(termination_message='{"loss": 0.1}'))
    task = launch(
        jobset_dict=jobset,
        namespace=cluster_namespace,
        backend="controller",
        timeout_seconds=120,
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
    )
    assert task.outputs["terminal_state"] == "Completed"
    assert task.outputs["result"] == {"loss": 0.1}
    run = only_run(devcluster, cluster_namespace, "controller")
    assert not any("{{" in v for v in run["metadata"]["labels"].values())
