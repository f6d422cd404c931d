"""Operator and sensor arguments are checked when the DAG is parsed, and the templated ones
again once rendered: a wrong one is a ``TypeError``/``ValueError`` naming it (or, after
rendering, a failed task), never a JobSet created and then a crash."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_jobset._compat import AirflowFailException
from airflow_provider_jobset._decisions import MAX_DERIVED_RETRIES
from airflow_provider_jobset.operators import JobSetOperator, JobSetRetriesWarning
from airflow_provider_jobset.sensors import JobSetSensor
from jobset_core import leader_workers

pytestmark = pytest.mark.airflow

YAML = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: js}}
spec:
  failurePolicy: {{maxRestarts: {restarts}}}
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            containers: [{{name: c, image: busybox}}]
"""


def small() -> Any:
    return leader_workers("lw", "busybox", workers=1, leader_command=["true"], worker_command=["x"])


OPERATOR_CASES = [
    # (arguments, exception, fragment of the message)
    ({"jobset": 42}, TypeError, "JobSetOperator(jobset=...): must be a JobSet, a mapping"),
    ({"jobset": ["a"]}, TypeError, "jobset=...): must be a JobSet"),
    ({"jobset": "  "}, ValueError, "jobset=...): must not be empty"),
    ({"timeout": 30}, TypeError, "JobSetOperator(timeout=...): must be a datetime.timedelta"),
    ({"timeout": "30s"}, TypeError, "timeout=...): must be a datetime.timedelta"),
    ({"timeout": dt.timedelta(0)}, ValueError, "timeout=...): must be positive"),
    ({"timeout": dt.timedelta(seconds=-1)}, ValueError, "must be positive"),
    ({"deferrable": "no"}, TypeError, "deferrable=...): must be True, False or None"),
    ({"deferrable": 1}, TypeError, "deferrable=...): must be True, False or None"),
    ({"stream_logs": "yes"}, TypeError, "stream_logs=...): must be True or False"),
    ({"delete_on_kill": None}, TypeError, "delete_on_kill=...): must be True or False"),
    ({"in_cluster": "true"}, TypeError, "in_cluster=...): must be True, False or None"),
    ({"log_job_index": "x"}, TypeError, "log_job_index=...): must be an int >= 0"),
    ({"log_job_index": -1}, ValueError, "log_job_index=...): must be >= 0"),
    ({"log_pod_index": 1.5}, TypeError, "log_pod_index=...): must be an int >= 0"),
    ({"failed_pod_log_lines": -5}, ValueError, "failed_pod_log_lines=...): must be >= 0"),
    ({"failed_pod_log_lines": True}, TypeError, "failed_pod_log_lines=...): must be an int"),
    ({"retries": -1}, ValueError, "retries=...): must be >= 0"),
    ({"retries": "3"}, TypeError, "retries=...): must be an int >= 0"),
    ({"backend": "kubeflow"}, ValueError, "backend=...): must be one of 'auto'"),
    (
        {"delete_policy": "sometimes"},
        ValueError,
        "delete_policy=...): must be one of 'never', 'on_timeout'",
    ),
    ({"namespace": "BAD NS!"}, ValueError, "namespace=...): 'BAD NS!' is not a valid namespace"),
    ({"namespace": ""}, ValueError, "namespace=...): must not be empty"),
    ({"namespace": 7}, TypeError, "namespace=...): must be a string"),
    ({"name": "Bad_Name"}, ValueError, "name=...): 'Bad_Name' is not a valid JobSet name"),
    ({"name": "a" * 64}, ValueError, "must be no more than 63 characters"),
    ({"log_replicated_job": 3}, TypeError, "log_replicated_job=...): must be a string"),
    ({"kubernetes_conn_id": 3}, TypeError, "kubernetes_conn_id=...): must be a string"),
    ({"config_file": 3}, TypeError, "config_file=...): must be a path or None"),
    ({"link_template": b"x"}, TypeError, "link_template=...): must be a string"),
    ({"start_grace": "2m"}, TypeError, "start_grace=...): must be a number of seconds, a"),
    ({"start_grace": -1}, ValueError, "start_grace=...): must be 0 or more"),
    ({"pending_timeout": dt.timedelta(seconds=-5)}, ValueError, "pending_timeout=...): must be"),
    ({"crash_loop_restarts": 0}, ValueError, "crash_loop_restarts=...): must be >= 1"),
    ({"crash_loop_restarts": True}, TypeError, "crash_loop_restarts=...): must be an int"),
    ({"log_pods": "leader"}, ValueError, "log_pods=...): log pods 'leader'"),
    ({"log_pods": 3}, TypeError, "log_pods=...): must be a string"),
    ({"log_container": "Bad_Name"}, ValueError, "log_container=...): not a container name"),
    ({"log_max_pods": 0}, ValueError, "log_max_pods=...): must be >= 1"),
    ({"log_max_bytes": "1M"}, TypeError, "log_max_bytes=...): must be an int >= 1 or None"),
    ({"inject_env": "no"}, TypeError, "inject_env=...): must be True or False"),
]


@pytest.mark.parametrize(
    ("arguments", "error", "fragment"),
    OPERATOR_CASES,
    ids=[f"{next(iter(a))}={next(iter(a.values()))!r}"[:40] for a, _, _ in OPERATOR_CASES],
)
def test_operator_refuses_a_bad_argument_at_parse_time(
    arguments: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    arguments = {"jobset": small(), **arguments}
    with pytest.raises(error) as raised:
        JobSetOperator(task_id="t", **arguments)
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "arguments",
    [
        {"timeout": dt.timedelta(hours=6), "deferrable": True},
        {"namespace": "team-a", "name": "exact", "log_job_index": 0, "failed_pod_log_lines": 0},
        {"namespace": "{{ params.ns }}", "name": "{{ ti.task_id }}-x"},
        {"jobset": "jobsets/train.yaml"},
        {"jobset": Path("jobsets/train.yaml")},
        {"deferrable": None, "in_cluster": None, "retries": 0, "config_file": Path("/k")},
        {"start_grace": 0, "pending_timeout": dt.timedelta(minutes=10), "crash_loop_restarts": 3},
        {"start_grace": None, "log_pods": "leaders", "log_container": "main"},
        {"log_pods": "jobset.sigs.k8s.io/replicatedjob-name in (workers)", "log_max_bytes": None},
        {"log_pods": "all", "log_max_pods": 64, "log_max_bytes_per_second": None},
        {"inject_env": False},
    ],
)
def test_operator_accepts_good_and_templated_arguments(arguments: dict[str, Any]) -> None:
    arguments = {"jobset": small(), **arguments}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        JobSetOperator(task_id="t", retries=arguments.pop("retries", 0), **arguments)


@pytest.mark.parametrize(
    ("restarts", "retries", "warning"),
    [
        (-1, 0, "maxRestarts=-1 is below 0"),
        (2**31 - 1, MAX_DERIVED_RETRIES, f"the task gets retries={MAX_DERIVED_RETRIES}"),
        (MAX_DERIVED_RETRIES + 1, MAX_DERIVED_RETRIES, "set retries to allow more"),
    ],
)
def test_max_restarts_out_of_range_maps_to_a_sane_retry_count(
    restarts: int, retries: int, warning: str
) -> None:
    with pytest.warns(JobSetRetriesWarning, match=warning):
        op = JobSetOperator(task_id="t", jobset=YAML.format(restarts=restarts))
    assert op.retries == retries


def test_max_restarts_in_range_is_taken_as_it_is() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = JobSetOperator(task_id="t", jobset=YAML.format(restarts=MAX_DERIVED_RETRIES))
    assert op.retries == MAX_DERIVED_RETRIES


def test_an_alias_bomb_costs_a_dag_parse_nothing() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level, prev in zip("bcdefghij", "abcdefghi", strict=True):
        lines.append(f"{level}: &{level} [{', '.join(['*' + prev] * 9)}]")
    op = JobSetOperator(task_id="t", jobset="\n".join(lines) + "\n", retries=0)
    with pytest.raises(AirflowFailException, match="aliases expand to more than"):
        op.prepare_jobset(_identity(), "ns")


def _identity() -> Any:
    from airflow_provider_jobset._identity import TaskIdentity

    return TaskIdentity("d", "t", "r")


def _render(op: Any, context: dict[str, Any]) -> None:
    from airflow.sdk import DAG

    with DAG("tmpl", schedule=None) as dag:
        dag.add_task(op)
    op.render_template_fields(context, dag.get_template_env())


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"namespace": "{{ params.ns }}"}, "namespace=..., after rendering): 'BAD NS!'"),
        ({"name": "{{ params.ns }}"}, "name=..., after rendering): 'BAD NS!'"),
    ],
)
def test_templated_fields_are_checked_after_rendering(
    airflow_db: Path, arguments: dict[str, Any], fragment: str
) -> None:
    op = JobSetOperator(task_id="t", jobset=small(), retries=0, **arguments)
    with pytest.raises(AirflowFailException, match="nothing was created") as raised:
        _render(op, {"params": {"ns": "BAD NS!"}})
    assert fragment in str(raised.value)


def test_rendered_good_values_pass(airflow_db: Path) -> None:
    op = JobSetOperator(
        task_id="t", jobset=small(), retries=0, namespace="{{ params.ns }}", name="{{ params.n }}"
    )
    _render(op, {"params": {"ns": "team-a", "n": "run-1"}})
    assert (op.namespace, op.name) == ("team-a", "run-1")


SENSOR_CASES = [
    ({}, ValueError, "give exactly one of name and label_selector"),
    ({"name": "a", "label_selector": {"a": "b"}}, ValueError, "give exactly one"),
    ({"name": "BAD NS!"}, ValueError, "JobSetSensor(name=...): 'BAD NS!' is not a valid"),
    ({"name": "a", "namespace": "BAD NS!"}, ValueError, "namespace=...): 'BAD NS!'"),
    ({"label_selector": "team=ml"}, TypeError, "label_selector=...): must be a non-empty map"),
    ({"label_selector": {}}, TypeError, "label_selector=...): must be a non-empty mapping"),
    ({"label_selector": {"a": 1}}, TypeError, "label_selector=...): must be a mapping of str"),
    ({"name": "a", "target_phases": "Completed"}, TypeError, "target_phases=...): must be a"),
    ({"name": "a", "target_phases": []}, ValueError, "must name at least one phase"),
    ({"name": "a", "target_phases": ["Done"]}, ValueError, "target_phases=...): must be one of"),
    ({"name": "a", "backend": "kubeflow"}, ValueError, "JobSetSensor(backend=...): must be one"),
    ({"name": "a", "deferrable": "no"}, TypeError, "deferrable=...): must be True, False or"),
    ({"name": "a", "kubernetes_conn_id": 1}, TypeError, "kubernetes_conn_id=...): must be a"),
]


@pytest.mark.parametrize(("arguments", "error", "fragment"), SENSOR_CASES)
def test_sensor_refuses_a_bad_argument_at_parse_time(
    arguments: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as raised:
        JobSetSensor(task_id="s", **arguments)
    assert fragment in str(raised.value)


def test_sensor_accepts_templated_fields_and_checks_them_after_rendering(
    airflow_db: Path,
) -> None:
    sensor = JobSetSensor(task_id="s", name="{{ params.n }}", namespace="{{ params.ns }}")
    with pytest.raises(AirflowFailException, match=r"namespace=..., after rendering\): 'BAD NS!'"):
        _render(sensor, {"params": {"n": "ok", "ns": "BAD NS!"}})
