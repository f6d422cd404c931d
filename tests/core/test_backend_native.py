"""The native backend's pure pass planner: :func:`plan_pass` (the core planner applied to an
anchor and the Jobs it owns) through the steps of a run, with Jobs as the API returns them.

Real runs on the devcluster are in ``test_run_native.py``.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.backends._anchor import (
    EVENTS_KEPT,
    EVENTS_KEY,
    STATUS_KEY,
    Anchor,
    anchor_events,
    build_anchor,
    parse_anchor,
    with_patch,
)
from jobset_core.backends._native_exec import (
    child_views,
    foreign_job,
    going,
    plan_pass,
    service_going,
)
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Phase
from jobset_core.policy import conditions as c
from jobset_core.policy import outcome as rules

UID = "anchor-uid-1"
NOW = _dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=_dt.UTC)
LONG_AGO = "2025-01-02T02:00:00Z"


# --------------------------------------------------------------------------- builders


def rjob(name: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"backoffLimit": 0, "template": pod}},
        **extra,
    }


def make_anchor(*rjobs: dict[str, Any], status: JobSetStatus | None = None, **spec: Any) -> Anchor:
    return parse_anchor(anchor_body(*rjobs, status=status, **spec))


def anchor_body(
    *rjobs: dict[str, Any], status: JobSetStatus | None = None, **spec: Any
) -> dict[str, Any]:
    js = JobSet.model_validate(
        {"metadata": {"name": "demo"}, "spec": {"replicatedJobs": list(rjobs), **spec}}
    )
    body = build_anchor(js, "ns")
    if status is not None:
        body["data"][STATUS_KEY] = json.dumps(status.to_dict())
    body["metadata"].update(
        {"uid": UID, "resourceVersion": "7", "creationTimestamp": "2025-01-02T03:00:00Z"}
    )
    return body


def api_job(
    rjob_name: str,
    index: int = 0,
    *,
    attempt: int = 0,
    owner: tuple[str, str, str] = ("v1", "ConfigMap", UID),
    finished: str | None = None,
    reason: str = "BackoffLimitExceeded",
    when: str = "2025-01-02T03:04:00Z",
    suspend: bool = False,
    ready: int = 0,
    active: int = 0,
    deleting: bool = False,
) -> dict[str, Any]:
    name = f"demo-{rjob_name}-{index}"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}-{attempt}",
        "labels": {
            labels.JOBSET_NAME: "demo",
            labels.REPLICATED_JOB_NAME: rjob_name,
            labels.JOB_INDEX: str(index),
            labels.RESTART_ATTEMPT: str(attempt),
        },
        "ownerReferences": [
            {
                "apiVersion": owner[0],
                "kind": owner[1],
                "name": "demo",
                "uid": owner[2],
                "controller": True,
            }
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-01-02T03:04:04Z"
    status: dict[str, Any] = {"ready": ready, "active": active}
    if finished is not None:
        status["conditions"] = [
            {
                "type": finished,
                "status": "True",
                "reason": reason if finished == "Failed" else "",
                "lastTransitionTime": when,
            }
        ]
        status["succeeded" if finished == "Complete" else "failed"] = 1
    return {"metadata": meta, "spec": {"parallelism": 1, "suspend": suspend}, "status": status}


def restarted(restarts: int, towards_max: int | None = None) -> JobSetStatus:
    return JobSetStatus(
        restarts=restarts,
        restarts_count_towards_max=restarts if towards_max is None else towards_max,
    )


def finished_status(kind: str, when: str = LONG_AGO) -> JobSetStatus:
    reason = c.ALL_JOBS_COMPLETED if kind == "Completed" else c.FAILED_JOBS
    return JobSetStatus.model_validate(
        {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": reason.reason,
                    "message": reason.message,
                    "lastTransitionTime": when,
                }
            ],
            "terminalState": kind,
            "restarts": 0,
        }
    )


def names(jobs: Any) -> list[str]:
    return [job["metadata"]["name"] for job in jobs]


def written_status(step: Any) -> dict[str, Any]:
    assert step.status_patch is not None
    assert step.status_patch["metadata"] == {"resourceVersion": "7"}
    data: dict[str, Any] = json.loads(step.status_patch["data"][STATUS_KEY])
    return data


# --------------------------------------------------------------------------- pure passes


def test_first_pass_creates_service_and_every_job_owned_by_the_anchor() -> None:
    anchor = make_anchor(rjob("a", 2), rjob("b"))
    step = plan_pass(anchor, [], NOW)
    assert names(step.create_jobs) == ["demo-a-0", "demo-a-1", "demo-b-0"]
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "demo",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for job in step.create_jobs:
        assert job["metadata"]["ownerReferences"] == [owner]
        assert job["metadata"]["labels"][labels.RESTART_ATTEMPT] == "0"
        assert job["metadata"]["labels"][labels.JOBSET_UID] == UID
        assert job["spec"]["suspend"] is False
    assert step.service is not None
    assert step.service["metadata"]["name"] == "demo"
    assert step.service["metadata"]["ownerReferences"] == [owner]
    assert written_status(step)["restarts"] == 0
    assert step.acted and step.restart is None and not step.delete_anchor


def test_create_false_plans_no_service_and_no_job() -> None:
    step = plan_pass(make_anchor(rjob("a")), [], NOW, create=False)
    assert step.create_jobs == () and step.service is None


def test_jobs_of_other_owners_are_not_the_runs() -> None:
    anchor = make_anchor(rjob("a", 3))
    jobs = [
        api_job("a", 0),
        api_job("a", 1, owner=("v1", "ConfigMap", "older-anchor")),
        api_job("a", 2, owner=("jobset.x-k8s.io/v1alpha2", "JobSet", UID)),
    ]
    assert [view.name for view in child_views(anchor, jobs)] == ["demo-a-0"]
    assert all(view.owner_uid == UID for view in child_views(anchor, jobs))


@pytest.mark.parametrize(
    ("job", "foreign"),
    [
        pytest.param(api_job("a"), False, id="ours"),
        pytest.param(api_job("a", deleting=True), False, id="being-deleted"),
        pytest.param(api_job("a", owner=("v1", "ConfigMap", "older")), False, id="older-anchor"),
        pytest.param(
            api_job("a", owner=("jobset.x-k8s.io/v1alpha2", "JobSet", "js")),
            True,
            id="a-jobsets",
        ),
        pytest.param({"metadata": {"name": "demo-a-0"}}, True, id="unowned"),
    ],
)
def test_foreign_job(job: dict[str, Any], foreign: bool) -> None:
    problem = foreign_job(make_anchor(rjob("a")), job)
    assert (problem is not None) == foreign
    if foreign:
        assert problem == "Job demo-a-0 already exists and is not owned by this run"


@pytest.mark.parametrize(
    ("existing", "is_going"),
    [
        pytest.param(api_job("a"), False, id="ours: adopted"),
        pytest.param(api_job("a", deleting=True), True, id="ours, being deleted"),
        pytest.param(api_job("a", owner=("v1", "ConfigMap", "older")), True, id="older-anchor"),
        pytest.param({"metadata": {"name": "demo"}}, False, id="a user's: used or refused"),
        pytest.param(
            {"metadata": {"name": "demo", "deletionTimestamp": "2026-01-01T00:00:00Z"}},
            True,
            id="a user's, being deleted",
        ),
        pytest.param(
            api_job("a", owner=("jobset.x-k8s.io/v1alpha2", "JobSet", "js")),
            False,
            id="a jobset's: not an anchor's",
        ),
    ],
)
def test_a_namesake_going_is_waited_for(existing: dict[str, Any], is_going: bool) -> None:
    assert going(make_anchor(rjob("a")), existing) is is_going


def service(owner: tuple[str, str, str, str] | None, *, deleting: bool = False) -> dict[str, Any]:
    """A Service named ``demo`` controlled by ``(apiVersion, kind, name, uid)``, if any."""
    meta: dict[str, Any] = {"name": "demo", "namespace": "ns"}
    if owner is not None:
        version, kind, name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": version, "kind": kind, "name": name, "uid": uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2025-01-02T03:04:04Z"
    return {"metadata": meta, "spec": {"clusterIP": "None"}}


@pytest.mark.parametrize(
    ("existing", "is_going"),
    [
        pytest.param(service(("v1", "ConfigMap", "demo", UID)), False, id="ours: used"),
        pytest.param(
            service(("v1", "ConfigMap", "demo", UID), deleting=True), True, id="ours, deleting"
        ),
        pytest.param(service(("v1", "ConfigMap", "demo", "older")), True, id="an older namesake's"),
        pytest.param(
            service(("v1", "ConfigMap", "other", "other-uid")),
            False,
            id="another run's sharing the subdomain: used, as upstream",
        ),
        pytest.param(
            service(("jobset.x-k8s.io/v1alpha2", "JobSet", "demo", "js-uid")),
            False,
            id="a JobSet's of that name: used, as upstream",
        ),
        pytest.param(service(None), False, id="a user's: used, as upstream"),
        pytest.param(service(None, deleting=True), True, id="a user's, being deleted"),
    ],
)
def test_an_older_namesakes_service_is_waited_for_and_any_other_used(
    existing: dict[str, Any], is_going: bool
) -> None:
    anchor = make_anchor(rjob("a"))
    assert anchor.uid == UID
    assert service_going(anchor, existing) is is_going


def test_nothing_to_do_writes_nothing() -> None:
    jobs = [api_job("a", active=1)]
    first = plan_pass(make_anchor(rjob("a")), jobs, NOW)
    settled = make_anchor(rjob("a"), status=JobSetStatus.model_validate(written_status(first)))
    step = plan_pass(settled, jobs, NOW)
    assert step.create_jobs == () and step.status_patch is None and not step.acted


@pytest.mark.parametrize(
    ("spec", "status", "counters", "outcome", "reason"),
    [
        pytest.param({}, None, (0, 0), "Fail", c.FAILED_JOBS.reason, id="no-policy-fails"),
        pytest.param(
            {"failurePolicy": {"maxRestarts": 2}}, None, (1, 1), "Restart", None, id="restart-1"
        ),
        pytest.param(
            {"failurePolicy": {"maxRestarts": 2}},
            restarted(2),
            (2, 2),
            "Fail",
            c.REACHED_MAX_RESTARTS.reason,
            id="max-reached",
        ),
        pytest.param(
            {
                "failurePolicy": {
                    "maxRestarts": 0,
                    "rules": [{"name": "r", "action": "RestartJobSetAndIgnoreMaxRestarts"}],
                }
            },
            restarted(3, 0),
            (4, 0),
            "Restart",
            None,
            id="ignore-max",
        ),
        pytest.param(
            {
                "failurePolicy": {
                    "maxRestarts": 5,
                    "rules": [
                        {
                            "name": "r",
                            "action": "FailJobSet",
                            "onJobFailureReasons": ["BackoffLimitExceeded"],
                        }
                    ],
                }
            },
            None,
            (0, 0),
            "Fail",
            c.FAIL_JOBSET_ACTION.reason,
            id="fail-jobset-rule",
        ),
    ],
)
def test_failed_job_applies_the_failure_policy(
    spec: dict[str, Any],
    status: JobSetStatus | None,
    counters: tuple[int, int],
    outcome: str,
    reason: str | None,
) -> None:
    attempt = status.restarts or 0 if status else 0
    anchor = make_anchor(rjob("a", 2), status=status, **spec)
    jobs = [api_job("a", 0, attempt=attempt, finished="Failed"), api_job("a", 1, attempt=attempt)]
    step = plan_pass(anchor, jobs, NOW)
    assert step.plan.failure is not None and step.plan.failure.outcome == outcome
    assert step.create_jobs == () and step.delete_jobs == ()
    written = written_status(step)
    assert (written["restarts"], written.get("restartsCountTowardsMax", 0)) == counters
    assert (step.restart is not None) == (outcome == "Restart")
    if reason is not None:
        assert written["terminalState"] == "Failed"
        failed = next(x for x in written["conditions"] if x["type"] == "Failed")
        assert failed["reason"] == reason
        assert failed["message"].endswith("(first failed job: demo-a-0)")


def test_after_a_restart_the_previous_attempt_is_deleted_then_recreated() -> None:
    anchor = make_anchor(rjob("a", 2), status=restarted(1), failurePolicy={"maxRestarts": 2})
    previous = [api_job("a", 0, finished="Failed"), api_job("a", 1, active=1)]
    step = plan_pass(anchor, previous, NOW)
    assert [(d.name, d.uid, d.reason) for d in step.delete_jobs] == [
        ("demo-a-0", "uid-demo-a-0-0", "PreviousAttempt"),
        ("demo-a-1", "uid-demo-a-1-0", "PreviousAttempt"),
    ]
    assert step.create_jobs == ()  # Recreate: the old names still exist

    half_gone = [api_job("a", 1, active=1, deleting=True)]
    step = plan_pass(anchor, half_gone, NOW)
    assert step.delete_jobs == ()  # already being deleted
    assert names(step.create_jobs) == ["demo-a-0"]
    assert step.create_jobs[0]["metadata"]["labels"][labels.RESTART_ATTEMPT] == "1"

    step = plan_pass(anchor, [], NOW)
    assert names(step.create_jobs) == ["demo-a-0", "demo-a-1"]


def test_blocking_recreate_waits_for_every_previous_job() -> None:
    anchor = make_anchor(
        rjob("a", 2),
        status=restarted(1),
        failurePolicy={"maxRestarts": 2, "restartStrategy": "BlockingRecreate"},
    )
    step = plan_pass(anchor, [api_job("a", 1, active=1, deleting=True)], NOW)
    assert step.create_jobs == ()
    gates = step.plan.creation.gates if step.plan.creation else ()
    assert [g.reason for g in gates] == ["BlockingRecreate"]
    assert names(plan_pass(anchor, [], NOW).create_jobs) == ["demo-a-0", "demo-a-1"]


def test_return_mode_pass_deletes_but_does_not_recreate() -> None:
    anchor = make_anchor(rjob("a"), status=restarted(1), failurePolicy={"maxRestarts": 2})
    step = plan_pass(anchor, [api_job("a", finished="Failed")], NOW, create=False)
    assert [d.name for d in step.delete_jobs] == ["demo-a-0"]
    assert step.create_jobs == ()


def test_success_policy_any_with_targets() -> None:
    anchor = make_anchor(
        rjob("driver"),
        rjob("workers", 2),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]},
    )
    jobs = [api_job("driver", finished="Complete"), api_job("workers", 0, active=1)]
    step = plan_pass(anchor, jobs, NOW)
    assert written_status(step)["terminalState"] == "Completed"
    assert step.plan.stage == "Completed"
    finished = make_anchor(
        rjob("driver"),
        rjob("workers", 2),
        status=JobSetStatus.model_validate(written_status(step)),
    )
    step = plan_pass(finished, jobs, NOW)
    assert step.plan.stage == "Finished"
    assert [(d.name, d.reason) for d in step.delete_jobs] == [("demo-workers-0", "JobSetFinished")]


def test_in_order_startup_creates_one_replicated_job_at_a_time() -> None:
    anchor = make_anchor(
        rjob("first", 2), rjob("second"), startupPolicy={"startupPolicyOrder": "InOrder"}
    )
    assert names(plan_pass(anchor, [], NOW).create_jobs) == ["demo-first-0", "demo-first-1"]
    starting = [api_job("first", 0, ready=1, active=1), api_job("first", 1, active=1)]
    status = JobSetStatus.model_validate(written_status(plan_pass(anchor, starting, NOW)))
    anchor = make_anchor(
        rjob("first", 2),
        rjob("second"),
        status=status,
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    assert plan_pass(anchor, starting, NOW).create_jobs == ()
    ready = [api_job("first", i, ready=1, active=1) for i in range(2)]
    assert names(plan_pass(anchor, ready, NOW).create_jobs) == ["demo-second-0"]


def test_depends_on_complete_waits_for_success() -> None:
    spec = [rjob("init"), rjob("main", dependsOn=[{"name": "init", "status": "Complete"}])]
    anchor = make_anchor(*spec)
    assert names(plan_pass(anchor, [], NOW).create_jobs) == ["demo-init-0"]
    running = [api_job("init", ready=1, active=1)]
    anchor = make_anchor(
        *spec, status=JobSetStatus.model_validate(written_status(plan_pass(anchor, running, NOW)))
    )
    assert plan_pass(anchor, running, NOW).create_jobs == ()
    done = [api_job("init", finished="Complete")]
    assert names(plan_pass(anchor, done, NOW).create_jobs) == ["demo-main-0"]


def test_suspended_run_creates_suspended_jobs_and_suspends_running_ones() -> None:
    anchor = make_anchor(rjob("a", 2), suspend=True)
    step = plan_pass(anchor, [], NOW)
    assert [job["spec"]["suspend"] for job in step.create_jobs] == [True, True]
    assert any(x["type"] == "Suspended" for x in written_status(step)["conditions"])
    step = plan_pass(anchor, [api_job("a", 0, active=1), api_job("a", 1, suspend=True)], NOW)
    assert step.suspend_jobs == ("demo-a-0",)


def test_resumed_run_resumes_suspended_jobs() -> None:
    anchor = make_anchor(rjob("a", 2), suspend=False)
    step = plan_pass(anchor, [api_job("a", 0, suspend=True), api_job("a", 1, suspend=True)], NOW)
    assert step.resume_jobs == ("demo-a-0", "demo-a-1")
    assert plan_pass(anchor, [], NOW, create=False).resume_jobs == ()


@pytest.mark.parametrize(
    ("ttl", "when", "delete", "remaining"),
    [
        pytest.param(None, LONG_AGO, False, None, id="no-ttl"),
        pytest.param(0, LONG_AGO, True, None, id="expired"),
        pytest.param(60, "2025-01-02T03:04:00Z", False, 55.0, id="not-yet"),
    ],
)
def test_ttl_after_finished(
    ttl: int | None, when: str, delete: bool, remaining: float | None
) -> None:
    spec = {} if ttl is None else {"ttlSecondsAfterFinished": ttl}
    anchor = make_anchor(rjob("a"), status=finished_status("Completed", when), **spec)
    step = plan_pass(anchor, [api_job("a", finished="Complete")], NOW)
    assert step.plan.stage == "Finished"
    assert step.delete_anchor is delete
    assert step.ttl_remaining == remaining
    assert step.create_jobs == ()


# --------------------------------------------------------------------------- outcome and pods


@pytest.mark.parametrize(
    ("status", "jobs_counts", "phase"),
    [
        pytest.param(JobSetStatus(), {}, Phase.PENDING, id="pending"),
        pytest.param(
            JobSetStatus.model_validate(
                {"replicatedJobsStatus": [{"name": "a", "active": 1}], "restarts": 0}
            ),
            {"active": 1},
            Phase.RUNNING,
            id="running",
        ),
        pytest.param(finished_status("Completed"), {}, Phase.COMPLETED, id="completed"),
        pytest.param(finished_status("Failed"), {}, Phase.FAILED, id="failed"),
        pytest.param(
            JobSetStatus.model_validate(
                {
                    "conditions": [
                        {
                            "type": "Suspended",
                            "status": "True",
                            "reason": "SuspendedJobs",
                            "message": "jobset is suspended",
                            "lastTransitionTime": LONG_AGO,
                        }
                    ]
                }
            ),
            {},
            Phase.SUSPENDED,
            id="suspended",
        ),
        pytest.param(
            JobSetStatus.model_validate(
                {
                    "restarts": 1,
                    "conditions": [
                        {
                            "type": "RestartingJobSet",
                            "status": "True",
                            "reason": "DefaultFailurePolicy",
                            "message": "x (first failed job: demo-a-0)",
                            "lastTransitionTime": LONG_AGO,
                        }
                    ],
                }
            ),
            {},
            Phase.RESTARTING,
            id="restarting",
        ),
    ],
)
def test_outcome_phase(status: JobSetStatus, jobs_counts: dict[str, int], phase: Phase) -> None:
    outcome = rules.build_outcome(make_anchor(rjob("a", 2), status=status).jobset, "native")
    assert outcome.phase is phase
    assert outcome.backend == "native" and outcome.uid == UID
    assert outcome.replicated_jobs[0].replicas == 2
    assert outcome.replicated_jobs[0].active == jobs_counts.get("active", 0)
    assert (outcome.terminal_state is not None) == phase.terminal
    if phase is Phase.RESTARTING:
        assert outcome.failed_job == "demo-a-0"
        assert outcome.reason == "DefaultFailurePolicy"


def test_terminal_outcome_has_timings() -> None:
    status = finished_status("Completed", "2025-01-02T03:00:42Z")
    outcome = rules.build_outcome(make_anchor(rjob("a"), status=status).jobset, "native")
    assert outcome.created_at == "2025-01-02T03:00:00Z"
    assert outcome.finished_at == "2025-01-02T03:00:42Z"
    assert outcome.duration_seconds == 42.0
    assert outcome.reason == c.ALL_JOBS_COMPLETED.reason


def test_restarting_outcome_names_the_failed_job() -> None:
    anchor = make_anchor(rjob("a"), failurePolicy={"maxRestarts": 1})
    step = plan_pass(anchor, [api_job("a", finished="Failed")], NOW)
    assert step.restart is not None
    after = make_anchor(rjob("a"), status=step.plan.status, failurePolicy={"maxRestarts": 1})
    outcome = rules.restart_details(rules.build_outcome(after.jobset, "native"), after.jobset)
    assert outcome.phase is Phase.RESTARTING and outcome.terminal_state is None
    assert outcome.failed_job == "demo-a-0"
    assert outcome.reason == c.RESTARTING_DEFAULT_FAILURE_POLICY
    assert outcome.message.endswith("(first failed job: demo-a-0)")


def test_a_native_run_keeps_the_events_upstream_would_emit_on_its_anchor() -> None:
    """The restart's Warning Event names the Job that failed: a native run (which emits no
    Event) keeps it on its anchor, with the ones before it, the newest EVENTS_KEPT."""
    body = anchor_body(rjob("a", 2), failurePolicy={"maxRestarts": 2})
    jobs = [api_job("a", 0, finished="Failed"), api_job("a", 1)]
    step = plan_pass(parse_anchor(body), jobs, NOW)
    assert step.status_patch is not None
    (kept,) = json.loads(step.status_patch["data"][EVENTS_KEY])
    assert kept["type"] == "Warning" and kept["reason"] == c.RESTART_JOBSET_ACTION.reason
    assert kept["message"].endswith("(first failed job: demo-a-0)")
    assert kept["time"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    stored = {**body, "data": {**body["data"]}}
    stored["data"][EVENTS_KEY] = json.dumps([{"reason": f"r{i}"} for i in range(EVENTS_KEPT)])
    again = plan_pass(parse_anchor(stored), jobs, NOW)
    assert again.status_patch is not None
    reasons = [e["reason"] for e in json.loads(again.status_patch["data"][EVENTS_KEY])]
    assert reasons == [*(f"r{i}" for i in range(1, EVENTS_KEPT)), kept["reason"]]
    shown = anchor_events({**stored, "metadata": {"name": "demo", "namespace": "ns"}})
    assert shown[0] == {
        "type": "",
        "reason": "r0",
        "message": "",
        "lastTimestamp": "",
        "involvedObject": {"kind": "JobSet", "name": "demo", "namespace": "ns"},
    }


@pytest.mark.parametrize("damaged", ["not json", '{"a": 1}', "[1, 2]"])
def test_damaged_kept_events_are_none_and_the_run_goes_on(damaged: str) -> None:
    stored = anchor_body(rjob("a", 2), failurePolicy={"maxRestarts": 2})
    stored["data"][EVENTS_KEY] = damaged
    assert parse_anchor(stored).events == () and anchor_events(stored) == []


# --------------------------------------------------------------------------- settled ends


ALL_OF_B = {"successPolicy": {"operator": "All", "targetReplicatedJobs": ["b"]}}


@pytest.mark.parametrize(
    ("rjobs", "spec", "status", "jobs", "is_settled"),
    [
        pytest.param(
            [rjob("a", 2), rjob("b")],
            {},
            None,
            [
                api_job("a", 0, finished="Complete"),
                api_job("a", 1, finished="Complete"),
                api_job("b", 0, finished="Complete"),
            ],
            True,
            id="every-job-complete",
        ),
        pytest.param(
            [rjob("a", 2)],
            {"failurePolicy": {"maxRestarts": 2}},
            restarted(1),
            [
                api_job("a", 0, attempt=1, finished="Complete"),
                api_job("a", 1, attempt=1, finished="Complete"),
            ],
            True,
            id="every-job-of-the-attempt-complete",
        ),
        pytest.param(
            [rjob("a"), rjob("b")],
            ALL_OF_B,
            None,
            [api_job("a", 0, active=1), api_job("b", 0, finished="Complete")],
            False,
            id="completes-with-a-job-running",
        ),
        pytest.param(
            [rjob("a"), rjob("b")],
            ALL_OF_B,
            None,
            [api_job("a", 0, finished="Failed"), api_job("b", 0, finished="Complete")],
            False,
            id="a-failure-decides-first",
        ),
        pytest.param(
            [rjob("a", 2)],
            {},
            None,
            [api_job("a", 0, finished="Complete"), api_job("a", 1, active=1)],
            False,
            id="not-complete-yet",
        ),
        pytest.param(
            [rjob("a", 2)],
            {"failurePolicy": {"maxRestarts": 2}},
            None,
            [
                api_job("a", 0, attempt=1, finished="Complete"),
                api_job("a", 1, attempt=1, finished="Complete"),
            ],
            False,
            id="a-later-attempt-than-the-anchor-knows",
        ),
        pytest.param(
            [rjob("a", 2)],
            {},
            None,
            [
                api_job("a", 0, finished="Complete"),
                api_job("a", 1, finished="Complete", deleting=True),
            ],
            False,
            id="a-complete-job-going",
        ),
        pytest.param(
            [rjob("a", 2)],
            {},
            finished_status("Completed"),
            [api_job("a", 0, finished="Complete"), api_job("a", 1, finished="Complete")],
            False,
            id="recorded-already",
        ),
    ],
)
def test_an_end_is_settled_only_when_every_waiter_reaches_it(
    rjobs: list[dict[str, Any]],
    spec: dict[str, Any],
    status: JobSetStatus | None,
    jobs: list[dict[str, Any]],
    is_settled: bool,
) -> None:
    """A completion every waiter's pass writes in whatever order it saw the Jobs: the
    verdict need not wait for the write. Any other end is judged by the anchor's write."""
    step = plan_pass(make_anchor(*rjobs, status=status, **spec), jobs, NOW)
    assert step.settled is is_settled
    if is_settled:
        assert written_status(step)["terminalState"] == "Completed"


def test_the_anchor_as_a_settled_write_makes_it() -> None:
    jobs = [api_job("a", 0, finished="Complete")]
    body = anchor_body(rjob("a"))
    step = plan_pass(parse_anchor(body), jobs, NOW)
    assert step.settled and step.status_patch is not None
    after = parse_anchor(with_patch(body, step.status_patch))
    assert after.status.terminal_state == "Completed"
    # one above the read: the write lands later, a late event of the read no longer wins
    assert after.resource_version == "8"
    assert json.loads(body["data"][STATUS_KEY]) == {}  # the object read is left as it was
