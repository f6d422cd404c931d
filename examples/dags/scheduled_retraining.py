"""Daily retraining: prepare a dataset, train with JAX on a JobSet, evaluate the result.

* ``prepare`` writes the day's (synthetic) dataset to the shared storage and returns where it
  is; that location reaches the JobSet's container arguments through Airflow templating (the
  operator's ``jobset`` is a templated field).
* ``train`` is a JobSet of 2 pods built with the core's ``jax_multislice`` builder (1 slice of
  2 hosts): pod 0 is the JAX coordinator, reached at its headless-Service DNS name, and the
  two processes train a model data-parallel (``examples/workloads/jax_train.py``). Every
  ``CHECKPOINT_EVERY`` steps the coordinator checkpoints to the shared storage. On restart
  attempt 0 process 1 exits at step ``FAIL_AT_STEP``: the JobSet restarts (``max_restarts=2``,
  each restart is one more try of the task, which reattaches to the same JobSet), and the
  next attempt resumes from the last checkpoint.
* ``evaluate`` reads the coordinator's metrics (its termination message) from XCom.

Where it runs is set by the Airflow worker's environment (``make demo`` sets it for the
devcluster's real node):

* ``JOBSET_EXAMPLES_IMAGE``: the training image (default ``devcluster.local/python-jax:1``,
  built by ``tests/cluster/devcluster.py images``; see ``tests/cluster/README.md`` for getting
  it onto another cluster);
* ``JOBSET_EXAMPLES_SHARED_DIR``: the folder ``prepare`` writes to. The pods see the same
  storage at ``/shared``: a PersistentVolumeClaim named by ``JOBSET_EXAMPLES_SHARED_PVC``
  (mount it on the worker at ``JOBSET_EXAMPLES_SHARED_DIR`` too), else a ``hostPath`` of that
  folder (a single-node cluster such as the devcluster's real node);
* ``JOBSET_EXAMPLES_REAL_NODE=1``: run on the devcluster's real node (its label and taint).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from array import array
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import dag, get_current_context, task

from airflow_provider_jobset.operators import JobSetOperator
from jobset_core import jax_multislice

IMAGE = os.environ.get("JOBSET_EXAMPLES_IMAGE", "devcluster.local/python-jax:1")
SHARED_DIR = os.environ.get("JOBSET_EXAMPLES_SHARED_DIR", "/srv/jobset-examples")
SHARED_PVC = os.environ.get("JOBSET_EXAMPLES_SHARED_PVC")
REAL_NODE = os.environ.get("JOBSET_EXAMPLES_REAL_NODE") == "1"
#: A Kueue LocalQueue to train through (``make demo DEMO_QUEUE=1``), else none.
QUEUE = os.environ.get("JOBSET_EXAMPLES_QUEUE") or None
STEPS = 40
CHECKPOINT_EVERY = 10
FAIL_AT_STEP = 25
MAX_LOSS = 0.05  # the noise of the synthetic data is 0.1, so a good fit ends near 0.01


def write_dataset(folder: Path, rows: int = 4096, features: int = 8, seed: int = 0) -> dict:
    """A linear-regression dataset (little-endian float32 files and ``meta.json``)."""
    rng = random.Random(seed)
    weights = [rng.gauss(0, 1) for _ in range(features)]
    xs, ys = array("f"), array("f")
    for _ in range(rows):
        x = [rng.gauss(0, 1) for _ in range(features)]
        xs.extend(x)
        ys.append(sum(a * w for a, w in zip(x, weights, strict=True)) + 0.5 + rng.gauss(0, 0.1))
    if sys.byteorder != "little":
        xs.byteswap()
        ys.byteswap()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x.f32").write_bytes(xs.tobytes())
    (folder / "y.f32").write_bytes(ys.tobytes())
    meta = {"rows": rows, "features": features, "seed": seed, "noise": 0.1}
    (folder / "meta.json").write_text(json.dumps(meta))
    return meta


def training_jobset() -> dict[str, Any]:
    """The training JobSet as a mapping, so that Airflow renders its ``{{ ... }}`` strings."""
    jobset = jax_multislice(
        "retrain",
        IMAGE,
        [
            "python3",
            "/opt/jobset-examples/jax_train.py",
            "--data",
            "{{ ti.xcom_pull(task_ids='prepare')['dataset'] }}",
            "--checkpoint-dir",
            "{{ ti.xcom_pull(task_ids='prepare')['checkpoints'] }}",
            f"--steps={STEPS}",
            f"--checkpoint-every={CHECKPOINT_EVERY}",
            f"--fail-at-step={FAIL_AT_STEP}",
            "--step-seconds=0.2",
        ],
        slices=1,
        hosts_per_slice=2,
        topology_key="kubernetes.io/hostname",
        megascale=False,
        max_restarts=2,
        resources={"requests": {"cpu": "100m", "memory": "512Mi"}},
    )
    body = jobset.to_dict()
    pod_spec = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    for container in pod_spec["containers"]:
        container["imagePullPolicy"] = "IfNotPresent"
        container["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
    if SHARED_PVC:
        pod_spec["volumes"] = [
            {"name": "shared", "persistentVolumeClaim": {"claimName": SHARED_PVC}}
        ]
    else:
        pod_spec["volumes"] = [
            {"name": "shared", "hostPath": {"path": SHARED_DIR, "type": "DirectoryOrCreate"}}
        ]
    if REAL_NODE:
        pod_spec["nodeSelector"] = {"devcluster/real-node": "true"}
        pod_spec["tolerations"] = [
            {"key": "devcluster/real-node", "operator": "Exists", "effect": "NoSchedule"}
        ]
    return body


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["jobset", "example"],
    default_args={"retry_delay": timedelta(seconds=2)},
)
def scheduled_retraining():
    @task
    def prepare() -> dict[str, Any]:
        """Write this run's dataset to the shared storage; return where the pods find it."""
        run = re.sub(r"[^A-Za-z0-9_.-]", "_", get_current_context()["run_id"])
        meta = write_dataset(Path(SHARED_DIR) / "data" / run)
        return {
            "dataset": f"/shared/data/{run}",
            "checkpoints": f"/shared/checkpoints/{run}",
            **meta,
        }

    train = JobSetOperator(
        task_id="train",
        jobset=training_jobset(),
        timeout=timedelta(minutes=15),  # of training: time in a queue does not count
        queue=QUEUE,
        admission_timeout=timedelta(minutes=30) if QUEUE else None,
        delete_policy="always",
    )

    @task
    def evaluate(metrics: dict[str, Any] | None) -> str:
        """Accept the model only when it fits the data well enough."""
        if not metrics or metrics.get("final_loss", float("inf")) > MAX_LOSS:
            raise ValueError(f"model rejected: {metrics}")
        return (
            f"accepted: loss={metrics['final_loss']} after {metrics['steps']} steps "
            f"(resumed from step {metrics['resumed_from_step']} on restart attempt "
            f"{metrics['restart_attempt']})"
        )

    prepare() >> train
    evaluate(train.output)


scheduled_retraining()
