"""Operator and trigger surfaces that need Airflow but no cluster: arguments, templating,
spec errors before anything is created, trigger serialization, cheap imports, provider info."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_jobset import get_provider_info
from airflow_provider_jobset._compat import AirflowFailException
from airflow_provider_jobset._decisions import ResumeGuard
from airflow_provider_jobset._identity import TaskIdentity
from airflow_provider_jobset.operators import JobSetOperator, JobSetRetriesWarning
from airflow_provider_jobset.sensors import JobSetSensor
from airflow_provider_jobset.triggers import JobSetTrigger
from jobset_core import leader_workers
from jobset_core.lifecycle import (
    Deadline,
    Handle,
    LogOptions,
    LogTarget,
    PodStartRules,
    RunRequest,
)
from jobset_core.outcome import Phase
from tests.airflow._run_dag import IMPORT_WAIT

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]

YAML = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: {name}
spec:
  failurePolicy: {{maxRestarts: 2}}
  replicatedJobs:
  - name: w
    replicas: 2
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{{name: c, image: busybox}}]
"""


def small() -> Any:
    return leader_workers(
        "lw", "busybox", workers=1, leader_command=["true"], worker_command=["true"], max_restarts=3
    )


def test_retries_derived_from_max_restarts() -> None:
    assert JobSetOperator(task_id="t", jobset=small()).retries == 3
    assert JobSetOperator(task_id="t", jobset=small().to_dict()).retries == 3
    assert JobSetOperator(task_id="t", jobset=YAML.format(name="y")).retries == 2
    assert JobSetOperator(task_id="t", jobset=small(), retries=5).retries == 5


def test_retries_mismatch_is_reported_at_parse_time() -> None:
    with pytest.warns(JobSetRetriesWarning, match="maxRestarts=3"):
        op = JobSetOperator(task_id="t", jobset=small(), retries=1)
    assert op.retries == 1


def test_templated_sources_are_not_parsed_at_parse_time() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = JobSetOperator(task_id="t", jobset="jobsets/train.yaml", retries=0)
        JobSetOperator(task_id="u", jobset=YAML.format(name="{{ ds_nodash }}"), retries=0)
    assert op.retries == 0
    assert op.template_ext == (".yaml", ".yml", ".json")
    assert "jobset" in op.template_fields


def test_deferrable_default_comes_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert JobSetOperator(task_id="t", jobset=small()).deferrable is False
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
    assert JobSetOperator(task_id="t", jobset=small()).deferrable is True
    assert JobSetOperator(task_id="t", jobset=small(), deferrable=False).deferrable is False


def test_deferrable_default_is_read_when_the_task_runs_not_at_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DAG processor builds every operator at every parse: the configuration is read when
    ``deferrable`` is (by ``execute``, in the worker), and a given value is kept as given."""
    parsed = JobSetOperator(task_id="t", jobset=small())
    sensor = JobSetSensor(task_id="s", name="js")
    given = JobSetOperator(task_id="g", jobset=small(), deferrable=False)
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
    assert parsed.deferrable is True
    assert sensor.deferrable is True
    assert given.deferrable is False
    parsed.deferrable = False
    assert parsed.deferrable is False
    assert copy.deepcopy(parsed).deferrable is False


@pytest.mark.airflow_min("3.3")
def test_retry_policy_on_3_3() -> None:
    from airflow.sdk import RetryAction

    from airflow_provider_jobset.exceptions import JobSetFailed, JobSetRestarting
    from jobset_core.lifecycle import Verdict

    op = JobSetOperator(task_id="t", jobset=small())
    policy = op.retry_policy
    assert policy is not None
    ended = Verdict(kind="restarting", name="js", namespace="ns", backend="controller")
    restart = policy.evaluate(JobSetRestarting(ended), 1, 4)
    assert restart.action is RetryAction.RETRY and restart.retry_delay == dt.timedelta(seconds=1)
    failed = ended.model_copy(update={"kind": "failed"})
    assert policy.evaluate(JobSetFailed(failed), 1, 4).action is RetryAction.FAIL
    assert policy.evaluate(RuntimeError("x"), 1, 4).action is RetryAction.DEFAULT


def test_prepare_names_labels_and_validates() -> None:
    op = JobSetOperator(task_id="train_model", jobset=YAML.format(name="trainer"))
    ident = TaskIdentity("d", "train_model", "manual__2026-01-01T00:00:00+00:00", 3)
    js = op.prepare_jobset(ident, "ml")
    again = op.prepare_jobset(ident, "ml")
    other = op.prepare_jobset(TaskIdentity("d", "train_model", "manual__other", 3), "ml")
    assert js.name == again.name != other.name
    assert js.name.startswith("trainer-")
    assert js.metadata.namespace == "ml"
    labels = js.metadata.labels or {}
    assert labels["airflow-jobset/task-id"] == "train_model"
    assert labels["airflow-jobset/map-index"] == "3"
    assert labels["airflow-jobset/run-id-hash"] == ident.run_id_hash
    assert (js.metadata.annotations or {})["airflow-jobset/run-id"] == ident.run_id
    named = JobSetOperator(task_id="t", jobset=YAML.format(name="x"), name="exact")
    assert named.prepare_jobset(ident, "ml").name == "exact"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (("replicas: 2", "replicas: -1"), "spec.replicatedJobs[0].replicas"),
        (("name: w", "name: W_"), "spec.replicatedJobs[0].name"),
    ],
    ids=["model-rule", "webhook-rule"],
)
def test_invalid_spec_fails_with_field_paths_before_anything_is_created(
    change: tuple[str, str], path: str
) -> None:
    op = JobSetOperator(task_id="t", jobset=YAML.format(name="ok").replace(*change))
    with pytest.raises(AirflowFailException) as err:
        op.prepare_jobset(TaskIdentity("d", "t", "r"), "ns")
    assert "nothing was created" in str(err.value)
    assert path in str(err.value)


@pytest.mark.parametrize(
    "change",
    [
        ("  replicatedJobs:", "  fromTheFuture: 1\n  replicatedJobs:"),
        ("image: busybox", "image: busybox, newKnob: 1"),
    ],
    ids=["jobset-model", "pod-schema"],
)
def test_a_field_newer_than_the_models_is_refused_as_a_run_refuses_it(
    change: tuple[str, str],
) -> None:
    """The operator cannot carry such a field: it says so (the core's words for every way
    of running), never the Python API's ``allow_unknown_fields=True`` it has no argument for."""
    op = JobSetOperator(task_id="t", jobset=YAML.format(name="ok").replace(*change))
    with pytest.raises(AirflowFailException) as err:
        op.prepare_jobset(TaskIdentity("d", "t", "r"), "ns")
    said = str(err.value)
    assert "unknown field" in said and "remove it to run the JobSet" in said, said
    assert "JobSetOperator(task_id='t').jobset: spec." in said, said  # its source, as any way
    assert "allow_unknown_fields" not in said, said


def test_dry_run_prints_the_jobset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # No cluster anywhere: the JobSet is printed, and the server checks are said to be skipped.
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    op = JobSetOperator(task_id="train", jobset=small(), namespace="ml")
    said: list[str] = []
    op.log.warning = lambda msg, *args: said.append(msg % args)  # type: ignore[method-assign]
    op.dry_run()
    assert len(said) == 1 and said[0].startswith("the cluster was not asked"), said
    out = capsys.readouterr().out
    assert (
        "kind: JobSet" in out and "namespace: ml" in out and "airflow-jobset/task-id: train" in out
    )


def test_template_file_is_rendered(airflow_db: Path, tmp_path: Path) -> None:
    from airflow.sdk import DAG

    (tmp_path / "train.yaml").write_text(YAML.format(name="t-{{ ds_nodash }}"))
    with DAG("tmpl", schedule=None, template_searchpath=[str(tmp_path)]) as dag:
        op = JobSetOperator(task_id="t", jobset="train.yaml", retries=2)
    env = dag.get_template_env()
    rendered = op.render_template(op.jobset, {"ds_nodash": "20260101"}, env)
    assert "name: t-20260101" in rendered


def test_trigger_serialization_round_trip() -> None:
    request = RunRequest(
        namespace="ns",
        identity={"run": "r"},
        deadline=Deadline(timeout=60, started=1234.5),
        until=frozenset({Phase.RUNNING}),
        pod_start=PodStartRules(grace=0, pending_timeout=30, crash_loop_restarts=2),
        delete_policy="always",
        cancel_on_kill=False,
        logs=LogOptions(pods="all", container="main", max_bytes=None),
    )
    trigger = JobSetTrigger(
        handle=Handle("js", "ns", "u", "native"),
        request=request,
        restarts=2,
        kubernetes_conn_id="k8s",
        cluster_context="ctx",
        resume_guard=ResumeGuard(1234.5, 7.0, "host:42"),
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_jobset.triggers.JobSetTrigger"
    json.dumps(kwargs)
    rebuilt = JobSetTrigger(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    from airflow.serialization.serialized_objects import BaseSerialization

    encoded = BaseSerialization.serialize(kwargs)
    assert JobSetTrigger(**BaseSerialization.deserialize(encoded)).serialize()[1] == kwargs
    assert rebuilt.request == request  # one request, whole: every field comes back
    assert rebuilt.handle == Handle("js", "ns", "u", "native")
    assert rebuilt.resume_guard == ResumeGuard(1234.5, 7.0, "host:42")
    # A trigger serialized before the guard existed is rebuilt without one.
    del kwargs["resume_guard"]
    assert JobSetTrigger(**kwargs).resume_guard is None


def test_look_again_trigger_round_trips_and_fires_a_look_again_held_by_its_guard() -> None:
    """Fired in another process than the one that deferred, inside the guard's window, the
    event is held and the trigger's log says so; the event sends the sensor to look again."""
    import asyncio
    import time

    from airflow.serialization.serialized_objects import BaseSerialization

    from airflow_provider_jobset.triggers import LookAgainTrigger

    guard = ResumeGuard(time.time(), 0.5, "another-host:1")
    trigger = LookAgainTrigger(moment=time.time(), resume_guard=guard)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_jobset.triggers.LookAgainTrigger"
    encoded = BaseSerialization.serialize(kwargs)
    rebuilt = LookAgainTrigger(**BaseSerialization.deserialize(encoded))
    assert (rebuilt.moment, rebuilt.resume_guard) == (trigger.moment, guard)
    said: list[str] = []
    rebuilt.log.info = lambda message, *args, **_: said.append(message % args)  # type: ignore[method-assign]
    event = asyncio.run(anext(rebuilt.run()))
    assert event.payload == {"kind": "look_again"}
    assert any(line.startswith("the task resumes in 0.") for line in said), said
    # The soak counts the hold as our lateness from these words.
    from soak.lateness import _held as soak_reads_held

    assert soak_reads_held([(0.0, line) for line in said]) > 0
    assert LookAgainTrigger(**{**kwargs, "resume_guard": None}).resume_guard is None


def test_the_operator_hands_its_request_to_the_trigger() -> None:
    op = JobSetOperator(
        task_id="t",
        jobset=YAML.format(name="x"),
        deferrable=True,
        start_grace=dt.timedelta(seconds=30),
        log_pods="leaders",
        delete_policy="always",
        retries=2,
    )
    request = op.request
    assert request.pod_start == PodStartRules(grace=30)
    assert request.logs == LogOptions(pods="leaders", target=LogTarget())
    assert (request.on_restart, request.delete_policy, request.wait_gone) == (
        "return",
        "always",
        False,
    )
    quiet = JobSetOperator(task_id="q", jobset=YAML.format(name="x"), stream_logs=False)
    assert quiet.request.logs is None


def test_importing_the_operator_loads_no_kubernetes_client() -> None:
    code = (
        "import sys\n"
        "import airflow_provider_jobset.operators, airflow_provider_jobset.sensors\n"
        "import airflow_provider_jobset.triggers, airflow_provider_jobset.hooks\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'kubernetes_asyncio',"
        " 'aiohttp') or m == 'jobset_core.client._client']\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    run = subprocess.run(  # noqa: PLW1510 - the return code is asserted
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=IMPORT_WAIT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_provider_info_matches_the_distribution() -> None:
    from importlib.metadata import entry_points

    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-jobset"
    points = [e for e in entry_points(group="apache_airflow_provider") if e.name == "provider_info"]
    assert any(e.value == "airflow_provider_jobset:get_provider_info" for e in points)
    for section in ("operators", "sensors", "hooks", "triggers"):
        for module in info[section][0]["python-modules"]:
            __import__(module)
    assert info["extra-links"] == ["airflow_provider_jobset.links.JobSetLink"]


def test_airflow_lists_the_provider(airflow_db: Path) -> None:
    run = subprocess.run(  # noqa: PLW1510 - the return code is asserted
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=IMPORT_WAIT,
    )
    assert run.returncode == 0, run.stderr
    start = run.stdout.index("[{")  # 3.0 logs lines starting with "[" to stdout first
    listed = {p["package_name"]: p for p in json.loads(run.stdout[start:])}
    assert "airflow-provider-jobset" in listed
