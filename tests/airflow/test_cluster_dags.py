"""Whole task lives on the devcluster through ``dag.test()``, for both backends and both
wait modes: success with the result as return value, a terminal failure that is never
retried, and a JobSet that fails once then succeeds, finishing on the second try of the task
(the restart became a retry that reattached to the same JobSet).

The DAGs run as a least-privilege identity: a service account bound to nothing but the
shipped worker and triggerer Roles of the backend (``dag.test()`` runs the triggers in the
same process, with the same connection), with tokens that expire every 20 s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.airflow._run_dag import run_dag
from tests.cluster.bodies import jobset, replicated_job

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]


DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator


def jobset(name, annotations, max_restarts=0):
    pod = {{
        "metadata": {{"annotations": annotations}},
        "spec": {{"restartPolicy": "Never", "containers": [{{"name": "c", "image": "busybox"}}]}},
    }}
    job = {{"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}}
    return {{
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {{"name": name}},
        "spec": {{
            "failurePolicy": {{"maxRestarts": max_restarts}},
            "replicatedJobs": [{{"name": "w", "replicas": 2, "template": {{"spec": job}}}}],
        }},
    }}


common = dict(namespace={ns!r}, backend={backend!r}, deferrable={deferrable!r},
              delete_policy="never")
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1),
         default_args={{"retry_delay": timedelta(seconds=1)}}):
    JobSetOperator(task_id="ok", jobset=jobset("ok", {{
        "devcluster/termination-message": '{{"accuracy": 0.9}}', "devcluster/log": "hello"}}),
        **common)
    JobSetOperator(task_id="bad", jobset=jobset("bad", {{"devcluster/exit-code": "3"}}),
        retries=2, **common)
    JobSetOperator(task_id="flaky", jobset=jobset("flaky", {{
        "devcluster/fail-until-attempt": "1", "devcluster/termination-message": "second"}},
        max_restarts=1), **common)
    JobSetOperator(task_id="taken", jobset=jobset("taken", {{}}), name="taken", retries=2,
        **common)
"""


@pytest.fixture
def kube_conn(
    devcluster: Any,
    cluster_namespace: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """``kubernetes_default`` as the least-privilege identity of the test's backend."""
    from tests.cluster.identities import least_privilege

    backend = request.node.callspec.params["backend"]
    roles = [f"jobset-airflow-worker-{backend}", f"jobset-airflow-triggerer-{backend}"]
    who = least_privilege(devcluster, cluster_namespace, tmp_path, "airflow", roles, ttl=20)
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", who.connection())
    return str(who.kubeconfig)


def xcom(task: dict[str, Any], key: str) -> Any:
    return task["xcom"].get(key)


@pytest.mark.airflow_matrix
@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferrable"])
@pytest.mark.parametrize("backend", ["controller", "native"])
def test_success_failure_and_restart_as_retry(  # noqa: PLR0917
    backend: str,
    deferrable: bool,
    cluster_namespace: str,
    kube_conn: str,
    dag_file: Any,
    devcluster: Any,
) -> None:
    dag_id = f"cluster_{backend}_{'deferred' if deferrable else 'worker'}"
    path = dag_file(
        dag_id,
        DAG.format(ns=cluster_namespace, backend=backend, deferrable=deferrable, dag_id=dag_id),
    )
    # "taken" is the name of an object that is not this task's run (no identity labels).
    if backend == "controller":
        devcluster.create_jobset(
            cluster_namespace, jobset("taken", replicated_job("w"), suspend=True)
        )
    else:
        devcluster.core.create_namespaced_config_map(
            cluster_namespace, {"metadata": {"name": "taken"}, "data": {"a": "b"}}
        )
    result = run_dag(path, dag_id)
    tasks = result["tasks"]

    taken = tasks["taken"]
    assert taken["state"] == "failed"
    assert taken["try_number"] == 1, "a name taken by another run must not be retried"

    ok = tasks["ok"]
    assert ok["state"] == "success" and ok["try_number"] == 1
    assert xcom(ok, "return_value") == {"accuracy": 0.9}
    assert xcom(ok, "jobset_backend") == backend
    assert xcom(ok, "jobset_outcome")["terminal_state"] == "Completed"

    bad = tasks["bad"]
    assert bad["state"] == "failed"
    assert bad["try_number"] == 1, "a terminal failure must not be retried"
    assert xcom(bad, "jobset_outcome")["terminal_state"] == "Failed"

    flaky = tasks["flaky"]
    assert flaky["state"] == "success", flaky
    assert flaky["try_number"] == 2
    assert [h[0] for h in flaky["history"]] == [1], "one earlier try"
    assert xcom(flaky, "return_value") == "second"
    assert xcom(flaky, "jobset_outcome")["restarts"] == 1

    # Exactly one object per task, never a duplicate from the retry.
    if backend == "controller":
        items = devcluster.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets"
        )["items"]
        names = sorted(i["metadata"]["name"] for i in items if i["metadata"]["name"] != "taken")
    else:
        maps = devcluster.core.list_namespaced_config_map(
            cluster_namespace, label_selector="airflow-jobset/dag-id"
        ).items
        names = sorted(m.metadata.name for m in maps)
    assert len(names) == 3, names  # (besides "taken", which is not the task's)
    assert xcom(flaky, "jobset_name") in names
