"""The native backend: run a JobSet on a cluster that has no JobSet controller installed.

The operator itself creates the headless Service and the child Jobs (owned by an anchor
ConfigMap) and applies the success and failure policies. The JobSet comes from a templated
YAML file next to this DAG (``template_ext``), rendered with the run's ``ds`` and params.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag

from airflow_provider_jobset.operators import JobSetOperator


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"team": "ml-platform"},
    tags=["jobset", "example"],
)
def native_batch_inference():
    JobSetOperator(
        task_id="infer",
        jobset="jobsets/batch_inference.yaml",
        backend="native",
        delete_policy="always",
    )


native_batch_inference()
