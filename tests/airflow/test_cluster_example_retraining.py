"""The example DAG ``scheduled_retraining`` end to end, as ``make demo`` runs it: ``dag.test()``
of the example file (copied into the session's dags folder, where ``dag.test()`` finds it) with
the demo's worker environment (``JOBSET_EXAMPLES_REAL_NODE=1``, the real node's shared
folder as ``JOBSET_EXAMPLES_SHARED_DIR``, ``kubernetes_default`` from the kubeconfig), the
training for real on the devcluster's real node (JAX, 2 pods, restart attempt 0 killed at step
25). The namespace (the connection's) and the shared folder (a subfolder of the node's) are the
test's own and removed afterwards.

What flows from prepare to train to evaluate is checked value by value: the dataset prepare
wrote and where, its location in the pods' arguments, the training's result (the coordinator's
termination message) and its resume, evaluate's verdict built from it. The result is checked
against two sources the task never reads: the pods' own logs, followed live (the restart and
the operator's ``delete_policy="always"`` delete the pods), and the final checkpoint on the
shared storage, whose model is scored here on the dataset prepare wrote.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import struct
import zipfile
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow._recorder import Recorder, attempt_of, pod_index
from tests.airflow._run_dag import run_dag
from tests.cluster.pytest_devcluster import DevCluster, RealNode

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.airflow]

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "dags" / "scheduled_retraining.py"
DAG_ID = "scheduled_retraining"
META = {"rows": 4096, "features": 8, "seed": 0, "noise": 0.1}  # write_dataset's defaults


@pytest.fixture
def shared(real_node: RealNode, cluster_namespace: str) -> Iterator[Path]:
    """The example's shared folder: the test's own, inside the real node's (the pods mount it
    by ``hostPath``, at the same path)."""
    assert real_node.shared_dir is not None, "the shared folder of a local devcluster"
    folder = real_node.shared_dir / cluster_namespace
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def run_example(
    path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path, namespace: str, kube: str
) -> Any:
    """``dag.test()`` of the example in a subprocess, with the demo's environment."""
    for name in ("JOBSET_EXAMPLES_SHARED_PVC", "JOBSET_EXAMPLES_QUEUE", "JOBSET_EXAMPLES_IMAGE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JOBSET_EXAMPLES_REAL_NODE", "1")
    monkeypatch.setenv("JOBSET_EXAMPLES_SHARED_DIR", str(shared))
    extra = {"kube_config_path": kube, "namespace": namespace}
    conn = json.dumps({"conn_type": "kubernetes", "extra": extra})
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", conn)
    return run_dag(path, DAG_ID)


def read_npz(path: Path) -> dict[str, list[Any]]:
    """The arrays of a ``numpy.savez`` file (little-endian float32 / int64), without numpy."""
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            raw = archive.read(name)
            assert raw[:8] == b"\x93NUMPY\x01\x00", name  # .npy format 1.0
            (size,) = struct.unpack("<H", raw[8:10])
            header = ast.literal_eval(raw[10 : 10 + size].decode())
            typecode = {"<f4": "f", "<i8": "q"}[header["descr"]]
            arrays[name.removesuffix(".npy")] = array(typecode, raw[10 + size :]).tolist()
    return arrays


def mean_squared_error(data: Path, w: list[float], b: float) -> float:
    """The model's loss on the whole dataset (``x.f32``, ``y.f32``: little-endian float32)."""
    xs, ys = array("f"), array("f")
    xs.frombytes((data / "x.f32").read_bytes())
    ys.frombytes((data / "y.f32").read_bytes())
    d = len(w)
    errors = (sum(w[j] * xs[i * d + j] for j in range(d)) + b - y for i, y in enumerate(ys))
    return sum(e * e for e in errors) / len(ys)


def test_prepare_train_evaluate_on_the_real_node(  # noqa: PLR0917
    dag_file: Any,
    devcluster: DevCluster,
    real_node: RealNode,
    cluster_namespace: str,
    kube_conn: str,
    shared: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = dag_file(DAG_ID, EXAMPLE.read_text())  # dag.test() runs what the dags folder has
    rec = Recorder(DAG_ID, namespace=cluster_namespace, api_client=devcluster.api_client())
    rec.start()
    try:
        result = run_example(path, monkeypatch, shared, cluster_namespace, kube_conn)
    finally:
        rec.finish()
    tasks = result["tasks"]
    assert result["state"] == "success", tasks
    prepare, train, evaluate = (tasks[t] for t in ("prepare", "train", "evaluate"))

    # prepare: this run's dataset, written to the shared storage; where the pods find it
    run = re.sub(r"[^A-Za-z0-9_.-]", "_", result["run_id"])
    where = {"dataset": f"/shared/data/{run}", "checkpoints": f"/shared/checkpoints/{run}"}
    assert prepare["xcom"]["return_value"] == {**where, **META}
    data = shared / "data" / run
    assert json.loads((data / "meta.json").read_text()) == META
    assert (data / "x.f32").stat().st_size == 4096 * 8 * 4
    assert (data / "y.f32").stat().st_size == 4096 * 4

    # train: one JobSet (the retry reattached), restarted once, its 2 pods per attempt on the
    # real node, in the test's namespace, with prepare's locations in their arguments
    assert len(rec.seen["jobsets"]) == 1
    (jobset,) = rec.seen["jobsets"].values()
    assert jobset["metadata"]["namespace"] == cluster_namespace
    assert jobset["status"]["restarts"] == 1
    pods = list(rec.seen["pods"].values())
    assert sorted((attempt_of(p), pod_index(p)) for p in pods) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {p.spec.node_name for p in pods} == {real_node.name}
    for pod in pods:
        command = " ".join(pod.spec.containers[0].command)
        assert f"--data {where['dataset']} --checkpoint-dir {where['checkpoints']} " in command
    assert train["try_number"] == 2 and train["history"] == [[1, "failed"]], train
    assert train["xcom"]["jobset_uid"] == jobset["metadata"]["uid"]
    assert train["xcom"]["jobset_outcome"]["terminal_state"] == "Completed"

    # the training's result, as the coordinator's termination message reached XCom
    metrics = train["xcom"]["return_value"]
    resumed = {"steps": 40, "resumed_from_step": 20, "restart_attempt": 1, "processes": 2}
    assert {k: metrics[k] for k in resumed} == resumed, metrics
    assert 0 < metrics["final_loss"] <= 0.05  # the example's MAX_LOSS

    # ... and as the pods logged it: the failure, the checkpoint it resumed from, the result
    logs = {(attempt_of(p), pod_index(p)): rec.logs.get(p.metadata.uid, []) for p in pods}
    why = {(attempt_of(p), pod_index(p)): rec.log_errors.get(p.metadata.uid) for p in pods}
    assert "[attempt 0 process 0/2] checkpoint step-000020.npz" in logs[0, 0], why
    assert "[attempt 0 process 1/2] simulated failure at step 25 (exit 1)" in logs[0, 1], why
    resume = (
        "[attempt 1 process 0/2] resumed from checkpoint step-000020.npz: continuing at step 20"
    )
    assert resume in logs[1, 0], why
    done = [ln for ln in logs[1, 0] if ln.startswith("[attempt 1 process 0/2] done: ")]
    assert len(done) == 1 and json.loads(done[0].split(" done: ", 1)[1]) == metrics, why

    # ... and as the checkpoints on the shared storage hold it: the model of step 40 fits the
    # dataset prepare wrote as well as the reported loss says
    checkpoints = shared / "checkpoints" / run
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000030.npz", "step-000040.npz"]
    final = read_npz(checkpoints / "step-000040.npz")
    assert final["step"] == [40]
    loss = mean_squared_error(data, final["w"], final["b"][0])
    assert loss < 0.05 and abs(loss - metrics["final_loss"]) < 0.005, (loss, metrics)

    # evaluate: the verdict on train's output, which it got whole (the run's own "seconds")
    assert evaluate["state"] == "success"
    assert evaluate["rendered"]["op_args"] == [metrics]
    assert evaluate["xcom"]["return_value"] == (
        f"accepted: loss={metrics['final_loss']} after 40 steps "
        "(resumed from step 20 on restart attempt 1)"
    )

    # delete_policy="always": nothing of the run is left in the namespace
    jobsets = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets"
    )
    assert jobsets["items"] == []
