"""The pure rules both backends share: run identity (:mod:`jobset_core.identity`), outcomes
(:mod:`jobset_core.policy.outcome`) and pod reading (:mod:`jobset_core.pods`).

Table-driven: identity labels and names, adoption, outcomes read from JobSet statuses written
the way the upstream controller writes them (reasons and messages from
``pkg/constants/constants.go``), the judge's progress tracking, the log pod, the result,
failed pods and creation-failure events.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from jobset_core import identity as ident
from jobset_core import pods as podread
from jobset_core.errors import IdentityMismatch, SpecError
from jobset_core.lifecycle import Handle, Judge, WaitRules
from jobset_core.lifecycle._judge import RESTART_DETAIL_WAIT
from jobset_core.models import JobSet, JobSetStatus, load_jobset
from jobset_core.naming import label_value_errors
from jobset_core.observe import Observation
from jobset_core.outcome import Phase, ReplicatedJobCounts
from jobset_core.policy import outcome as rules

# ---------------------------------------------------------------------------------- builders


def make_jobset(
    name: str | None = "js",
    *,
    rjobs: tuple[tuple[str, int], ...] = (("driver", 1), ("workers", 2)),
    coordinator: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    suspend: bool | None = None,
    generate_name: str | None = None,
    labels: dict[str, str] | None = None,
) -> JobSet:
    metadata: dict[str, Any] = {"namespace": "ns", "uid": "u-1"}
    if name:
        metadata["name"] = name
    if generate_name:
        metadata["generateName"] = generate_name
    if labels:
        metadata["labels"] = labels
    metadata["creationTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": rj,
                "replicas": replicas,
                "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
            }
            for rj, replicas in rjobs
        ]
    }
    if coordinator is not None:
        spec["coordinator"] = coordinator
    if suspend is not None:
        spec["suspend"] = suspend
    body: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return load_jobset(body)


def condition(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2024-01-01T00:01:40Z",
    }


def rj_status(name: str, **counts: int) -> dict[str, Any]:
    base = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    return {"name": name, **base, **counts}


def pod(
    name: str,
    rjob: str,
    job_index: int,
    completion: int | None = 0,
    *,
    attempt: int = 0,
    created: str = "2024-01-01T00:00:00Z",
    phase: str = "Running",
    terminated: dict[str, dict[str, Any]] | None = None,
    containers: tuple[str, ...] = ("main",),
) -> dict[str, Any]:
    labels = {
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/job-index": str(job_index),
        "jobset.sigs.k8s.io/restart-attempt": str(attempt),
    }
    if completion is not None:
        labels["batch.kubernetes.io/job-completion-index"] = str(completion)
    statuses = [
        {"name": c, "state": {"terminated": (terminated or {})[c]}}
        if c in (terminated or {})
        else {"name": c, "state": {"running": {}}}
        for c in containers
    ]
    return {
        "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
        "spec": {"containers": [{"name": c} for c in containers]},
        "status": {"phase": phase, "containerStatuses": statuses},
    }


# ---------------------------------------------------------------------------------- identity


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("run-1", "run-1", id="valid-kept"),
        pytest.param("", "", id="empty-kept"),
        pytest.param("a" * 63, "a" * 63, id="63-chars-kept"),
    ],
)
def test_label_safe_keeps_valid_values(value: str, expected: str) -> None:
    assert ident.label_safe(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("manual__2024-01-01T00:00:00+00:00", id="airflow-run-id"),
        pytest.param("a" * 64, id="too-long"),
        pytest.param("-leading-dash", id="leading-dash"),
        pytest.param("::::", id="nothing-readable"),
    ],
)
def test_label_safe_makes_invalid_values_valid_and_stable(value: str) -> None:
    safe = ident.label_safe(value)
    assert not label_value_errors(safe)
    assert safe == ident.label_safe(value)
    assert safe != ident.label_safe(value + "x")


def test_identity_labels_prefix_bare_keys_and_keep_qualified_ones() -> None:
    labels = ident.identity_labels({"run": "r1", "example.com/dag": "d"})
    assert labels == {"jobset-core/run": "r1", "example.com/dag": "d"}


@pytest.mark.parametrize(
    "key", ["", "bad key", "x/", "-x"], ids=["empty", "space", "no-name", "dash"]
)
def test_identity_labels_reject_invalid_keys(key: str) -> None:
    with pytest.raises(ValueError, match="identity key"):
        ident.identity_labels({key: "v"})


def test_resolve_name_prefers_metadata_name() -> None:
    assert ident.resolve_name(make_jobset("given"), {"run": "1"}) == "given"


def test_resolve_name_is_deterministic_from_identity() -> None:
    js = make_jobset(None, generate_name="train-")
    first = ident.resolve_name(js, {"run": "1", "try": "2"})
    assert first == ident.resolve_name(js, {"try": "2", "run": "1"})
    assert first != ident.resolve_name(js, {"run": "2", "try": "2"})
    assert first.startswith("train-")
    assert len(first) == len("train-") + ident.NAME_HASH_LENGTH


def test_resolve_name_without_prefix_or_identity() -> None:
    assert ident.resolve_name(make_jobset(None), {"run": "1"}).startswith("jobset-")
    with pytest.raises(SpecError, match=r"metadata\.name"):
        ident.resolve_name(make_jobset(None, generate_name="x-"), None)


def test_resolve_name_keeps_derived_names_short() -> None:
    js = make_jobset(None, generate_name="a" * 60 + "-")
    assert len(ident.resolve_name(js, {"run": "1"})) <= 40


def test_stamp_identity_names_labels_and_keeps_user_labels() -> None:
    js = make_jobset(None, generate_name="t-", labels={"team": "ml"})
    stamped, marks = ident.stamp_identity(js, "ns", {"run": "1"})
    assert marks == {"jobset-core/run": "1"}
    assert stamped.metadata.labels == {"team": "ml", "jobset-core/run": "1"}
    assert stamped.metadata.generate_name is None
    assert stamped.name == ident.resolve_name(js, {"run": "1"})
    assert js.metadata.labels == {"team": "ml"}  # the input is not changed


def test_stamp_identity_rejects_a_conflicting_namespace() -> None:
    with pytest.raises(SpecError, match=r"metadata\.namespace"):
        ident.stamp_identity(make_jobset(), "other", {"run": "1"})


def test_spec_fingerprint_follows_name_and_spec() -> None:
    a = ident.spec_fingerprint(make_jobset("a"))
    assert a == ident.spec_fingerprint(make_jobset("a"))
    assert a != ident.spec_fingerprint(make_jobset("b"))
    assert a != ident.spec_fingerprint(make_jobset("a", suspend=True))


ADOPTION_CASES = [
    pytest.param({"k": "v"}, "u1", {"k": "v"}, None, None, id="labels-match"),
    pytest.param({"k": "v"}, "u1", {"k": "v"}, "u1", None, id="labels-and-uid-match"),
    pytest.param({"k": "v", "x": "y"}, "u1", {"k": "v"}, None, None, id="extra-labels-fine"),
    pytest.param({"k": "w"}, "u1", {"k": "v"}, None, "identity labels differ", id="label-differs"),
    pytest.param({}, "u1", {"k": "v"}, None, "identity labels differ", id="label-missing"),
    pytest.param({"k": "v"}, "u2", {"k": "v"}, "u1", "uid is u2", id="uid-differs"),
    pytest.param({}, "u1", {}, "u1", None, id="uid-only-matches"),
    pytest.param({"k": "v"}, "u1", {}, None, "no identity", id="nothing-to-prove"),
]


@pytest.mark.parametrize(("labels", "uid", "expected", "expected_uid", "why"), ADOPTION_CASES)
def test_adoption_problem(
    labels: dict[str, str],
    uid: str,
    expected: dict[str, str],
    expected_uid: str | None,
    why: str | None,
) -> None:
    problem = ident.adoption_problem(
        kind="JobSet",
        namespace="ns",
        name="js",
        labels=labels,
        uid=uid,
        expected_labels=expected,
        expected_uid=expected_uid,
    )
    if why is None:
        assert problem is None
    else:
        assert isinstance(problem, IdentityMismatch)
        assert why in str(problem)
        assert "JobSet ns/js" in str(problem)


def test_jobset_selector() -> None:
    assert ident.jobset_selector("js") == {"jobset.sigs.k8s.io/jobset-name": "js"}
    assert ident.jobset_selector("js", "u")["jobset.sigs.k8s.io/jobset-uid"] == "u"


# ---------------------------------------------------------------------------------- outcome

FIRST_FAILED = "(first failed job: js-workers-1)"

OUTCOME_CASES = [
    pytest.param(None, None, Phase.PENDING, "", id="never-reconciled"),
    pytest.param({"restarts": 0}, None, Phase.PENDING, "", id="no-jobs-yet"),
    pytest.param(
        {"replicatedJobsStatus": [rj_status("workers", active=2)]},
        None,
        Phase.RUNNING,
        "",
        id="active",
    ),
    pytest.param(
        {
            "conditions": [
                condition(
                    "StartupPolicyInProgress",
                    "True",
                    "InOrderStartupPolicyInProgress",
                    "in order startup policy is in progress",
                )
            ],
            "replicatedJobsStatus": [rj_status("driver", ready=1, active=1)],
        },
        None,
        Phase.RUNNING,
        "InOrderStartupPolicyInProgress",
        id="in-order-startup",
    ),
    pytest.param(
        {
            "conditions": [
                condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully")
            ],
            "terminalState": "Completed",
        },
        None,
        Phase.COMPLETED,
        "AllJobsCompleted",
        id="completed",
    ),
    pytest.param(
        {
            "conditions": [
                condition(
                    "Failed",
                    "True",
                    "ReachedMaxRestarts",
                    f"jobset failed due to reaching max number of restarts {FIRST_FAILED}",
                )
            ],
            "terminalState": "Failed",
            "restarts": 2,
            "restartsCountTowardsMax": 2,
        },
        None,
        Phase.FAILED,
        "ReachedMaxRestarts",
        id="failed-max-restarts",
    ),
    pytest.param(
        {
            "conditions": [
                condition(
                    "RestartingJobSet",
                    "True",
                    "DefaultFailurePolicy",
                    f"applying RestartJobSet failure policy action {FIRST_FAILED}",
                )
            ],
            "restarts": 1,
        },
        None,
        Phase.RESTARTING,
        "DefaultFailurePolicy",
        id="restarting",
    ),
    pytest.param(
        {"conditions": [condition("RestartingJobSet", "False", "JobsReady", "all jobs are ready")]},
        None,
        Phase.PENDING,
        "",
        id="restart-over",
    ),
    pytest.param(
        {"conditions": [condition("Suspended", "True", "SuspendedJobs", "jobset is suspended")]},
        True,
        Phase.SUSPENDED,
        "SuspendedJobs",
        id="suspended",
    ),
    pytest.param(None, True, Phase.SUSPENDED, "", id="suspended-before-reconcile"),
    pytest.param(
        {"conditions": [condition("Suspended", "False", "ResumeJobs", "jobset is resumed")]},
        False,
        Phase.PENDING,
        "",
        id="resumed",
    ),
]


@pytest.mark.parametrize(("status", "suspend", "phase", "reason"), OUTCOME_CASES)
def test_build_outcome_phase_and_reason(
    status: dict[str, Any] | None, suspend: bool | None, phase: Phase, reason: str
) -> None:
    outcome = rules.build_outcome(make_jobset(status=status, suspend=suspend), "controller")
    assert outcome.phase is phase
    assert outcome.reason == reason
    assert outcome.terminal_state == (phase.value if phase.terminal else None)


def test_build_outcome_reads_everything_of_a_failed_run() -> None:
    status = {
        "conditions": [
            condition(
                "Failed",
                "True",
                "FailJobSetFailurePolicyAction",
                f"applying FailJobSet failure policy action {FIRST_FAILED}",
            )
        ],
        "terminalState": "Failed",
        "restarts": 3,
        "restartsCountTowardsMax": 1,
        "replicatedJobsStatus": [rj_status("workers", failed=1, succeeded=1)],
    }
    outcome = rules.build_outcome(make_jobset(status=status), "controller", result={"a": 1})
    assert (outcome.name, outcome.namespace, outcome.uid) == ("js", "ns", "u-1")
    assert outcome.failed_job == "js-workers-1"
    assert (outcome.restarts, outcome.restarts_count_towards_max) == (3, 1)
    assert outcome.finished_at == "2024-01-01T00:01:40Z"
    assert outcome.duration_seconds == 100.0
    assert outcome.result == {"a": 1}
    assert outcome.replicated_jobs == (
        ReplicatedJobCounts(name="driver", replicas=1),
        ReplicatedJobCounts(name="workers", replicas=2, failed=1, succeeded=1),
    )


def test_replicated_job_counts_follow_spec_order_not_status_order() -> None:
    # Upstream writes replicatedJobsStatus sorted by name, descending.
    status = {"replicatedJobsStatus": [rj_status("b", ready=1), rj_status("a", active=1)]}
    js = make_jobset(rjobs=(("a", 1), ("b", 3)), status=status)
    assert [(c.name, c.replicas) for c in rules.replicated_job_counts(js)] == [("a", 1), ("b", 3)]


@pytest.mark.parametrize(
    ("message", "job"),
    [
        pytest.param(
            f"jobset failed due to one or more job failures {FIRST_FAILED}",
            "js-workers-1",
            id="suffix",
        ),
        pytest.param("jobset completed successfully", None, id="none"),
        pytest.param("jobset failed due to reaching max number of restarts", None, id="in-place"),
    ],
)
def test_failed_job_from_message(message: str, job: str | None) -> None:
    assert rules.failed_job_from_message(message) == job


def test_restart_details_name_the_failed_job_and_its_failure() -> None:
    status = {
        "conditions": [
            condition(
                "RestartingJobSet",
                "True",
                "FailurePolicy_retry",
                f"applying RestartJobSet failure policy action {FIRST_FAILED}",
            )
        ],
        "restarts": 1,
    }
    js = make_jobset(status=status)
    outcome = rules.build_outcome(js, "controller")
    assert rules.restart_failed_job(js) == "js-workers-1"
    detail = rules.job_failure(
        {
            "metadata": {"name": "js-workers-1"},
            "status": {
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ]
            },
        }
    )
    back = rules.restart_details(outcome, js, detail)
    assert back.phase is Phase.RESTARTING and back.terminal_state is None
    assert back.reason == "FailurePolicy_retry"
    assert back.failed_job == "js-workers-1"
    assert back.message.endswith(
        "job js-workers-1 failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    )


def test_job_failure_is_empty_for_a_job_that_did_not_fail() -> None:
    assert rules.job_failure({"metadata": {"name": "j"}, "status": {"active": 1}}) == ""


def test_status_document_has_every_key() -> None:
    assert rules.status_document(None) == {
        "conditions": [],
        "terminalState": "",
        "restarts": 0,
        "restartsCountTowardsMax": 0,
        "replicatedJobsStatus": [],
    }
    status = JobSetStatus.model_validate(
        {"restarts": 2, "terminalState": "Failed", "replicatedJobsStatus": [rj_status("a")]}
    )
    document = rules.status_document(status)
    assert document["restarts"] == 2 and document["terminalState"] == "Failed"
    assert document["replicatedJobsStatus"][0]["name"] == "a"


# ---------------------------------------------------------------------------------- tracker


def snapshots(*statuses: dict[str, Any]) -> list[JobSet]:
    return [make_jobset(status=s) for s in statuses]


RUNNING = {"replicatedJobsStatus": [rj_status("workers", active=2)]}
RUNNING_READY = {"replicatedJobsStatus": [rj_status("workers", active=2, ready=2)]}
RESTARTING = {
    "restarts": 1,
    "conditions": [
        condition("RestartingJobSet", "True", "DefaultFailurePolicy", f"x {FIRST_FAILED}")
    ],
}
DONE = {
    "restarts": 1,
    "conditions": [
        condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully")
    ],
    "terminalState": "Completed",
}


def _observed(js: JobSet) -> Observation:
    return Observation(("ns", js.name), jobset=js.to_dict(), synced=True)


def test_the_judge_reports_changes_once_and_ends_on_terminal() -> None:
    judge = Judge(Handle("js", "ns", "u-1", "controller"))
    steps = [
        judge.step(_observed(js))
        for js in snapshots(RUNNING, RUNNING, RUNNING_READY, RESTARTING, DONE)
    ]
    kinds = [s.progress.kind if s.progress else None for s in steps]
    assert kinds == ["status", None, "status", "restarting", "status"]
    assert [s.verdict.kind if s.verdict else None for s in steps] == [None] * 4 + ["completed"]


def test_the_judge_returns_on_restart_beyond_the_baseline() -> None:
    judge = Judge(Handle("js", "ns", "u-1", "controller"), WaitRules(on_restart="return"))
    assert judge.step(_observed(make_jobset(status=RUNNING))).verdict is None
    assert judge.baseline_restarts == 0
    step = judge.step(_observed(make_jobset(status=RESTARTING)))
    assert step.verdict is not None and step.verdict.kind == "restarting"


def test_the_judges_baseline_is_the_first_snapshot() -> None:
    # Reattached during restart 1: only a further restart ends the wait.
    judge = Judge(Handle("js", "ns", "u-1", "controller"), WaitRules(on_restart="return"))
    assert judge.step(_observed(make_jobset(status=RESTARTING))).verdict is None
    step = judge.step(_observed(make_jobset(status=dict(RESTARTING, restarts=2))))
    assert step.verdict is not None and step.verdict.kind == "restarting"


def test_a_terminal_status_wins_over_a_restart() -> None:
    judge = Judge(Handle("js", "ns", "u-1", "controller"), WaitRules(on_restart="return"))
    judge.step(_observed(make_jobset(status=RUNNING)))
    step = judge.step(_observed(make_jobset(status=DONE)))
    assert step.verdict is not None and step.verdict.kind == "completed"


@pytest.mark.parametrize("witnessed", [True, False], ids=["witnessed", "never-seen"])
def test_a_restart_names_how_its_job_failed_once_witnessed(witnessed: bool) -> None:
    # The native backend restarts on the observation it drove and deletes the failed Job:
    # the observation judged next may hold neither the Job nor the Job controller's Event.
    judge = Judge(Handle("js", "ns", "u-1", "controller"), WaitRules(on_restart="return"))
    judge.step(_observed(make_jobset(status=RUNNING)))
    failed_job = {
        "metadata": {"name": "js-workers-1"},
        "status": {"conditions": [condition("Failed", "True", "BackoffLimitExceeded", "boom")]},
    }
    driven = Observation(
        ("ns", "js"), jobset=make_jobset(status=RUNNING).to_dict(), jobs=(failed_job,), synced=True
    )
    if witnessed:
        judge.witness(driven)
    step = judge.step(_observed(make_jobset(status=RESTARTING)))
    assert step.verdict is not None and step.verdict.kind == "restarting"
    said = "job js-workers-1 failed: BackoffLimitExceeded: boom"
    assert (said in step.verdict.message) is witnessed, step.verdict.message


# ---------------------------------------------------------------------------------- pods


@pytest.mark.parametrize(
    ("coordinator", "asked", "target"),
    [
        pytest.param(None, None, podread.PodRef("driver"), id="first-rjob"),
        pytest.param(
            {"replicatedJob": "workers", "jobIndex": 1, "podIndex": 0},
            None,
            podread.PodRef("workers", 1, 0),
            id="coordinator",
        ),
        pytest.param(
            {"replicatedJob": "workers"},
            ("driver", 0, 0),
            podread.PodRef("driver"),
            id="asked-wins",
        ),
    ],
)
def test_log_pod_target(
    coordinator: dict[str, Any] | None, asked: tuple[str, int, int] | None, target: podread.PodRef
) -> None:
    js = make_jobset(coordinator=coordinator)
    kwargs = {}
    if asked:
        kwargs = {"replicated_job": asked[0], "job_index": asked[1], "pod_index": asked[2]}
    assert podread.log_pod_target(js, **kwargs) == target  # type: ignore[arg-type]


def test_log_pod_target_without_a_jobset_needs_a_replicated_job() -> None:
    assert podread.log_pod_target(None) is None
    assert podread.log_pod_target(None, replicated_job="w", pod_index=2) == podread.PodRef(
        "w", 0, 2
    )


PODS = [
    pod("js-driver-0-0-aaaaa", "driver", 0, 0),
    pod("js-workers-0-0-bbbbb", "workers", 0, 0),
    pod("js-workers-0-1-ccccc", "workers", 0, 1),
    pod("js-workers-1-0-ddddd", "workers", 1, 0),
    # A retried pod of workers-1 index 1, and the pod of restart attempt 1.
    pod("js-workers-1-1-eeeee", "workers", 1, 1, created="2024-01-01T00:00:00Z"),
    pod("js-workers-1-1-fffff", "workers", 1, 1, created="2024-01-01T00:00:09Z"),
    pod("js-workers-1-1-ggggg", "workers", 1, 1, attempt=1, created="2024-01-01T00:00:05Z"),
]


@pytest.mark.parametrize(
    ("target", "name"),
    [
        pytest.param(podread.PodRef("driver"), "js-driver-0-0-aaaaa", id="driver"),
        pytest.param(podread.PodRef("workers", 0, 1), "js-workers-0-1-ccccc", id="by-index"),
        pytest.param(podread.PodRef("workers", 1, 1), "js-workers-1-1-ggggg", id="latest-attempt"),
        pytest.param(podread.PodRef("workers", 1, 0), "js-workers-1-0-ddddd", id="job-1"),
        pytest.param(podread.PodRef("workers", 2, 0), None, id="no-such-job"),
        pytest.param(podread.PodRef("workers", 0, 5), None, id="no-such-pod"),
        pytest.param(podread.PodRef("other"), None, id="no-such-rjob"),
    ],
)
def test_choose_log_pod(target: podread.PodRef, name: str | None) -> None:
    chosen = podread.choose_log_pod(PODS, target)
    assert (chosen["metadata"]["name"] if chosen else None) == name


def test_choose_log_pod_non_indexed_counts_pods_by_name() -> None:
    pods = [pod("j-0-b", "w", 0, None), pod("j-0-a", "w", 0, None)]
    assert podread.choose_log_pod(pods, podread.PodRef("w", 0, 1))["metadata"]["name"] == "j-0-b"  # type: ignore[index]
    assert podread.choose_log_pod(pods, podread.PodRef("w", 0, 2)) is None


@pytest.mark.parametrize(
    ("terminated", "result"),
    [
        pytest.param(
            {"main": {"exitCode": 0, "message": '{"loss": 0.1}'}}, {"loss": 0.1}, id="json"
        ),
        pytest.param({"main": {"exitCode": 0, "message": "done"}}, "done", id="text"),
        pytest.param({"main": {"exitCode": 0}}, None, id="no-message"),
        pytest.param({}, None, id="still-running"),
        pytest.param(
            {"side": {"exitCode": 0, "message": "side"}, "main": {"exitCode": 0, "message": "7"}},
            7,
            id="first-container-in-spec-order",
        ),
        pytest.param({"side": {"exitCode": 0, "message": "s"}}, "s", id="only-side-has-one"),
    ],
)
def test_termination_result(terminated: dict[str, dict[str, Any]], result: Any) -> None:
    p = pod("p", "w", 0, 0, terminated=terminated, containers=("main", "side"))
    assert podread.termination_result(p) == result


def test_termination_result_without_pod() -> None:
    assert podread.termination_result(None) is None


def test_failed_pods_and_container() -> None:
    pods = [
        pod("b", "w", 0, phase="Failed"),
        pod("c", "w", 0, phase="Succeeded", terminated={"main": {"exitCode": 0}}),
        pod("a", "w", 0, phase="Running", terminated={"main": {"exitCode": 3}}),
        pod("d", "w", 0),
    ]
    assert [p["metadata"]["name"] for p in podread.failed_pods(pods)] == ["a", "b"]
    assert podread.pod_container(pods[0]) == "main"
    assert podread.pod_container({"spec": {}}) is None


def test_leftovers_count_only_the_runs_objects() -> None:
    js = make_jobset()
    mine = {"metadata": {"name": "j", "labels": {"jobset.sigs.k8s.io/jobset-uid": "u-1"}}}
    owned = {"metadata": {"name": "s", "ownerReferences": [{"uid": "u-1"}]}}
    other = {"metadata": {"name": "x", "labels": {"jobset.sigs.k8s.io/jobset-uid": "u-2"}}}
    found = ident.leftovers(
        "u-1", jobsets=[js], jobs=[mine, other], pods=[mine], services=[owned, other]
    )
    assert found == ["jobset/js", "job/j", "pod/j", "service/s"]
    assert ident.leftovers("u-9", jobsets=[js], jobs=[mine], services=[owned]) == []


# ---------------------------------------------------------------------------------- events


@pytest.mark.parametrize(
    ("event", "raised"),
    [
        pytest.param(
            {"type": "Warning", "reason": "JobCreationFailed", "message": "Job.batch is invalid"},
            True,
            id="job-creation",
        ),
        pytest.param(
            {"type": "Warning", "reason": "HeadlessServiceCreationFailed", "message": "forbidden"},
            True,
            id="service-creation",
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": 'jobs.batch "a" already exists',
            },
            False,
            id="already-exists-is-a-cache-race",
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": 'jobs.batch "a" already exists\nJob.batch "b" is invalid',
            },
            True,
            id="mixed-errors",
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": 'job "js-rest-0" creation failed with error: Post "https://127.0.0.1:'
                '44789/apis/batch/v1/namespaces/ns/jobs": dial tcp 127.0.0.1:44789: connect: '
                "connection refused",
            },
            False,
            id="api-server-restarting",  # seen in the soak: the controller creates it later
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": "the server is currently unable to handle the request (post jobs.batch)",
            },
            False,
            id="api-server-starting",
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": 'jobs.batch "a" is forbidden: exceeded quota: q, requested: cpu=2',
            },
            True,
            id="quota-is-not-transient",
        ),
        pytest.param(
            {
                "type": "Warning",
                "reason": "JobCreationFailed",
                "message": 'context deadline exceeded\nJob.batch "b" is invalid: spec',
            },
            True,
            id="transient-and-refused",
        ),
        pytest.param(
            {"type": "Warning", "reason": "RestartJobSetFailurePolicyAction", "message": "x"},
            False,
            id="restart-event",
        ),
        pytest.param(
            {"type": "Normal", "reason": "JobCreationFailed", "message": "x"}, False, id="normal"
        ),
    ],
)
def test_creation_failure(event: dict[str, Any], raised: bool) -> None:
    found = rules.creation_failure(event)
    assert found == ((event["reason"], event["message"]) if raised else None)


@pytest.mark.parametrize("module", [ident, podread, rules], ids=lambda m: m.__name__)
def test_all_is_sorted_and_exact(module: Any) -> None:
    # isort-style, as ruff's RUF022 keeps it: constants, then classes, then functions.
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert module.__all__ == sorted(module.__all__, key=kind)
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and getattr(v, "__module__", module.__name__) == module.__name__
        and (callable(v) or n.isupper())
        and not isinstance(v, (types.ModuleType, bool))
    }
    assert set(module.__all__) == defined


# ---------------------------------------------------------------------------------- judge
# The one judge every waiter shares (jobset_core.lifecycle), fed observations of a run.

HANDLE = Handle("js", "ns", "u-1", "controller")


def seen(jobset: JobSet | None, *events: dict[str, Any], synced: bool = True) -> Observation:
    return Observation(
        ("ns", "js"),
        jobset=jobset.to_dict() if jobset is not None else None,
        events=tuple(events),
        synced=synced,
    )


def test_judge_reports_progress_and_keeps_waiting() -> None:
    judge = Judge(HANDLE)
    step = judge.step(seen(make_jobset(status=RUNNING)))
    assert step.progress is not None and step.progress.phase is Phase.RUNNING
    assert step.verdict is None
    assert judge.step(seen(make_jobset(status=RUNNING))).progress is None  # no change, no line


def test_judge_ends_on_terminal() -> None:
    step = Judge(HANDLE).step(seen(make_jobset(status=DONE)))
    assert step.verdict is not None and step.verdict.kind == "completed"
    assert step.verdict.outcome is not None and step.verdict.outcome.phase is Phase.COMPLETED
    assert step.verdict.message == "JobSet ns/js completed (AllJobsCompleted)"


def test_judge_gone_only_once_the_run_was_listed() -> None:
    assert Judge(HANDLE).step(seen(None, synced=False)).verdict is None  # not seen yet
    verdict = Judge(HANDLE).step(seen(None)).verdict
    assert verdict is not None and (verdict.kind, verdict.reason) == ("gone", "Deleted")
    assert "was deleted before it finished" in verdict.message


@pytest.mark.parametrize(
    ("status", "kind", "reason"),
    [(DONE, "completed", "AllJobsCompleted"), (RUNNING, "gone", "Deleted")],
    ids=["finished-then-deleted", "deleted-while-running"],
)
def test_judge_a_jobset_being_deleted_by_whether_it_finished_first(
    status: dict[str, Any], kind: str, reason: str
) -> None:
    """A JobSet deleted after it finished (``ttlSecondsAfterFinished``: the wait may first see
    it already being deleted) ended as its status says; one deleted while running is gone."""
    deleted = make_jobset(status=status).to_dict()
    deleted["metadata"]["deletionTimestamp"] = "2024-01-01T00:10:00Z"
    observation = Observation(("ns", "js"), jobset=deleted, synced=True)
    verdict = Judge(HANDLE).step(observation).verdict
    assert verdict is not None and (verdict.kind, verdict.reason) == (kind, reason)


def test_judge_a_namesake_is_not_ours() -> None:
    verdict = Judge(Handle("js", "ns", "u-2", "controller")).step(seen(make_jobset())).verdict
    assert verdict is not None and (verdict.kind, verdict.reason) == ("gone", "Replaced")


def test_judge_restart_names_the_failed_job() -> None:
    judge = Judge(HANDLE, WaitRules(on_restart="return"))
    judge.step(seen(make_jobset(status=RUNNING)))
    verdict = judge.step(seen(make_jobset(status=RESTARTING))).verdict
    assert verdict is not None and verdict.kind == "restarting"
    assert verdict.outcome is not None and verdict.outcome.restarts == 1
    assert verdict.outcome.failed_job == "js-workers-1"
    assert "is restarting (restart 1) (failed child Job: js-workers-1)" in verdict.message


def test_judge_restart_reads_the_job_failure_from_its_event_when_no_view_had_it() -> None:
    event = {
        "type": "Warning", "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
        "involvedObject": {"kind": "Job", "name": "js-workers-1", "uid": "j-1"},
    }  # fmt: skip
    judge = Judge(HANDLE, WaitRules(on_restart="return"))
    judge.step(seen(make_jobset(status=RUNNING)))
    verdict = judge.step(seen(make_jobset(status=RESTARTING), event)).verdict
    assert verdict is not None and verdict.outcome is not None
    assert "job js-workers-1 failed: BackoffLimitExceeded: Job has reached" in (
        verdict.outcome.message
    )


@pytest.mark.parametrize("job_still_seen", [True, False], ids=["job-seen", "job-already-gone"])
def test_judge_restart_says_how_the_failed_job_failed(job_still_seen: bool) -> None:
    failed_job = {
        "metadata": {"name": "js-workers-1"},
        "status": {
            "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}
            ]
        },
    }  # fmt: skip
    judge = Judge(HANDLE, WaitRules(on_restart="return"))
    running = seen(make_jobset(status=RUNNING))
    judge.step(Observation(running.key, jobset=running.jobset, jobs=(failed_job,), synced=True))
    restarting = seen(make_jobset(status=RESTARTING))
    jobs = (failed_job,) if job_still_seen else ()  # its deletion may come first
    verdict = judge.step(
        Observation(restarting.key, jobset=restarting.jobset, jobs=jobs, synced=True)
    ).verdict
    assert verdict is not None and verdict.kind == "restarting"
    assert verdict.outcome is not None
    assert "job js-workers-1 failed: BackoffLimitExceeded" in verdict.outcome.message


def test_judge_restart_says_how_the_failed_job_failed_when_no_look_saw_it_fail() -> None:
    # The controller's restart comes fast: the Job's failure, its deletion and the JobSet's
    # new attempt can all reach the observer between two looks, and the new attempt's Job of
    # the same name may already be there. The failure is read from the Job as its deletion
    # showed it (the observer's stores keep that), not from a look that never came.
    from jobset_core.observe._store import GONE_JOBS, Stores
    from jobset_core.observe._views import Kind

    def job(version: str, *conditions: dict[str, Any]) -> dict[str, Any]:
        meta = {"name": "js-workers-1", "namespace": "ns", "resourceVersion": version}
        meta |= {"labels": {"jobset.sigs.k8s.io/jobset-name": "js"}}
        return {"metadata": meta, "status": {"conditions": list(conditions)}}

    failed = condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the limit")
    stores = Stores()
    run = stores.track(("ns", "js"), (Kind.JOBSET, Kind.JOB))
    stores.apply(Kind.JOBSET, "ADDED", make_jobset(status=RUNNING).to_dict())
    stores.apply(Kind.JOB, "ADDED", job("10"))
    judge = Judge(HANDLE, WaitRules(on_restart="return"))
    judge.step(run.observation())  # the only look before the restart: the Job runs
    stores.apply(Kind.JOB, "MODIFIED", job("11", failed))
    stores.apply(Kind.JOB, "DELETED", job("12", failed))
    stores.apply(Kind.JOB, "ADDED", job("14"))  # the new attempt's namesake
    stores.apply(Kind.JOBSET, "MODIFIED", make_jobset(status=RESTARTING).to_dict())
    observation = run.observation()
    assert [j["metadata"]["resourceVersion"] for j in observation.jobs] == ["14"]
    verdict = judge.step(observation).verdict
    assert verdict is not None and verdict.kind == "restarting"
    assert verdict.outcome is not None
    said = "job js-workers-1 failed: BackoffLimitExceeded: Job has reached the limit"
    assert said in verdict.outcome.message, verdict.outcome.message
    for i in range(GONE_JOBS + 3):  # kept, but not without bound
        gone = job(str(100 + i))
        gone["metadata"]["name"] = f"js-other-{i}"
        stores.apply(Kind.JOB, "ADDED", gone)
        stores.apply(Kind.JOB, "DELETED", gone)
    assert len(run.observation().gone_jobs) == GONE_JOBS


@pytest.mark.parametrize("job_failure_comes", [True, False], ids=["comes", "never-comes"])
def test_judge_restart_waits_a_moment_for_how_the_failed_job_failed(
    job_failure_comes: bool,
) -> None:
    # The JobSet and its Jobs come on separate watches: the restart may be seen before the
    # failed Job's failure (a loaded run met it). The verdict waits for the why, briefly.
    failed_job = {
        "metadata": {"name": "js-workers-1"},
        "status": {"conditions": [condition("Failed", "True", "BackoffLimitExceeded", "boom")]},
    }
    judge = Judge(HANDLE, WaitRules(on_restart="return"))
    judge.step(seen(make_jobset(status=RUNNING)), now=100.0)
    held = judge.step(seen(make_jobset(status=RESTARTING)), now=100.0)
    assert held.verdict is None and held.recheck_at == 100.0 + RESTART_DETAIL_WAIT
    restarting = seen(make_jobset(status=RESTARTING))
    if job_failure_comes:
        later = Observation(restarting.key, jobset=restarting.jobset, jobs=(failed_job,))
        verdict = judge.step(later, now=100.5).verdict
    else:
        assert judge.step(restarting, now=101.9).verdict is None
        verdict = judge.step(restarting, now=100.0 + RESTART_DETAIL_WAIT).verdict
    assert verdict is not None and verdict.kind == "restarting"
    assert verdict.outcome is not None and verdict.outcome.failed_job == "js-workers-1"
    said = "job js-workers-1 failed: BackoffLimitExceeded: boom"
    assert (said in verdict.message) is job_failure_comes, verdict.message
    # A one-off look (a sensor's poke, ``jobsetctl status``) has no later look to wait for.
    once = Judge(HANDLE, WaitRules(on_restart="return", baseline_restarts=0))
    verdict = once.step(seen(make_jobset(status=RESTARTING)), now=100.0).verdict
    assert verdict is not None and verdict.kind == "restarting"


def test_judge_restart_continues_by_default() -> None:
    judge = Judge(HANDLE)
    judge.step(seen(make_jobset(status=RUNNING)))
    step = judge.step(seen(make_jobset(status=RESTARTING)))
    assert step.verdict is None and step.progress is not None
    assert step.progress.kind == "restarting"


def test_judge_target_phases_are_reached() -> None:
    rules = WaitRules(until=frozenset({Phase.RUNNING}))
    verdict = Judge(HANDLE, rules).step(seen(make_jobset(status=RUNNING))).verdict
    assert verdict is not None and verdict.kind == "reached" and verdict.ok


def test_judge_creation_failure_event() -> None:
    judge = Judge(HANDLE)
    judge.step(seen(make_jobset(status=RUNNING)))
    event = {
        "type": "Warning",
        "reason": "JobCreationFailed",
        "message": "invalid",
        "involvedObject": {"kind": "JobSet", "name": "js", "uid": "u-1"},
    }
    step = judge.step(seen(make_jobset(status=RUNNING), event))
    assert step.verdict is not None and step.verdict.kind == "creation_failed"
    assert step.verdict.reason == "JobCreationFailed"
    assert step.progress is not None and step.progress.kind == "creation-failed"
    assert step.progress.phase is Phase.RUNNING
    older = {**event, "involvedObject": {"kind": "JobSet", "name": "js", "uid": "u-0"}}
    assert Judge(HANDLE).step(seen(make_jobset(status=RUNNING), older)).verdict is None
    normal = {**event, "type": "Normal"}
    assert Judge(HANDLE).step(seen(make_jobset(status=RUNNING), normal)).verdict is None


def test_judge_result_comes_from_the_coordinator_pod() -> None:
    jobset = make_jobset(status=DONE, coordinator={"replicatedJob": "workers", "jobIndex": 1})
    done = {"terminated": {"exitCode": 0, "message": '{"loss": 0.1}'}}
    pods = (
        pod("p0", "workers", 0),
        pod("p1", "workers", 1, terminated={"main": done["terminated"]}),
    )
    observation = Observation(("ns", "js"), jobset=jobset.to_dict(), pods=pods, synced=True)
    verdict = Judge(HANDLE).step(observation).verdict
    assert verdict is not None and verdict.result == {"loss": 0.1}


def test_judge_restart_details_from_the_event_once_the_condition_is_gone() -> None:
    """A waiter that joins after the new attempt is up (a trigger started late) no longer sees
    ``RestartingJobSet=True``; the controller's Warning Event still names the failed Job."""
    judge = Judge(HANDLE, WaitRules(on_restart="return", baseline_restarts=0))
    after = make_jobset(
        status={"restarts": 1, "conditions": [condition("RestartingJobSet", "False", "JobsReady")]}
    )
    event = {
        "type": "Warning",
        "reason": "DefaultFailurePolicy",
        "message": "applying RestartJobSet failure policy action (first failed job: js-w-0)",
        "involvedObject": {"kind": "JobSet", "name": "js", "uid": "u-1"},
    }
    verdict = judge.step(seen(after, event)).verdict
    assert verdict is not None and verdict.kind == "restarting"
    assert verdict.outcome is not None and verdict.outcome.failed_job == "js-w-0"
    assert verdict.reason == "DefaultFailurePolicy"
    assert "(failed child Job: js-w-0)" in verdict.message
