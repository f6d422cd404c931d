"""Startup gating, mirroring upstream ``startup_policy_test.go`` and ``depends_on_test.go``,
plus ``reconcileReplicatedJobs`` creation rules (InOrder, dependsOn, Recreate, BlockingRecreate)
and the suspend/resume plans."""

from __future__ import annotations

import pytest

from jobset_core.models import JobSet, ReplicatedJob, ReplicatedJobStatus
from jobset_core.policy import (
    CreationPlan,
    JobCreation,
    JobResume,
    bucket_child_jobs,
    plan_job_creation,
    plan_resume,
    plan_suspend,
    replicated_jobs_status,
)
from jobset_core.policy.startup import (
    all_replicas_started,
    dependency_reached_status,
    in_order_startup_policy,
    should_create_job,
)
from tests.core.test_policy_builders import JobWrapper, make_job, make_jobset, make_replicated_job

INIT, TRAINER = "initializer", "trainer-node"


@pytest.mark.parametrize(
    ("order", "expected"),
    [("AnyOrder", False), ("InOrder", True), (None, False)],
    ids=["startup policy AnyOrder", "startup policy InOrder", "nil startup policy"],
)
def test_in_order_startup_policy(order: str | None, expected: bool) -> None:
    builder = make_jobset()
    if order is not None:
        builder.startup_policy(order)
    js = builder.obj()
    if order is None:
        js.spec.startup_policy = None
    assert in_order_startup_policy(js) is expected


@pytest.mark.parametrize(
    ("replicas", "status", "expected"),
    [
        (1, ReplicatedJobStatus(name="test"), False),
        (4, ReplicatedJobStatus(name="test", ready=4), True),
        (4, ReplicatedJobStatus(name="test", ready=2, succeeded=1, failed=1), True),
        (4, ReplicatedJobStatus(name="test", active=4), False),
        (1, None, False),
        (0, None, True),
    ],
    ids=[
        "replicas 1; no replicatedJobStatus",
        "replicas 4; replicatedJobStatus all ready",
        "replicas 4; replicatedJobStatus mix of ready, failed and succeded",
        "replicas 4; replicatedJobStatus all active",
        "no status at all",
        "zero replicas are started",
    ],
)
def test_all_replicas_started(
    replicas: int, status: ReplicatedJobStatus | None, expected: bool
) -> None:
    assert all_replicas_started(replicas, status) is expected


def _trainer(status: str | None) -> ReplicatedJob:
    rjob = make_replicated_job(TRAINER)
    if status is not None:
        rjob.depends_on(INIT, status)
    return ReplicatedJob.model_validate(rjob.obj())


_DEPENDS = [
    ("ReplicatedJob doesn't have any dependencies", None, {INIT: 1}, [], True),
    (
        "status for ReplicatedJob is nil",
        "Complete",
        {INIT: 1, TRAINER: 1},
        [ReplicatedJobStatus(name="invalid", succeeded=1)],
        False,
    ),
    (
        "depends on ReplicatedJob reaches complete status",
        "Complete",
        {INIT: 2, TRAINER: 1},
        [ReplicatedJobStatus(name=INIT, succeeded=2)],
        True,
    ),
    (
        "depends on ReplicatedJob doesn't reach complete status",
        "Complete",
        {INIT: 2, TRAINER: 1},
        [ReplicatedJobStatus(name=INIT, ready=1, succeeded=1)],
        False,
    ),
    (
        "depends on ReplicatedJob reaches ready status",
        "Ready",
        {INIT: 3, TRAINER: 1},
        [ReplicatedJobStatus(name=INIT, ready=1, succeeded=1, failed=1)],
        True,
    ),
    (
        "depends on ReplicatedJob doesn't reach ready status",
        "Ready",
        {INIT: 3, TRAINER: 1},
        [ReplicatedJobStatus(name=INIT, ready=2, active=1)],
        False,
    ),
]


@pytest.mark.parametrize(
    ("status", "replicas", "statuses", "expected"),
    [c[1:] for c in _DEPENDS],
    ids=[c[0] for c in _DEPENDS],
)
def test_dependency_reached_status(
    status: str | None,
    replicas: dict[str, int],
    statuses: list[ReplicatedJobStatus],
    expected: bool,
) -> None:
    assert dependency_reached_status(_trainer(status), replicas, statuses) is expected


def test_every_dependency_must_be_reached() -> None:
    rjob = ReplicatedJob.model_validate(
        make_replicated_job("c").depends_on("a", "Complete").depends_on("b", "Ready").obj()
    )
    replicas = {"a": 1, "b": 2}
    done_a = ReplicatedJobStatus(name="a", succeeded=1)
    assert not dependency_reached_status(
        rjob, replicas, [done_a, ReplicatedJobStatus(name="b", ready=1)]
    )
    assert dependency_reached_status(
        rjob, replicas, [done_a, ReplicatedJobStatus(name="b", ready=1, failed=1)]
    )


# --- shouldCreateJob / constructJobsFromTemplate ------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "restarts", "expected"),
    [
        ([], 0, True),
        ([make_job("w", 0)], 0, False),
        ([make_job("w", 0).complete()], 0, False),
        ([make_job("w", 0).fail()], 0, False),
        ([make_job("w", 0).restart_attempt(0).deleting()], 1, False),
        ([make_job("w", 1)], 0, True),
    ],
    ids=[
        "absent",
        "active",
        "succeeded",
        "failed",
        "previous-attempt-still-terminating",
        "other-index",
    ],
)
def test_should_create_job_recreate_rule(
    existing: list[JobWrapper], restarts: int, expected: bool
) -> None:
    jobs = bucket_child_jobs([j.view() for j in existing], restarts)
    assert should_create_job("js-w-0", jobs) is expected


def _plan(js: JobSet, jobs: list[JobWrapper]) -> CreationPlan:
    restarts = (js.status.restarts if js.status else None) or 0
    buckets = bucket_child_jobs([j.view() for j in jobs], restarts)
    return plan_job_creation(js, buckets, replicated_jobs_status(js, buckets))


def _names(plan: CreationPlan) -> list[str]:
    return [c.name for c in plan.jobs]


def test_any_order_creates_every_missing_job_with_the_current_attempt() -> None:
    js = (
        make_jobset()
        .replicated_job(make_replicated_job("a").replicas(2))
        .replicated_job(make_replicated_job("b"))
        .status(restarts=2)
        .obj()
    )
    plan = _plan(js, [make_job("a", 1).restart_attempt(2)])
    assert plan.jobs == (
        JobCreation("a", 0, "js-a-0", 2, False),
        JobCreation("b", 0, "js-b-0", 2, False),
    )
    assert [g.reason for g in plan.gates] == ["Allowed", "Allowed"]
    assert plan.gates[0].missing == (0,)
    assert plan.startup_condition is None


def test_recreate_waits_for_the_old_namesake_to_be_gone() -> None:
    js = make_jobset().replicated_job(make_replicated_job("a").replicas(2)).status(restarts=1).obj()
    plan = _plan(js, [make_job("a", 0).restart_attempt(0).deleting()])
    assert _names(plan) == ["js-a-1"]


def test_blocking_recreate_creates_nothing_while_previous_jobs_exist() -> None:
    js = (
        make_jobset()
        .replicated_job(make_replicated_job("a").replicas(2))
        .failure_policy(max_restarts=3, restart_strategy="BlockingRecreate")
        .status(restarts=1)
        .obj()
    )
    plan = _plan(js, [make_job("a", 0).restart_attempt(0).deleting()])
    assert plan.jobs == ()
    assert plan.gates[0].reason == "BlockingRecreate"
    assert not plan.gates[0].may_create
    assert _names(_plan(js, [])) == ["js-a-0", "js-a-1"]


def test_suspended_jobset_creates_suspended_jobs() -> None:
    js = make_jobset().replicated_job(make_replicated_job("a")).suspend(True).obj()
    assert _plan(js, []).jobs == (JobCreation("a", 0, "js-a-0", 0, True),)


def _in_order(suspend: bool = False) -> JobSet:
    return (
        make_jobset()
        .startup_policy("InOrder")
        .replicated_job(make_replicated_job("driver"))
        .replicated_job(make_replicated_job("workers").replicas(2))
        .suspend(suspend)
        .obj()
    )


@pytest.mark.parametrize(
    ("jobs", "created", "reasons", "condition"),
    [
        ([], ["js-driver-0"], ["Allowed", "WaitingInOrder"], "StartupPolicyInProgress"),
        ([make_job("driver", 0)], [], ["Allowed", "WaitingInOrder"], "StartupPolicyInProgress"),
        (
            [make_job("driver", 0).ready(1)],
            ["js-workers-0", "js-workers-1"],
            ["AlreadyStarted", "Allowed"],
            "StartupPolicyInProgress",
        ),
        (
            [make_job("driver", 0).fail(), make_job("workers", 0).ready(1)],
            ["js-workers-1"],
            ["AlreadyStarted", "Allowed"],
            "StartupPolicyInProgress",
        ),
        (
            [
                make_job("driver", 0).complete(),
                make_job("workers", 0).ready(1),
                make_job("workers", 1).complete(),
            ],
            [],
            ["AlreadyStarted", "AlreadyStarted"],
            "StartupPolicyCompleted",
        ),
    ],
    ids=[
        "first replicated job created first",
        "waits until the driver is ready",
        "driver ready: workers created",
        "failed counts as started",
        "everything started: completed",
    ],
)
def test_in_order_creates_one_replicated_job_at_a_time(
    jobs: list[JobWrapper], created: list[str], reasons: list[str], condition: str
) -> None:
    plan = _plan(_in_order(), jobs)
    assert _names(plan) == created
    assert [g.reason for g in plan.gates] == reasons
    assert plan.startup_condition is not None
    assert (plan.startup_condition.type, plan.startup_condition.status) == (condition, "True")


def test_in_order_is_ignored_while_suspended() -> None:
    plan = _plan(_in_order(suspend=True), [])
    assert _names(plan) == ["js-driver-0", "js-workers-0", "js-workers-1"]
    assert plan.startup_condition is None


def test_depends_on_gates_creation() -> None:
    js = (
        make_jobset()
        .replicated_job(make_replicated_job("init"))
        .replicated_job(make_replicated_job("launcher").depends_on("init", "Complete"))
        .replicated_job(make_replicated_job("worker").replicas(2).depends_on("launcher", "Ready"))
        .obj()
    )
    plan = _plan(js, [])
    assert _names(plan) == ["js-init-0"]
    assert [g.reason for g in plan.gates] == [
        "Allowed",
        "WaitingForDependencies",
        "WaitingForDependencies",
    ]
    plan = _plan(js, [make_job("init", 0).complete()])
    assert _names(plan) == ["js-launcher-0"]
    plan = _plan(js, [make_job("init", 0).complete(), make_job("launcher", 0).ready(1)])
    assert _names(plan) == ["js-worker-0", "js-worker-1"]


# --- suspendJobs / resumeJobsIfNecessary --------------------------------------------------------


def test_suspend_plan_suspends_running_jobs_only() -> None:
    jobs = [make_job("a", 0).view(), make_job("a", 1).suspended().view()]
    plan = plan_suspend(jobs)
    assert plan.suspend_jobs == ("js-a-0",)
    assert [(s.type, s.status, s.reason) for s in plan.conditions] == [
        ("Suspended", "True", "SuspendedJobs"),
        ("RestartingJobSet", "False", "JobSetSuspended"),
    ]


def test_resume_plan_resumes_suspended_jobs_and_clears_start_time() -> None:
    js = make_jobset().replicated_job(make_replicated_job("a").replicas(2)).obj()
    jobs = [make_job("a", 0).suspended().start_time().view(), make_job("a", 1).suspended().view()]
    plan = plan_resume(js, jobs, replicated_jobs_status(js, bucket_child_jobs(jobs, 0)))
    assert plan.resume_jobs == (JobResume("js-a-0", "a", True), JobResume("js-a-1", "a", False))
    assert [(s.type, s.status, s.reason) for s in plan.conditions] == [
        ("Suspended", "False", "ResumeJobs")
    ]


def test_resume_in_order_stops_at_the_first_replicated_job_not_started() -> None:
    js = _in_order()
    jobs = [make_job("driver", 0).suspended().view(), make_job("workers", 0).suspended().view()]
    plan = plan_resume(js, jobs, replicated_jobs_status(js, bucket_child_jobs(jobs, 0)))
    assert plan.resume_jobs == (JobResume("js-driver-0", "driver", False),)
    assert [s.type for s in plan.conditions] == ["StartupPolicyInProgress"]


def test_resume_respects_depends_on() -> None:
    js = (
        make_jobset()
        .replicated_job(make_replicated_job("init"))
        .replicated_job(make_replicated_job("main").depends_on("init", "Complete"))
        .obj()
    )
    jobs = [make_job("init", 0).suspended().view(), make_job("main", 0).suspended().view()]
    plan = plan_resume(js, jobs, replicated_jobs_status(js, bucket_child_jobs(jobs, 0)))
    assert [r.name for r in plan.resume_jobs] == ["js-init-0"]
