"""Pure pieces of the provider: identity, decisions, connection extras, links, events."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_jobset._decisions import (
    Verdict,
    deadline,
    judge,
    max_restarts,
    plan_retries,
    should_delete,
)
from airflow_provider_jobset._identity import TaskIdentity, name_prefix
from airflow_provider_jobset.events import JobSetEvent
from airflow_provider_jobset.hooks import ConnectionConfig, config_from_extras
from airflow_provider_jobset.links import format_link
from airflow_provider_jobset.sensors import sensor_verdict
from jobset_core.models import load_jobset
from jobset_core.outcome import Outcome, Phase

pytestmark = pytest.mark.airflow


def outcome(phase: Phase, **kw: object) -> Outcome:
    terminal = phase.value if phase.terminal else None
    return Outcome(
        name="js", namespace="ns", backend="controller", phase=phase, terminal_state=terminal, **kw
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("train", "train"),
        ("Train_Model", "train-model"),
        ("__x__", "x"),
        ("9lives", "js-9lives"),
        ("", "js"),
        ("a" * 60, "a" * 28),
        ("ab-" + "c" * 40, "ab-" + "c" * 25),
    ],
    ids=["plain", "underscores", "edges", "digit-first", "empty", "long", "cut-keeps-no-dash"],
)
def test_name_prefix(text: str, expected: str) -> None:
    assert name_prefix(text) == expected


def test_identity_is_stable_and_distinguishes_runs() -> None:
    a = TaskIdentity("dag", "task", "scheduled__2026-01-01T00:00:00+00:00")
    b = TaskIdentity("dag", "task", "scheduled__2026-01-02T00:00:00+00:00")
    assert a.identity() == TaskIdentity(a.dag_id, a.task_id, a.run_id).identity()
    assert a.identity() != b.identity()
    assert a.identity()["airflow-jobset/map-index"] == "-1"
    assert len(a.run_id_hash) == 16 and a.run_id not in a.identity().values()
    assert a.annotations() == {"airflow-jobset/run-id": a.run_id}


@pytest.mark.parametrize(
    ("out", "kind", "words"),
    [
        (outcome(Phase.COMPLETED, reason="AllJobsCompleted"), "success", "completed"),
        (
            outcome(Phase.FAILED, reason="ReachedMaxRestarts", failed_job="js-w-0"),
            "fail",
            "failed for good: ReachedMaxRestarts",
        ),
        (
            outcome(Phase.FAILED, reason="FailJobSet", message="rule matched"),
            "fail",
            "FailJobSet: rule matched",
        ),
        (
            outcome(
                Phase.RESTARTING, restarts=1, failed_job="js-w-0", reason="DefaultFailurePolicy"
            ),
            "retry",
            "failed child Job: js-w-0",
        ),
        (outcome(Phase.RUNNING), "wait", "Running"),
        (outcome(Phase.SUSPENDED), "wait", "Suspended"),
    ],
    ids=["completed", "max-restarts", "fail-jobset", "restarting", "running", "suspended"],
)
def test_judge(out: Outcome, kind: str, words: str) -> None:
    verdict = judge(out)
    assert verdict.kind == kind
    assert words in verdict.message


@pytest.mark.parametrize(
    ("policy", "kind", "expected"),
    [
        ("always", "success", True),
        ("always", "fail", True),
        ("always", "retry", False),
        ("on_success", "success", True),
        ("on_success", "fail", False),
        ("on_success", "retry", False),
        ("never", "success", False),
        ("never", "fail", False),
    ],
)
def test_should_delete(policy: str, kind: str, expected: bool) -> None:
    assert should_delete(policy, Verdict(kind)) is expected  # type: ignore[arg-type]


def _jobset(failure_policy: str) -> object:
    return load_jobset(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: a}\n"
        f"spec:\n{failure_policy}  replicatedJobs:\n  - name: w\n"
        "    template: {spec: {template: {spec: {containers: [{name: c, image: i}]}}}}\n"
    )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", 0),
        ("  failurePolicy: {maxRestarts: 3}\n", 3),
        ("  failurePolicy: {}\n", 0),
        (
            "  failurePolicy:\n    maxRestarts: 2\n    rules:\n"
            "    - {name: r, action: RestartJobSetAndIgnoreMaxRestarts}\n",
            None,
        ),
    ],
    ids=["no-policy", "max-3", "empty-policy", "ignore-max-unbounded"],
)
def test_max_restarts(policy: str, expected: int | None) -> None:
    assert max_restarts(_jobset(policy)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("restarts", "retries", "expected", "problem"),
    [
        (3, None, 3, False),
        (0, None, 0, False),
        (None, None, None, False),
        (3, 3, 3, False),
        (3, 5, 5, False),
        (3, 1, 1, True),
        (None, 2, 2, False),
    ],
    ids=["derived", "derived-zero", "unbounded", "equal", "more", "fewer", "unbounded-given"],
)
def test_plan_retries(
    restarts: int | None, retries: int | None, expected: int | None, problem: bool
) -> None:
    plan = plan_retries(restarts, retries)
    assert plan.retries == expected
    assert (plan.problem is not None) is problem


def test_deadline_is_the_earliest_end() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    started = now - dt.timedelta(minutes=10)
    assert deadline(now, None, None) is None
    assert deadline(now, dt.timedelta(hours=1), None) == now + dt.timedelta(hours=1)
    both = deadline(now, dt.timedelta(hours=1), dt.timedelta(minutes=30), started)
    assert both == started + dt.timedelta(minutes=30)


@pytest.mark.parametrize(
    ("extras", "expected"),
    [
        ({}, ConnectionConfig()),
        (
            {"in_cluster": True, "namespace": "ml"},
            ConnectionConfig(in_cluster=True, namespace="ml"),
        ),
        ({"in_cluster": "true"}, ConnectionConfig(in_cluster=True)),
        ({"in_cluster": "False", "kube_config_path": "/k"}, ConnectionConfig(kubeconfig_path="/k")),
        (
            {
                "extra__kubernetes__kube_config_path": "/k",
                "extra__kubernetes__cluster_context": "c",
            },
            ConnectionConfig(kubeconfig_path="/k", context="c"),
        ),
        (
            {"kube_config": '{"apiVersion": "v1", "kind": "Config"}'},
            ConnectionConfig(kubeconfig={"apiVersion": "v1", "kind": "Config"}),
        ),
        (
            {"kube_config": "apiVersion: v1\nkind: Config\n"},
            ConnectionConfig(kubeconfig={"apiVersion": "v1", "kind": "Config"}),
        ),
        ({"kube_config_path": "", "namespace": ""}, ConnectionConfig()),
    ],
    ids=[
        "empty",
        "in-cluster",
        "in-cluster-text",
        "path",
        "legacy-prefix",
        "content-json",
        "content-yaml",
        "blank-values",
    ],
)
def test_config_from_extras(extras: dict[str, object], expected: ConnectionConfig) -> None:
    assert config_from_extras(extras) == expected


def test_config_overrides_and_conflicts() -> None:
    got = config_from_extras(
        {"kube_config_path": "/a", "cluster_context": "x"}, config_file="/b", cluster_context="y"
    )
    assert (got.kubeconfig_path, got.context) == ("/b", "y")
    with pytest.raises(ValueError, match="mutually exclusive"):
        config_from_extras({"in_cluster": True, "kube_config_path": "/a"})
    with pytest.raises(ValueError, match="not a boolean"):
        config_from_extras({"in_cluster": "maybe"})
    assert ConnectionConfig(kubeconfig_path="/a").key() != ConnectionConfig(in_cluster=True).key()


def test_format_link() -> None:
    template = "https://k8s.example/ns/{namespace}/jobsets/{name}?uid={uid}"
    assert format_link(template, name="a", namespace="b", uid="c") == (
        "https://k8s.example/ns/b/jobsets/a?uid=c"
    )
    assert format_link("", name="a", namespace="b", uid="c") == ""
    assert format_link(template, name=None, namespace=None, uid=None) == ""


@pytest.mark.parametrize(
    ("phases", "targets", "expected"),
    [
        ([], ["Completed"], False),
        ([Phase.COMPLETED], ["Completed"], True),
        ([Phase.RUNNING], ["Completed"], False),
        ([Phase.RUNNING], ["Running", "Completed"], True),
        ([Phase.COMPLETED, Phase.RUNNING], ["Completed"], False),
        ([Phase.FAILED], ["Completed"], "ended Failed"),
        ([Phase.FAILED], ["Failed"], True),
    ],
    ids=["none-yet", "done", "running", "running-is-target", "one-of-two", "failed", "want-failed"],
)
def test_sensor_verdict(phases: list[Phase], targets: list[str], expected: object) -> None:
    got = sensor_verdict([outcome(p) for p in phases], targets)
    if isinstance(expected, str):
        assert isinstance(got, str) and expected in got
    else:
        assert got is expected


def test_event_payload_round_trip() -> None:
    event = JobSetEvent(
        kind="outcome",
        name="js",
        namespace="ns",
        uid="u",
        outcome=outcome(Phase.COMPLETED, result={"accuracy": 0.9}, restarts=2),
    )
    payload = event.to_payload()
    assert payload["outcome"]["phase"] == "Completed"
    assert JobSetEvent.model_validate(payload) == event
    with pytest.raises(ValueError):
        JobSetEvent.model_validate({**payload, "kind": "error"})
