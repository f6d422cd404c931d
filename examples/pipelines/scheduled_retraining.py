"""Scheduled retraining: data prep -> distributed training as a JobSet -> evaluation.

Compile it and run it on a schedule (a KFP recurring run)::

    python examples/pipelines/scheduled_retraining.py scheduled_retraining.yaml
    # then, with a kfp.Client():
    # client.create_recurring_run(experiment_id, "nightly", cron_expression="0 0 3 * * *",
    #     pipeline_package_path="scheduled_retraining.yaml",
    #     params={"namespace": "team-ml", "source_uri": "s3://data/events"})

What each step does:

* ``prepare_data`` snapshots the training data and returns where it is.
* ``training_jobset`` builds a PyTorch DDP JobSet (``jobset_core.pytorch_ddp``) that reads the
  snapshot; it runs in the launcher image, which has the library.
* ``launch_jobset`` runs it and waits: a failed JobSet fails the run; the GPUs, memory and the
  toleration set on this task go to the JobSet's pods, not to the small launcher pod.
  Its ``result`` output is the coordinator's termination message (the trainer writes
  ``{"accuracy": ...}`` to ``/dev/termination-log``).
* ``evaluate`` reads that result and fails the run when the model is not good enough.
* ``cleanup_jobsets`` runs at the end whatever happened (an exit handler), so a terminated
  run leaves no JobSet behind even if the launcher had no time to delete it.
"""

import sys

from kfp import compiler, dsl

from kfp_components import LAUNCHER_IMAGE, cleanup_jobsets, launch_jobset

TRAINER_IMAGE = "ghcr.io/example/trainer:2026.11"


@dsl.component(base_image="python:3.11-slim")
def prepare_data(source_uri: str, snapshot: str) -> str:
    """Snapshot the training data; returns the snapshot's URI."""
    uri = f"{source_uri.rstrip('/')}/snapshot={snapshot}"
    print(f"prepared {uri}")
    return uri


@dsl.component(base_image=LAUNCHER_IMAGE, install_kfp_package=False)
def training_jobset(dataset_uri: str, image: str, nodes: int) -> str:
    """The training JobSet as YAML: ``nodes`` pods running torchrun on the snapshot."""
    from jobset_core import dump_yaml, pytorch_ddp

    jobset = pytorch_ddp(
        "retrain",
        image,
        ["python", "-m", "trainer", "--data", dataset_uri],
        nodes=nodes,
        procs_per_node="gpu",
        gpus_per_node=1,
        max_restarts=2,
        ttl_seconds_after_finished=3600,
    )
    return dump_yaml(jobset)


@dsl.component(base_image="python:3.11-slim")
def evaluate(result: dict, min_accuracy: float) -> float:
    """Fail the run when the trained model is below ``min_accuracy``; returns the accuracy."""
    accuracy = float(result.get("accuracy", 0.0))
    if accuracy < min_accuracy:
        raise ValueError(f"accuracy {accuracy:.3f} is below {min_accuracy:.3f}")
    return accuracy


@dsl.pipeline(name="scheduled-retraining")
def scheduled_retraining(
    namespace: str = "",
    source_uri: str = "s3://example-data/events",
    snapshot: str = "latest",
    nodes: int = 2,
    min_accuracy: float = 0.8,
) -> None:
    """Retrain on a fresh snapshot and gate the model on its accuracy."""
    with dsl.ExitHandler(cleanup_jobsets(namespace=namespace)):
        data = prepare_data(source_uri=source_uri, snapshot=snapshot)
        spec = training_jobset(dataset_uri=data.output, image=TRAINER_IMAGE, nodes=nodes)
        train = launch_jobset(
            jobset=spec.output,
            namespace=namespace,
            timeout_seconds=6 * 3600,
            delete_policy="on_success",
            follow_logs=True,
        )
        # Set on the task, applied to the JobSet's pods (task-config passthrough).
        train.set_memory_limit("64G").set_accelerator_type("nvidia.com/gpu")
        train.set_accelerator_limit(1).set_env_variable("NCCL_DEBUG", "WARN")
        train.set_retry(num_retries=2, backoff_duration="60s")
        evaluate(result=train.outputs["result"], min_accuracy=min_accuracy)


if __name__ == "__main__":
    compiler.Compiler().compile(
        scheduled_retraining, sys.argv[1] if len(sys.argv) > 1 else "scheduled_retraining.yaml"
    )
