"""The reconcile planner end to end: the upstream reconcile order over multi-pass scenarios
(cf. upstream ``jobset_controller_test.go`` integration steps), fed with API-shaped Jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from jobset_core.models import JobSet, VolumeClaimPolicy
from jobset_core.policy import (
    JobCreation,
    JobDeletion,
    JobResume,
    PlannedEvent,
    ReconcilePlan,
    next_step,
)
from tests.core.test_policy_builders import (
    T0,
    JobWrapper,
    cond,
    make_job,
    make_jobset,
    make_replicated_job,
)

NOW = dt.datetime(2024, 1, 1, 1, 0, tzinfo=dt.UTC)
NOW_S = "2024-01-01T01:00:00Z"


def _js(**kw: Any) -> JobSet:
    builder = (
        make_jobset()
        .replicated_job(make_replicated_job("driver"))
        .replicated_job(make_replicated_job("workers").replicas(2))
    )
    if "failure_policy" in kw:
        builder.failure_policy(**kw.pop("failure_policy"))
    if kw.pop("suspend", False):
        builder.suspend(True)
    if "status" in kw:
        builder.status(**kw.pop("status"))
    if "success" in kw:
        builder.success_policy(*kw.pop("success"))
    if "ttl" in kw:
        builder.ttl(kw.pop("ttl"))
    assert not kw
    return builder.obj()


def _plan(js: JobSet, jobs: list[JobWrapper], **kw: Any) -> ReconcilePlan:
    return next_step(js, [j.obj() for j in jobs], NOW, **kw)


def _all(attempt: int = 0) -> list[JobWrapper]:
    return [
        make_job("driver", 0).restart_attempt(attempt),
        make_job("workers", 0).restart_attempt(attempt),
        make_job("workers", 1).restart_attempt(attempt),
    ]


def _conds(plan: ReconcilePlan) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in plan.status.conditions or []]


def _rjs(plan: ReconcilePlan) -> dict[str, tuple[int, int, int, int, int]]:
    return {
        s.name: (s.ready, s.succeeded, s.failed, s.active, s.suspended)
        for s in plan.status.replicated_jobs_status or []
    }


def test_fresh_jobset_creates_every_job_and_the_headless_service() -> None:
    plan = _plan(_js(), [])
    assert plan.stage == "Reconciled"
    assert [c.name for c in plan.create_jobs] == ["js-driver-0", "js-workers-0", "js-workers-1"]
    assert plan.create_jobs[0] == JobCreation("driver", 0, "js-driver-0", 0, False)
    assert plan.headless_service == "js"
    assert plan.delete_jobs == () and plan.suspend_jobs == () and plan.resume_jobs == ()
    assert [s.name for s in plan.status.replicated_jobs_status or []] == ["workers", "driver"]
    assert plan.status.to_dict() == {
        "restarts": 0,
        "replicatedJobsStatus": [
            {"name": n, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
            for n in ("workers", "driver")
        ],
    }
    assert plan.status_changed
    assert plan.events == ()


def test_steady_state_needs_no_write() -> None:
    first = _plan(_js(), _all())
    again = _plan(_js(status=first.status.to_dict()), _all())
    assert again.stage == "Reconciled"
    assert not again.status_changed
    assert again.create_jobs == ()


def test_rjob_status_order_does_not_force_a_write() -> None:
    status = _plan(_js(), _all()).status.to_dict()
    status["replicatedJobsStatus"].reverse()
    assert not _plan(_js(status=status), _all()).status_changed


def test_no_failure_policy_fails_the_jobset() -> None:
    jobs = _all()
    jobs[2].fail("BackoffLimitExceeded", "boom", T0)
    plan = _plan(_js(), jobs)
    message = "jobset failed due to one or more job failures (first failed job: js-workers-1)"
    assert plan.stage == "FailurePolicy"
    assert plan.failure is not None and plan.failure.terminal
    assert _conds(plan) == [("Failed", "True", "FailedJobs")]
    assert plan.status.conditions is not None and plan.status.conditions[0].message == message
    assert plan.status.conditions[0].last_transition_time == NOW_S
    assert plan.status.terminal_state == "Failed"
    assert plan.events == (PlannedEvent("Warning", "FailedJobs", message),)
    assert plan.create_jobs == ()
    assert _rjs(plan)["workers"] == (0, 0, 1, 0, 0)


def test_restart_cycle_recreate() -> None:
    policy = {"max_restarts": 1}
    jobs = _all()
    jobs[0].fail("BackoffLimitExceeded", "", T0)
    # Pass 1: the failure bumps the counters; no Job is touched yet.
    p1 = _plan(_js(failure_policy=policy), jobs)
    assert (
        p1.stage == "FailurePolicy" and p1.failure is not None and p1.failure.outcome == "Restart"
    )
    assert (p1.status.restarts, p1.status.restarts_count_towards_max) == (1, 1)
    assert _conds(p1) == [("RestartingJobSet", "True", "DefaultFailurePolicy")]
    restart_message = "applying RestartJobSet failure policy action (first failed job: js-driver-0)"
    assert p1.events == (
        PlannedEvent("Warning", "RestartJobSetFailurePolicyAction", restart_message),
    )
    assert p1.delete_jobs == () and p1.create_jobs == ()
    # Pass 2: every old Job is from a previous attempt: delete all, recreate none yet.
    js2 = _js(failure_policy=policy, status=p1.status.to_dict())
    p2 = _plan(js2, jobs)
    assert [d.name for d in p2.delete_jobs] == ["js-driver-0", "js-workers-0", "js-workers-1"]
    assert p2.delete_jobs[0] == JobDeletion("js-driver-0", "uid-js-driver-0", "PreviousAttempt")
    assert p2.create_jobs == ()
    assert _rjs(p2) == {"workers": (0, 0, 0, 0, 0), "driver": (0, 0, 0, 0, 0)}
    # Pass 3: driver gone, workers terminating: only the driver is recreated, with attempt 1.
    terminating = [make_job("workers", i).restart_attempt(0).deleting() for i in (0, 1)]
    p3 = _plan(js2, terminating)
    assert p3.delete_jobs == ()
    assert p3.create_jobs == (JobCreation("driver", 0, "js-driver-0", 1, False),)
    # Pass 4: all new Jobs ready: RestartingJobSet flips to False/JobsReady.
    ready = [j.ready(1) for j in _all(attempt=1)]
    p4 = _plan(_js(failure_policy=policy, status=p3.status.to_dict()), ready)
    assert _conds(p4) == [("RestartingJobSet", "False", "JobsReady")]
    assert (
        p4.status.conditions is not None and p4.status.conditions[0].message == "all jobs are ready"
    )
    assert p4.status_changed


def test_reaching_max_restarts_fails() -> None:
    jobs = _all(attempt=1)
    jobs[1].fail("BackoffLimitExceeded", "", T0)
    status = {
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "conditions": [cond("RestartingJobSet", "False", "JobsReady")],
    }
    plan = _plan(_js(failure_policy={"max_restarts": 1}, status=status), jobs)
    assert _conds(plan) == [
        ("RestartingJobSet", "False", "JobSetFailed"),
        ("Failed", "True", "ReachedMaxRestarts"),
    ]
    assert [(e.type, e.reason) for e in plan.events] == [
        ("Warning", "ReachedMaxRestarts"),
        ("Normal", "JobSetFailed"),
    ]
    assert plan.status.terminal_state == "Failed"


def test_blocking_recreate_waits_for_every_old_job() -> None:
    js = _js(
        failure_policy={"max_restarts": 3, "restart_strategy": "BlockingRecreate"},
        status={"restarts": 1},
    )
    plan = _plan(js, [make_job("workers", 0).restart_attempt(0).deleting()])
    assert plan.create_jobs == ()
    assert plan.delete_jobs == ()  # already terminating
    assert plan.creation is not None
    assert {g.reason for g in plan.creation.gates} == {"BlockingRecreate"}


def test_success_all_completes() -> None:
    jobs = [j.complete() for j in _all()]
    plan = _plan(_js(), jobs)
    assert plan.stage == "Completed"
    assert plan.success is not None and (plan.success.needed, plan.success.succeeded) == (3, 3)
    assert _conds(plan) == [("Completed", "True", "AllJobsCompleted")]
    assert plan.status.terminal_state == "Completed"
    assert plan.events == (
        PlannedEvent("Normal", "AllJobsCompleted", "jobset completed successfully"),
    )


def test_success_with_targets_then_remaining_jobs_deleted() -> None:
    jobs = _all()
    jobs[1].complete()
    jobs[2].complete()
    p1 = _plan(_js(success=("All", ["workers"])), jobs)
    assert p1.stage == "Completed"
    p2 = _plan(_js(success=("All", ["workers"]), status=p1.status.to_dict(), ttl=7200), jobs)
    assert p2.stage == "Finished"
    assert p2.delete_jobs == (JobDeletion("js-driver-0", "uid-js-driver-0", "JobSetFinished"),)
    assert p2.ttl is not None and p2.ttl.requeue_after_seconds == pytest.approx(7200.0)
    assert not p2.status_changed


def test_success_not_met_keeps_reconciling() -> None:
    jobs = _all()
    jobs[1].complete()
    plan = _plan(_js(), jobs)
    assert plan.stage == "Reconciled"
    assert plan.success is not None and not plan.success.met


def test_restarting_condition_false_when_completing() -> None:
    status = {
        "restarts": 1,
        "conditions": [cond("RestartingJobSet", "True", "DefaultFailurePolicy")],
    }
    jobs = [j.complete() for j in _all(attempt=1)]
    plan = _plan(_js(status=status), jobs)
    assert _conds(plan) == [
        ("RestartingJobSet", "False", "JobSetCompleted"),
        ("Completed", "True", "AllJobsCompleted"),
    ]


def test_unsupported_action_writes_nothing_but_deletes_previous_jobs() -> None:
    js = _js(
        failure_policy={"max_restarts": 1, "rules": [{"name": "one", "action": "RestartJob"}]},
        status={"restarts": 1},
    )
    jobs = [
        make_job("driver", 0).restart_attempt(1).fail(),
        make_job("workers", 0).restart_attempt(0),
    ]
    plan = _plan(js, jobs)
    assert plan.stage == "FailurePolicy"
    assert plan.problem is not None and "RestartJob" in plan.problem
    assert not plan.status_changed and plan.events == ()
    assert [d.name for d in plan.delete_jobs] == ["js-workers-0"]


def test_suspend_and_resume() -> None:
    suspended = _plan(_js(suspend=True), _all())
    assert suspended.suspend_jobs == ("js-driver-0", "js-workers-0", "js-workers-1")
    assert _conds(suspended) == [("Suspended", "True", "SuspendedJobs")]
    assert suspended.events == (PlannedEvent("Normal", "SuspendedJobs", "jobset is suspended"),)
    jobs = [j.suspended() for j in _all()]
    resumed = _plan(_js(status=suspended.status.to_dict()), jobs)
    assert [r.name for r in resumed.resume_jobs] == ["js-driver-0", "js-workers-0", "js-workers-1"]
    assert resumed.resume_jobs[0] == JobResume("js-driver-0", "driver", False)
    assert _conds(resumed) == [("Suspended", "False", "ResumeJobs")]


def test_fresh_suspended_jobset_creates_suspended_jobs() -> None:
    plan = _plan(_js(suspend=True), [])
    assert {c.suspend for c in plan.create_jobs} == {True}
    assert _conds(plan) == [("Suspended", "True", "SuspendedJobs")]


def test_in_order_startup_conditions() -> None:
    js = (
        make_jobset()
        .startup_policy("InOrder")
        .replicated_job(make_replicated_job("driver"))
        .replicated_job(make_replicated_job("workers"))
        .obj()
    )
    p1 = next_step(js, [], NOW)
    assert [c.name for c in p1.create_jobs] == ["js-driver-0"]
    assert _conds(p1) == [("StartupPolicyInProgress", "True", "InOrderStartupPolicyInProgress")]
    js2 = js.model_copy(update={"status": p1.status})
    jobs = [make_job("driver", 0).ready(1).obj(), make_job("workers", 0).ready(1).obj()]
    p2 = next_step(js2, jobs, NOW)
    assert _conds(p2) == [
        ("StartupPolicyInProgress", "False", "InOrderStartupPolicyInProgress"),
        ("StartupPolicyCompleted", "True", "InOrderStartupPolicyCompleted"),
    ]


@pytest.mark.parametrize(
    ("js", "kw"),
    [
        (make_jobset().deletion_timestamp(T0).obj(), {}),
        (make_jobset().managed_by("kueue.x-k8s.io/multikueue").obj(), {}),
        (
            make_jobset().managed_by("jobset.sigs.k8s.io/jobset-controller").obj(),
            {"controller_name": "example.com/x"},
        ),
    ],
    ids=["being-deleted", "managed-by-another-controller", "default-name-but-other-planner"],
)
def test_skipped(js: JobSet, kw: dict[str, Any]) -> None:
    plan = next_step(js, [make_job().fail().obj()], NOW, **kw)
    assert plan.stage == "Skipped" and not plan.status_changed and plan.delete_jobs == ()


def test_custom_controller_name_is_reconciled() -> None:
    js = make_jobset().replicated_job(make_replicated_job("a")).managed_by("example.com/x").obj()
    plan = next_step(js, [], NOW, controller_name="example.com/x")
    assert plan.stage == "Reconciled" and len(plan.create_jobs) == 1


def test_invalid_restart_attempt_label_blocks_the_pass() -> None:
    jobs = [make_job("driver", 0).label("jobset.sigs.k8s.io/restart-attempt", "x")]
    plan = _plan(_js(), jobs)
    assert plan.stage == "InvalidChildJobs"
    assert plan.problem is not None and "js-driver-0" in plan.problem
    assert not plan.status_changed and plan.create_jobs == ()


def test_only_jobs_owned_by_the_jobset_uid_count() -> None:
    js = make_jobset().uid("js-uid").replicated_job(make_replicated_job("a").replicas(2)).obj()
    jobs = [make_job("a", 0).owner("js-uid"), make_job("a", 1).owner("other-uid").fail()]
    plan = _plan(js, jobs)
    assert plan.stage == "Reconciled"
    assert [c.name for c in plan.create_jobs] == ["js-a-1"]


def test_accepts_child_job_views() -> None:
    plan = next_step(_js(), [j.view() for j in _all()], NOW)
    assert plan.stage == "Reconciled" and plan.create_jobs == ()


def test_finished_jobset_past_its_ttl_is_deleted() -> None:
    status = {
        "conditions": [cond("Failed", "True", "FailedJobs", at=T0)],
        "terminalState": "Failed",
    }
    plan = _plan(
        _js(status=status, ttl=60),
        [make_job("driver", 0).fail(), make_job("workers", 0).deleting()],
    )
    assert plan.stage == "Finished"
    assert plan.delete_jobs == ()  # finished Jobs are kept, terminating ones are left alone
    assert plan.ttl is not None and plan.ttl.delete_jobset


def test_no_headless_service_without_dns_hostnames() -> None:
    js = make_jobset().enable_dns_hostnames(False).replicated_job(make_replicated_job("a")).obj()
    assert next_step(js, [], NOW).headless_service is None


def test_volume_claim_policies_are_flagged() -> None:
    js = _js().model_copy(deep=True)
    js.spec.volume_claim_policies = [VolumeClaimPolicy(templates=[{"metadata": {"name": "data"}}])]
    assert next_step(js, [], NOW).ensure_volume_claims
    assert not next_step(_js(), [], NOW).ensure_volume_claims
