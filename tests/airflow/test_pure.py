"""Pure pieces of the provider: identity, retries and deadlines, connection extras, links,
the sensor's state, the trigger's payload and how long it holds its event."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_provider_jobset._decisions import ResumeGuard, max_restarts, plan_retries
from airflow_provider_jobset._identity import TaskIdentity, name_prefix
from airflow_provider_jobset.hooks import ConnectionConfig, config_from_extras
from airflow_provider_jobset.links import format_link
from airflow_provider_jobset.sensors import sensor_state
from jobset_core.lifecycle import Verdict
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


@pytest.mark.parametrize(
    ("now", "here", "wait"),
    [
        (1000.0, "worker:7", 7.0),  # fired as the task deferred: the whole window
        (1003.5, "worker:7", 3.5),  # the rest of it
        (1007.0, "worker:7", 0.0),  # the window is over
        (2000.0, "worker:7", 0.0),  # long after (a triggerer restarted): at once
        (990.0, "worker:7", 7.0),  # the triggerer's clock behind: never more than the window
        (1000.0, "host:1", 0.0),  # the process that deferred fires it (dag.test())
    ],
    ids=["at-once", "partway", "over", "long-after", "clock-behind", "same-process"],
)
def test_resume_guard_holds_the_event_for_the_rest_of_its_window(
    now: float, here: str, wait: float
) -> None:
    assert ResumeGuard(1000.0, 7.0, "host:1").hold(now, here) == pytest.approx(wait)


def test_the_deadline_is_the_earliest_end() -> None:
    from airflow_provider_jobset._request import operator_deadline as _deadline

    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    started = now - dt.timedelta(minutes=10)
    assert _deadline(None, None, None).begin(now.timestamp()).ends_at() is None
    hour = _deadline(dt.timedelta(hours=1), None, None).begin(now.timestamp())
    assert hour.ends_at() == (now + dt.timedelta(hours=1)).timestamp()
    assert hour.budget() == 3600
    both = _deadline(dt.timedelta(hours=1), dt.timedelta(minutes=30), started)
    both = both.begin(now.timestamp())
    assert both.ends_at() == (started + dt.timedelta(minutes=30)).timestamp()
    assert both.budget() == 20 * 60  # what the try was given, from its start


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


def test_format_link() -> None:
    template = "https://k8s.example/ns/{namespace}/jobsets/{name}?uid={uid}"
    assert format_link(template, name="a", namespace="b", uid="c") == (
        "https://k8s.example/ns/b/jobsets/a?uid=c"
    )
    assert format_link("", name="a", namespace="b", uid="c") == ""
    assert format_link(template, name=None, namespace=None, uid=None) == ""


@pytest.mark.parametrize(
    ("phases", "targets", "kind", "words"),
    [
        ([], ["Completed"], "waiting", "no JobSet matches yet"),
        ([Phase.COMPLETED], ["Completed"], "done", "every JobSet is Completed"),
        ([Phase.RUNNING], ["Completed"], "waiting", "is Running"),
        ([Phase.RUNNING], ["Running", "Completed"], "done", ""),
        ([Phase.COMPLETED, Phase.RUNNING], ["Completed"], "waiting", "is Running"),
        ([Phase.FAILED], ["Completed"], "failed", "ended Failed"),
        ([Phase.FAILED], ["Failed"], "done", ""),
    ],
    ids=["none-yet", "done", "running", "running-is-target", "one-of-two", "failed", "want-failed"],
)
def test_sensor_state(phases: list[Phase], targets: list[str], kind: str, words: str) -> None:
    outcomes = [outcome(p) for p in phases]
    state = sensor_state(outcomes, targets)
    assert state.kind == kind and words in state.message
    if kind == "waiting" and outcomes:
        assert state.waiting is next(o for o in outcomes if o.phase.value not in targets)


def test_trigger_payload_is_the_verdict_and_round_trips() -> None:
    verdict = Verdict(
        kind="completed",
        name="js",
        namespace="ns",
        uid="u",
        backend="controller",
        outcome=outcome(Phase.COMPLETED, result={"accuracy": 0.9}, restarts=2),
        message="JobSet ns/js completed (AllJobsCompleted)",
    )
    payload = verdict.to_payload()
    assert payload["outcome"]["phase"] == "Completed" and payload["kind"] == "completed"
    assert Verdict.model_validate(payload) == verdict
    with pytest.raises(ValueError):
        Verdict.model_validate({**payload, "kind": "error"})
