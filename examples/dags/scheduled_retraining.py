"""Daily retraining: prepare the data, train with PyTorch DDP on a JobSet, evaluate the result.

The training JobSet is built with the core's ``pytorch_ddp`` builder: 2 nodes running
``torchrun``; pod 0 is the coordinator and its termination message (a JSON line written to
``/dev/termination-log`` by ``train.py``) is the task's return value, read by ``evaluate``
from XCom. ``max_restarts=2``: a failed node restarts the whole JobSet, and each restart is
one more try of the ``train`` task (retries are derived from ``maxRestarts``).

On the devcluster (``JOBSET_EXAMPLES_DEVCLUSTER=1``, set by ``make demo``) the pods are
simulated: they fail on the first attempt, then succeed with a metrics message.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from airflow.sdk import dag, task

from airflow_provider_jobset.operators import JobSetOperator
from jobset_core import pytorch_ddp

SIMULATED = os.environ.get("JOBSET_EXAMPLES_DEVCLUSTER") == "1"


def training_jobset():
    """Two-node DDP training (a :class:`jobset_core.JobSet`)."""
    jobset = pytorch_ddp(
        "retrain",
        "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        ["train.py", "--data", "/data/latest", "--epochs", "3"],
        nodes=2,
        procs_per_node=1,
        max_restarts=2,
    )
    if SIMULATED:
        pod = jobset.replicated_jobs[0].template.spec["template"]
        pod.setdefault("metadata", {}).setdefault("annotations", {}).update(
            {
                "devcluster/run-seconds": "3",
                "devcluster/fail-until-attempt": "1",
                "devcluster/log": "epoch 1 loss=0.61\nepoch 2 loss=0.42\nepoch 3 loss=0.35",
                "devcluster/termination-message": json.dumps({"accuracy": 0.93, "loss": 0.35}),
            }
        )
    return jobset


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["jobset", "example"],
    default_args={"retry_delay": timedelta(seconds=5)},
)
def scheduled_retraining():
    @task
    def prepare(ds=None):
        """Stage the day's data (here: just name it)."""
        return {"dataset": f"/data/{ds}"}

    train = JobSetOperator(
        task_id="train",
        jobset=training_jobset(),
        timeout=timedelta(minutes=30),
        delete_policy="always",
    )

    @task
    def evaluate(metrics):
        """Accept the model only when it is good enough."""
        if not metrics or metrics.get("accuracy", 0) < 0.9:
            raise ValueError(f"model rejected: {metrics}")
        return f"accepted: accuracy={metrics['accuracy']}"

    prepare() >> train
    evaluate(train.output)


scheduled_retraining()
