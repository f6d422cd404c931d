"""Every example DAG loads in a DagBag with no import error and no warning."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "dags"
EXPECTED = {
    "scheduled_retraining": {"prepare", "train", "evaluate"},
    "jax_multislice_pretraining": {"pretrain"},
    "leader_worker": {"run", "report"},
    "native_batch_inference": {"infer"},
}


def test_examples_load_without_errors_or_warnings(airflow_db: Path) -> None:
    from tests.airflow._airflow_compat import DagBag

    bag = DagBag(dag_folder=str(EXAMPLES))
    assert bag.import_errors == {}
    assert bag.captured_warnings == {}
    assert {d: set(bag.dags[d].task_ids) for d in bag.dags} == EXPECTED


def test_retraining_reads_the_training_result_from_xcom(airflow_db: Path) -> None:
    from tests.airflow._airflow_compat import DagBag

    dag = DagBag(dag_folder=str(EXAMPLES / "scheduled_retraining.py")).dags["scheduled_retraining"]
    train = dag.get_task("train")
    assert train.retries == 2  # from failurePolicy.maxRestarts
    assert dag.get_task("evaluate").upstream_task_ids == {"train"}
    assert train.upstream_task_ids == {"prepare"}


def test_multislice_uses_exclusive_placement(airflow_db: Path) -> None:
    from tests.airflow._airflow_compat import DagBag

    dag = DagBag(dag_folder=str(EXAMPLES / "jax_multislice.py")).dags["jax_multislice_pretraining"]
    jobset = dag.get_task("pretrain").jobset
    annotations = jobset.replicated_jobs[0].template.metadata.annotations
    assert annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == (
        "cloud.google.com/gke-nodepool"
    )


def test_leader_decides_success(airflow_db: Path) -> None:
    from tests.airflow._airflow_compat import DagBag

    dag = DagBag(dag_folder=str(EXAMPLES / "leader_worker.py")).dags["leader_worker"]
    policy = dag.get_task("run").jobset.spec.success_policy
    assert policy.operator == "All" and policy.target_replicated_jobs == ["leader"]
