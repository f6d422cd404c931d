"""The native backend: its pure pass planner, then the sync and async backends on the devcluster.

The first half drives :func:`plan_pass` (the core planner applied to an anchor and the Jobs it
owns) through the steps of a run, with Jobs as the API returns them. The second half runs real
JobSets with :class:`NativeBackend` and :class:`AsyncNativeBackend` through one test body
(:class:`Twin` awaits what the async backend returns) on the local control plane; pods are
scripted with the devcluster annotations (``tests/cluster/README.md``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import inspect
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.backends import _common as common
from jobset_core.backends._anchor import (
    ANCHOR_LABEL,
    STATUS_KEY,
    Anchor,
    build_anchor,
    parse_anchor,
)
from jobset_core.backends._native_exec import child_views, foreign_job, plan_pass
from jobset_core.backends.native import AsyncNativeBackend, NativeBackend
from jobset_core.client import AsyncJobSetClient, ClientSettings, JobSetClient
from jobset_core.errors import CreationFailed, IdentityMismatch, NotFound, WaitTimeout
from jobset_core.models import JobSet, JobSetStatus
from jobset_core.outcome import Phase, Progress
from jobset_core.policy import conditions as c

UID = "anchor-uid-1"
NOW = _dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=_dt.timezone.utc)
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
    js = JobSet.model_validate(
        {"metadata": {"name": "demo"}, "spec": {"replicatedJobs": list(rjobs), **spec}}
    )
    body = build_anchor(js, "ns")
    if status is not None:
        body["data"][STATUS_KEY] = json.dumps(status.to_dict())
    body["metadata"].update(
        {"uid": UID, "resourceVersion": "7", "creationTimestamp": "2025-01-02T03:00:00Z"}
    )
    return parse_anchor(body)


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
    outcome = common.build_outcome(make_anchor(rjob("a", 2), status=status).jobset, "native")
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
    outcome = common.build_outcome(make_anchor(rjob("a"), status=status).jobset, "native")
    assert outcome.created_at == "2025-01-02T03:00:00Z"
    assert outcome.finished_at == "2025-01-02T03:00:42Z"
    assert outcome.duration_seconds == 42.0
    assert outcome.reason == c.ALL_JOBS_COMPLETED.reason


def test_restarting_outcome_names_the_failed_job() -> None:
    anchor = make_anchor(rjob("a"), failurePolicy={"maxRestarts": 1})
    step = plan_pass(anchor, [api_job("a", finished="Failed")], NOW)
    assert step.restart is not None
    after = make_anchor(rjob("a"), status=step.plan.status, failurePolicy={"maxRestarts": 1})
    outcome = common.restart_details(common.build_outcome(after.jobset, "native"), after.jobset)
    assert outcome.phase is Phase.RESTARTING and outcome.terminal_state is None
    assert outcome.failed_job == "demo-a-0"
    assert outcome.reason == c.RESTARTING_DEFAULT_FAILURE_POLICY
    assert outcome.message.endswith("(first failed job: demo-a-0)")


# =========================================================================== on the devcluster

FLAVOURS = ["sync", "async"]
POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}


class Twin:
    """One face for both backends: whatever the async backend returns is awaited."""

    def __init__(self, backend: NativeBackend | AsyncNativeBackend) -> None:
        self.backend = backend

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.backend, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return call

    async def lines(self, *args: Any, **kwargs: Any) -> list[str]:
        stream = self.backend.stream_logs(*args, **kwargs)
        if isinstance(stream, AsyncIterator):
            return [line async for line in stream]
        return list(stream)


@asynccontextmanager
async def open_backend(flavour: str, kubeconfig: Any, **options: Any) -> AsyncIterator[Twin]:
    settings = ClientSettings(kubeconfig_path=kubeconfig)
    options = {"watch_window": 2, "poll_interval": 0.2, **options}
    if flavour == "sync":
        with JobSetClient(settings) as client:
            yield Twin(NativeBackend(client, **options))
    else:
        async with AsyncJobSetClient(settings) as aclient:
            yield Twin(AsyncNativeBackend(aclient, **options))


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def native(flavour: str, devcluster: Any) -> AsyncIterator[Twin]:
    async with open_backend(flavour, devcluster.kubeconfig) as twin:
        yield twin


def crjob(name: str, replicas: int = 1, *, run: str = "0.5", **extra: Any) -> dict[str, Any]:
    """A replicated job whose pods are scripted by devcluster annotations (``extra`` keys
    ``exit_code`` etc. become ``devcluster/exit-code``; the rest goes to the replicated job)."""
    notes = {"devcluster/run-seconds": run}
    for key in ("exit_code", "fail_until_attempt", "never_finish", "termination_message", "log"):
        if key in extra:
            notes["devcluster/" + key.replace("_", "-")] = str(extra.pop(key))
    job_spec = {"backoffLimit": 0, **extra.pop("job_spec", {})}
    job_spec["template"] = {"metadata": {"annotations": notes}, "spec": POD_SPEC}
    return {"name": name, "replicas": replicas, "template": {"spec": job_spec}, **extra}


def manifest(name: str, *rjobs: dict[str, Any], **spec: Any) -> JobSet:
    annotations = spec.pop("annotations", None)
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return JobSet.model_validate(
        {"metadata": meta, "spec": {"replicatedJobs": list(rjobs), **spec}}
    )


def plain(obj: Any) -> dict[str, Any]:
    return obj if isinstance(obj, dict) else obj.to_dict()


def jobs_of(devcluster: Any, namespace: str, name: str) -> list[Any]:
    selector = f"{labels.JOBSET_NAME}={name}"
    return list(devcluster.batch.list_namespaced_job(namespace, label_selector=selector).items)


def attempts(devcluster: Any, namespace: str, name: str) -> set[str]:
    return {j.metadata.labels[labels.RESTART_ATTEMPT] for j in jobs_of(devcluster, namespace, name)}


def everything(devcluster: Any, namespace: str, name: str) -> list[str]:
    """Every object of the run still present (anchor, Jobs, pods, Service)."""
    selector = f"{labels.JOBSET_NAME}={name}"
    core = devcluster.core
    left = [
        f"configmap/{c.metadata.name}"
        for c in core.list_namespaced_config_map(namespace).items
        if (c.metadata.labels or {}).get(ANCHOR_LABEL)
    ]
    left += [f"job/{j.metadata.name}" for j in jobs_of(devcluster, namespace, name)]
    left += [
        f"pod/{p.metadata.name}"
        for p in core.list_namespaced_pod(namespace, label_selector=selector).items
    ]
    left += [f"service/{s.metadata.name}" for s in core.list_namespaced_service(namespace).items]
    return left


def assert_owned_by_anchor(devcluster: Any, namespace: str, name: str, uid: str) -> None:
    objects = [*jobs_of(devcluster, namespace, name)]
    services = devcluster.core.list_namespaced_service(namespace).items
    objects += [svc for svc in services if svc.metadata.name == name]
    assert objects
    for obj in objects:
        (owner,) = obj.metadata.owner_references
        assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
            "v1",
            "ConfigMap",
            name,
            uid,
        )
        assert owner.controller and owner.block_owner_deletion


async def until(check: Callable[[], Any], timeout: float = 60.0, desc: str = "it") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {desc} (last: {value!r})")
        await asyncio.sleep(0.3)


@pytest.mark.cluster
class TestOnCluster:
    """Real runs; each test runs with the sync and the async backend."""

    async def test_success_all(self, native: Twin, cluster_namespace: str, devcluster: Any) -> None:
        js = manifest(
            "ok",
            crjob("a", 2, termination_message='{"loss": 0.25}'),
            crjob("b"),
        )
        sub = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        assert sub.created and sub.handle.backend == "native"
        seen: list[Progress] = []
        outcome = await native.wait(sub.handle, timeout=60, on_progress=seen.append)
        assert (outcome.phase, outcome.terminal_state, outcome.reason) == (
            Phase.COMPLETED,
            "Completed",
            c.ALL_JOBS_COMPLETED.reason,
        )
        assert outcome.restarts == 0 and outcome.result == {"loss": 0.25}
        assert [(r.name, r.succeeded) for r in outcome.replicated_jobs] == [("a", 2), ("b", 1)]
        assert seen and seen[-1].phase is Phase.COMPLETED
        assert_owned_by_anchor(devcluster, cluster_namespace, "ok", sub.handle.uid)
        assert attempts(devcluster, cluster_namespace, "ok") == {"0"}
        # another "process" reads the same status from the anchor
        async with open_backend("sync", devcluster.kubeconfig) as other:
            handle = await other.attach("ok", namespace=cluster_namespace, identity={"run": "r1"})
            assert handle == sub.handle
            assert (await other.status(handle)).model_dump() == outcome.model_dump()
            status = await other.jobset_status(handle)
            assert status.terminal_state == "Completed" and status.restarts == 0
        await native.delete(sub.handle, wait=True, timeout=60)
        assert everything(devcluster, cluster_namespace, "ok") == []

    async def test_success_any_with_targets(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest(
            "any",
            crjob("driver"),
            crjob("workers", 2, never_finish="true"),
            successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=60)
        assert outcome.terminal_state == "Completed"
        assert outcome.reason == c.ALL_JOBS_COMPLETED.reason

        def workers_deleted() -> bool:
            jobs = jobs_of(devcluster, cluster_namespace, "any")
            live = [j for j in jobs if j.metadata.name.startswith("any-workers")]
            return all(j.metadata.deletion_timestamp for j in live)

        await until(workers_deleted, desc="the unfinished workers to be deleted")

    async def test_fail_jobset_on_matching_reason(
        self, native: Twin, cluster_namespace: str
    ) -> None:
        rule = {
            "name": "fatal",
            "action": "FailJobSet",
            "onJobFailureReasons": ["BackoffLimitExceeded"],
        }
        js = manifest(
            "fatal",
            crjob("w", exit_code=3, log="boom\nstack"),
            failurePolicy={"maxRestarts": 3, "rules": [rule]},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=60)
        assert (outcome.terminal_state, outcome.reason) == ("Failed", c.FAIL_JOBSET_ACTION.reason)
        assert outcome.restarts == 0 and outcome.failed_job == "fatal-w-0"
        logs = await native.failed_pod_logs(sub.handle)
        assert list(logs.values()) == ["boom\nstack\n"] or list(logs.values()) == ["boom\nstack"]

    async def test_restart_up_to_max(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest("maxed", crjob("w", exit_code=1), failurePolicy={"maxRestarts": 2})
        sub = await native.submit(js, namespace=cluster_namespace)
        seen: list[Progress] = []
        outcome = await native.wait(sub.handle, timeout=90, on_progress=seen.append)
        assert (outcome.terminal_state, outcome.reason) == ("Failed", c.REACHED_MAX_RESTARTS.reason)
        assert (outcome.restarts, outcome.restarts_count_towards_max) == (2, 2)
        assert {p.restarts for p in seen if p.kind == "restarting"} == {1, 2}
        assert attempts(devcluster, cluster_namespace, "maxed") == {"2"}

    async def test_ignore_max_restarts(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        rule = {"name": "again", "action": "RestartJobSetAndIgnoreMaxRestarts"}
        js = manifest(
            "ignore",
            crjob("w", 2, fail_until_attempt=2),
            failurePolicy={"maxRestarts": 0, "rules": [rule]},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=90)
        assert outcome.terminal_state == "Completed"
        assert (outcome.restarts, outcome.restarts_count_towards_max) == (2, 0)
        assert attempts(devcluster, cluster_namespace, "ignore") == {"2"}

    async def test_blocking_recreate(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest(
            "blocking",
            crjob("w", 3, fail_until_attempt=1),
            failurePolicy={"maxRestarts": 1, "restartStrategy": "BlockingRecreate"},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=90)
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 1)
        assert attempts(devcluster, cluster_namespace, "blocking") == {"1"}

    async def test_in_order_startup(self, native: Twin, cluster_namespace: str) -> None:
        js = manifest(
            "ordered",
            crjob("first", 2, run="2"),
            crjob("second", run="0.5"),
            startupPolicy={"startupPolicyOrder": "InOrder"},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        seen: list[Progress] = []
        outcome = await native.wait(sub.handle, timeout=60, on_progress=seen.append)
        assert outcome.terminal_state == "Completed"
        second_started = False
        for progress in seen:
            first, second = progress.replicated_jobs
            if second.active or second.ready or second.succeeded:
                second_started = True
                assert first.ready + first.succeeded == first.replicas, progress.line()
        assert second_started
        status = await native.jobset_status(sub.handle)
        done = status.condition(c.STARTUP_POLICY_COMPLETED)
        assert done is not None and done.status == "True"

    async def test_depends_on_complete(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest(
            "deps",
            crjob("init", run="1.5"),
            crjob("main", dependsOn=[{"name": "init", "status": "Complete"}]),
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        seen: list[Progress] = []
        outcome = await native.wait(sub.handle, timeout=60, on_progress=seen.append)
        assert outcome.terminal_state == "Completed"
        for progress in seen:
            init, main = progress.replicated_jobs
            if main.active or main.ready or main.succeeded:
                assert init.succeeded == 1, progress.line()
        jobs = {j.metadata.name: j for j in jobs_of(devcluster, cluster_namespace, "deps")}
        init_done = jobs["deps-init-0"].status.completion_time
        assert jobs["deps-main-0"].metadata.creation_timestamp >= init_done

    async def test_suspend_then_resume(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest("paused", crjob("w", 2), suspend=True)
        sub = await native.submit(js, namespace=cluster_namespace)
        status = await native.status(sub.handle)
        assert status.phase is Phase.SUSPENDED
        jobs = jobs_of(devcluster, cluster_namespace, "paused")
        assert len(jobs) == 2 and all(j.spec.suspend for j in jobs)
        with pytest.raises(WaitTimeout):
            await native.wait(sub.handle, timeout=2)
        selector = f"{labels.JOBSET_NAME}=paused"
        assert (
            devcluster.core.list_namespaced_pod(cluster_namespace, label_selector=selector).items
            == []
        )
        resumed = await native.set_suspend(sub.handle, False)
        assert resumed.phase is not Phase.SUSPENDED
        outcome = await native.wait(sub.handle, timeout=60)
        assert outcome.terminal_state == "Completed"
        suspended = (await native.jobset_status(sub.handle)).condition(c.SUSPENDED)
        assert suspended is not None and suspended.status == "False"

    async def test_exclusive_placement_gives_distinct_zones(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        zone = "topology.kubernetes.io/zone"
        js = manifest(
            "excl",
            # long enough for every pod to coexist: on the devcluster the upstream pod webhook
            # also sees these pods (objectSelector jobset-name) and rejects followers until
            # their leader is scheduled, so the Job controller creates them after a backoff
            crjob("w", 2, run="6", job_spec={"parallelism": 2, "completions": 2}),
            annotations={labels.EXCLUSIVE_TOPOLOGY: zone},
        )
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=60)
        assert outcome.terminal_state == "Completed"
        nodes = devcluster.node_labels()
        selector = f"{labels.JOBSET_NAME}=excl"
        pods = devcluster.core.list_namespaced_pod(cluster_namespace, label_selector=selector).items
        zones: dict[str, set[str]] = {}
        for pod in pods:
            job = pod.metadata.labels[labels.JOB_KEY]
            zones.setdefault(job, set()).add(nodes[pod.spec.node_name][zone])
        assert len(zones) == 2 and all(len(z) == 1 for z in zones.values())
        assert len(set().union(*zones.values())) == 2

    async def test_ttl_deletes_the_run(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest("ttl", crjob("w"), ttlSecondsAfterFinished=1)
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome = await native.wait(sub.handle, timeout=60)
        assert outcome.terminal_state == "Completed"
        await until(
            lambda: not everything(devcluster, cluster_namespace, "ttl"),
            desc="the TTL to delete the run",
        )

    async def test_cancel_leaves_nothing(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest("doomed", crjob("w", 2, never_finish="true"))
        sub = await native.submit(js, namespace=cluster_namespace)
        selector = f"{labels.JOBSET_NAME}=doomed"

        def running() -> bool:
            pods = devcluster.core.list_namespaced_pod(
                cluster_namespace, label_selector=selector
            ).items
            return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)

        await until(running, desc="both pods running")
        await native.cancel(sub.handle)
        await until(
            lambda: not everything(devcluster, cluster_namespace, "doomed"),
            desc="every object of the run to go",
        )
        with pytest.raises(NotFound):
            await native.wait(sub.handle, timeout=10)

    async def test_return_on_restart_then_a_second_wait_completes(
        self, native: Twin, flavour: str, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest(
            "retry", crjob("w", 2, fail_until_attempt=1), failurePolicy={"maxRestarts": 2}
        )
        sub = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        first = await native.wait(sub.handle, timeout=60, on_restart="return")
        assert first.phase is Phase.RESTARTING and first.terminal_state is None
        assert first.restarts == 1 and first.failed_job in ("retry-w-0", "retry-w-1")
        assert first.reason == c.RESTARTING_DEFAULT_FAILURE_POLICY
        assert "BackoffLimitExceeded" in first.message
        left = jobs_of(devcluster, cluster_namespace, "retry")
        assert all(j.metadata.deletion_timestamp for j in left)  # attempt 0 going, no attempt 1
        assert attempts(devcluster, cluster_namespace, "retry") <= {"0"}
        async with open_backend(flavour, devcluster.kubeconfig) as later:
            handle = await later.attach("retry", namespace=cluster_namespace, uid=sub.handle.uid)
            outcome = await later.wait(handle, timeout=60, on_restart="return")
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 1)
        assert attempts(devcluster, cluster_namespace, "retry") == {"1"}

    async def test_identity_mismatch_and_adoption(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        devcluster.core.create_namespaced_config_map(
            cluster_namespace, {"metadata": {"name": "taken"}, "data": {"k": "v"}}
        )
        with pytest.raises(IdentityMismatch, match="not a native JobSet anchor"):
            await native.submit(manifest("taken", crjob("w")), namespace=cluster_namespace)
        js = manifest("mine", crjob("w", never_finish="true"))
        sub = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        with pytest.raises(IdentityMismatch, match="identity labels differ"):
            await native.submit(js, namespace=cluster_namespace, identity={"run": "r2"})
        with pytest.raises(IdentityMismatch):
            await native.submit(
                js, namespace=cluster_namespace, identity={"run": "r1"}, expected_uid="x"
            )
        again = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        assert not again.created and again.handle == sub.handle
        assert len(jobs_of(devcluster, cluster_namespace, "mine")) == 1
        await native.delete(sub.handle, wait=True, timeout=60)
        assert everything(devcluster, cluster_namespace, "mine") == []

    async def test_logs_of_the_default_pod(self, native: Twin, cluster_namespace: str) -> None:
        js = manifest("talk", crjob("w", 2, log="hello\nworld"))
        sub = await native.submit(js, namespace=cluster_namespace)
        await native.wait(sub.handle, timeout=60)
        assert await native.lines(sub.handle, follow=False) == ["hello", "world"]

    async def test_killed_process_and_a_new_one_reattaching(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        script = (
            "import sys\n"
            "from jobset_core.backends.native import NativeBackend\n"
            "from jobset_core.client import ClientSettings, JobSetClient\n"
            "from jobset_core.models import JobSet\n"
            "js = JobSet.model_validate_json(sys.argv[2])\n"
            "backend = NativeBackend(JobSetClient(ClientSettings(kubeconfig_path=sys.argv[1])))\n"
            "sub = backend.submit(js, namespace=sys.argv[3], identity={'run': 'r1'})\n"
            "backend.wait(sub.handle)\n"
        )
        js = manifest(
            "phoenix",
            crjob("w", 2, run="2", fail_until_attempt=1),
            failurePolicy={"maxRestarts": 1},
        )
        env = {**devcluster.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                str(devcluster.kubeconfig),
                js.model_dump_json(),
                cluster_namespace,
            ],
            env=env,
        )
        try:
            await until(
                lambda: len(jobs_of(devcluster, cluster_namespace, "phoenix")) == 2,
                desc="the first process to create the Jobs",
            )
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        sub = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        assert not sub.created
        outcome = await native.wait(sub.handle, timeout=90)
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 1)
        anchors = [
            x for x in everything(devcluster, cluster_namespace, "phoenix") if "configmap" in x
        ]
        assert anchors == ["configmap/phoenix"]
        jobs = jobs_of(devcluster, cluster_namespace, "phoenix")
        assert sorted(j.metadata.name for j in jobs) == ["phoenix-w-0", "phoenix-w-1"]
        assert_owned_by_anchor(devcluster, cluster_namespace, "phoenix", sub.handle.uid)
        await native.delete(sub.handle, wait=True, timeout=60)
        assert everything(devcluster, cluster_namespace, "phoenix") == []

    async def test_two_runs_in_one_namespace_never_cross_talk(
        self, native: Twin, flavour: str, cluster_namespace: str, devcluster: Any
    ) -> None:
        flaky = manifest(
            "flaky", crjob("w", 2, fail_until_attempt=1), failurePolicy={"maxRestarts": 1}
        )
        steady = manifest("steady", crjob("w", 2, run="1.5"))
        subs = [await native.submit(js, namespace=cluster_namespace) for js in (flaky, steady)]
        async with open_backend(flavour, devcluster.kubeconfig) as other:
            ends = await asyncio.gather(
                native.wait(subs[0].handle, timeout=60), other.wait(subs[1].handle, timeout=60)
            )
        assert [(o.name, o.terminal_state, o.restarts) for o in ends] == [
            ("flaky", "Completed", 1),
            ("steady", "Completed", 0),
        ]
        assert attempts(devcluster, cluster_namespace, "flaky") == {"1"}
        assert attempts(devcluster, cluster_namespace, "steady") == {"0"}
        for sub in subs:
            assert_owned_by_anchor(devcluster, cluster_namespace, sub.handle.name, sub.handle.uid)

    async def test_suspend_a_running_run_then_resume(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        sub = await native.submit(manifest("nap", crjob("w", run="3")), namespace=cluster_namespace)
        selector = f"{labels.JOBSET_NAME}=nap"

        def pods() -> list[Any]:
            found = devcluster.core.list_namespaced_pod(cluster_namespace, label_selector=selector)
            return list(found.items)

        await until(lambda: any(p.status.phase == "Running" for p in pods()), desc="a running pod")
        suspended = await native.set_suspend(sub.handle, True)
        assert suspended.phase is Phase.SUSPENDED
        assert all(j.spec.suspend for j in jobs_of(devcluster, cluster_namespace, "nap"))
        await until(lambda: not pods(), desc="the suspended Job's pods to go")
        await native.set_suspend(sub.handle, False)
        outcome = await native.wait(sub.handle, timeout=60)
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 0)

    async def test_a_foreign_job_in_the_way_is_reported(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        devcluster.batch.create_namespaced_job(
            cluster_namespace,
            {
                "metadata": {"name": "blocked-w-0"},
                "spec": {"suspend": True, "template": {"spec": POD_SPEC}},
            },
        )
        sub = await native.submit(manifest("blocked", crjob("w")), namespace=cluster_namespace)
        seen: list[Progress] = []
        with pytest.raises(CreationFailed, match="blocked-w-0 already exists"):
            await native.wait(sub.handle, timeout=30, on_progress=seen.append)
        assert [(p.kind, p.reason) for p in seen] == [("creation-failed", "JobCreationFailed")]

    async def test_nothing_moves_without_a_process_and_an_adopting_retry_hands_back_the_restart(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        js = manifest("idle", crjob("w", fail_until_attempt=1), failurePolicy={"maxRestarts": 1})
        first = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})

        def failed() -> bool:
            jobs = jobs_of(devcluster, cluster_namespace, "idle")
            conditions = [c for j in jobs for c in j.status.conditions or []]
            return any(c.type == "Failed" and c.status == "True" for c in conditions)

        await until(failed, desc="the Job to fail")
        await asyncio.sleep(1)
        assert (await native.status(first.handle)).restarts == 0  # no process, no restart
        retry = await native.submit(js, namespace=cluster_namespace, identity={"run": "r1"})
        assert not retry.created and retry.handle == first.handle
        handed_back = await native.wait(retry.handle, timeout=30, on_restart="return")
        assert (handed_back.phase, handed_back.restarts) == (Phase.RESTARTING, 1)
        assert handed_back.failed_job == "idle-w-0"
        outcome = await native.wait(retry.handle, timeout=60, on_restart="return")
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 1)

    async def test_more_jobs_than_one_batch_of_creates(
        self, native: Twin, cluster_namespace: str, devcluster: Any
    ) -> None:
        sub = await native.submit(manifest("wide", crjob("w", 60)), namespace=cluster_namespace)
        assert len(jobs_of(devcluster, cluster_namespace, "wide")) == 60  # all in the first pass
        outcome = await native.wait(sub.handle, timeout=90)
        assert (outcome.terminal_state, outcome.replicated_jobs[0].succeeded) == ("Completed", 60)

    async def test_apiserver_stopped_and_restarted_during_a_wait(
        self, flavour: str, cluster_namespace: str, devcluster: Any, tmp_path: Path
    ) -> None:
        # The native backend talks to a private kube-apiserver (same etcd); while it is down
        # the run cannot be reconciled, but its Jobs finish; the wait resumes after it is back.
        from tests.core.test_backend_controller import PrivateApiServer

        server = PrivateApiServer(devcluster, tmp_path)
        server.start()
        running = threading.Event()
        problems: list[BaseException] = []
        restarted_at: list[float] = []

        def outage() -> None:
            try:
                if not running.wait(60):
                    raise AssertionError("the run never started")
                server.stop()
                done = f"{labels.JOBSET_NAME}=outage"

                def finished() -> bool:
                    jobs = devcluster.batch.list_namespaced_job(
                        cluster_namespace, label_selector=done
                    ).items
                    return len(jobs) == 2 and all(j.status.succeeded == 1 for j in jobs)

                devcluster.wait_for(finished, timeout=60, desc="the Jobs to finish")
                time.sleep(1)
                restarted_at.append(time.monotonic())
                server.start()
            except BaseException as error:  # reported by the test body
                problems.append(error)

        def note(progress: Progress) -> None:
            if progress.phase is Phase.RUNNING:
                running.set()

        try:
            async with open_backend(flavour, server.kubeconfig) as native:
                js = manifest("outage", crjob("w", 2, run="3"))
                sub = await native.submit(js, namespace=cluster_namespace)
                thread = threading.Thread(target=outage, daemon=True)
                thread.start()
                outcome = await native.wait(sub.handle, timeout=150, on_progress=note)
                thread.join(30)
                returned_at = time.monotonic()
        finally:
            server.stop()
        assert not problems, problems
        assert restarted_at and returned_at > restarted_at[0]
        assert (outcome.terminal_state, outcome.replicated_jobs[0].succeeded) == ("Completed", 2)

    async def test_forced_410_between_passes_relists(
        self, flavour: str, cluster_namespace: str, devcluster: Any
    ) -> None:
        async with open_backend(flavour, devcluster.kubeconfig, watch_window=30) as native:
            js = manifest("stale", crjob("w", never_finish="true"))
            sub = await native.submit(js, namespace=cluster_namespace)
            done = await native._reconcile(sub.handle, create=True)
            # resourceVersion 1 is far older than the watch cache keeps: the server answers
            # 410 Gone at once, and the wait goes straight to the next pass (a fresh list)
            # instead of sitting out the 30 s window.
            started = time.monotonic()
            await native._wait_for_change(dataclasses.replace(done, resource_version="1"), None)
            assert time.monotonic() - started < 10
            assert not (await native.status(sub.handle)).phase.terminal
