"""Every example DAG loads in a DagBag with no import error and no warning, and submits a valid
JobSet."""

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
    pod = jobset.replicated_jobs[0].template.spec["template"]["spec"]
    assert set(pod["nodeSelector"]) == {  # GKE's TPU node labels: no pod on a CPU node
        "cloud.google.com/gke-tpu-accelerator",
        "cloud.google.com/gke-tpu-topology",
    }
    assert str(pod["containers"][0]["resources"]["limits"]["google.com/tpu"]) == "4"


def test_leader_decides_success(airflow_db: Path) -> None:
    from tests.airflow._airflow_compat import DagBag

    dag = DagBag(dag_folder=str(EXAMPLES / "leader_worker.py")).dags["leader_worker"]
    policy = dag.get_task("run").jobset.spec.success_policy
    assert policy.operator == "All" and policy.target_replicated_jobs == ["leader"]


@pytest.mark.parametrize("dag_id", sorted(EXPECTED))
def test_every_example_jobset_is_valid_as_it_is_submitted(airflow_db: Path, dag_id: str) -> None:
    """What each JobSet task submits (the workload's variables injected) passes validation, so
    a demo cannot fail on its own spec (e.g. a variable wired by hand twice)."""
    from jobset_core.models import load_jobset
    from jobset_core.validation import validate
    from jobset_core.workload import inject_workload_env
    from tests.airflow._airflow_compat import DagBag

    dag = DagBag(dag_folder=str(EXAMPLES)).dags[dag_id]
    checked = 0
    for task in dag.tasks:
        jobset = getattr(task, "jobset", None)
        if jobset is None or isinstance(jobset, str):  # a file or text, templated at run time
            continue
        model = load_jobset(jobset) if isinstance(jobset, dict) else jobset
        problems = validate(inject_workload_env(model))
        assert problems == [], "\n".join(str(p) for p in problems)
        checked += 1
    assert checked or dag_id == "native_batch_inference"
