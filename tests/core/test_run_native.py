"""The core's lifecycle on the native backend, against the devcluster.

Real JobSets run through :class:`tests.core._runs.RunFace` in both flavours (on the test's
event loop, and through the blocking façade); pods are scripted with the devcluster
annotations (``tests/cluster/README.md``). The planner itself is tested in
``test_backend_native.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.backends._anchor import ANCHOR_LABEL
from jobset_core.client import Client, ClientSettings
from jobset_core.errors import CreationFailed, IdentityMismatch, JobSetGone, WaitTimeout
from jobset_core.lifecycle import Lifecycle, RunRequest
from jobset_core.models import JobSet
from jobset_core.observe import Observer
from jobset_core.outcome import Phase, Progress
from jobset_core.policy import conditions as c
from tests.cluster.bodies import finish_at, in_turn
from tests.cluster.faultproxy import FaultProxy
from tests.core._exclusive import end_once_all_live, exclusivity_problems
from tests.core._runs import (
    FLAVOURS,
    RunFace,
    open_face,
    start_meeting_a_namesake_being_deleted,
)

POD_SPEC = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}


def open_backend(flavour: str, kubeconfig: Any, **options: Any) -> Any:
    return open_face(flavour, kubeconfig, "native", **options)


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def native(flavour: str, devcluster: Any) -> AsyncIterator[RunFace]:
    async with open_backend(flavour, devcluster.kubeconfig) as face:
        yield face


def crjob(name: str, replicas: int = 1, *, run: str = "0.5", **extra: Any) -> dict[str, Any]:
    """A replicated job whose pods are scripted by devcluster annotations (``extra`` keys
    ``exit_code`` etc. become ``devcluster/exit-code``; the rest goes to the replicated job)."""
    notes = {"devcluster/run-seconds": run}
    for key in (
        "exit_code",
        "fail_until_attempt",
        "never_finish",
        "finish_at",
        "termination_message",
        "log",
    ):
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
@pytest.mark.nojobset(flavour="async")
class TestOnCluster:
    """Real runs; each test runs with the sync and the async backend on the devcluster, and
    with the async one on the cluster without JobSet (``[nojobset]``: no CRD, controller or
    pod webhook there)."""

    async def test_success_all(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
    ) -> None:
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
        # another "process" reads the same status from the anchor, once the waiter's record
        # of its settled end is written (its session waits for that before it closes)
        await native.flush()
        async with open_backend("blocking", devcluster.kubeconfig) as other:
            handle = await other.attach("ok", namespace=cluster_namespace, identity={"run": "r1"})
            assert handle == sub.handle
            assert (await other.status(handle)).model_dump() == outcome.model_dump()
            status = await other.jobset_status(handle)
            assert status.terminal_state == "Completed" and status.restarts == 0
        await native.delete(sub.handle, wait=True, timeout=60)
        assert everything(devcluster, cluster_namespace, "ok") == []

    async def test_success_any_with_targets(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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

    async def test_in_order_startup(self, native: RunFace, cluster_namespace: str) -> None:
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        await native.set_suspend(sub.handle, False)
        assert (await native.status(sub.handle)).phase is not Phase.SUSPENDED
        outcome = await native.wait(sub.handle, timeout=60)
        assert outcome.terminal_state == "Completed"
        suspended = (await native.jobset_status(sub.handle)).condition(c.SUSPENDED)
        assert suspended is not None and suspended.status == "False"

    async def test_exclusive_placement_gives_distinct_slices(
        self, native: RunFace, exclusive_placement: None, cluster_namespace: str, devcluster: Any
    ) -> None:
        # slices, not zones: the run holds two of the devcluster's four, not every kwok node
        domain = "devcluster/slice"
        js = manifest(
            "excl",
            # the pods run until all four run at once, then end together; on the devcluster
            # the upstream pod webhook also sees these pods (objectSelector jobset-name) and
            # rejects followers until their leader is scheduled, so the Job controller creates
            # them after a backoff (tests/core/_exclusive.py)
            in_turn(
                crjob("w", 2, never_finish="true", job_spec={"parallelism": 2, "completions": 2})
            ),
            annotations={labels.EXCLUSIVE_TOPOLOGY: domain},
        )
        selector = f"{labels.JOBSET_NAME}=excl"
        sub = await native.submit(js, namespace=cluster_namespace)
        outcome, live = await asyncio.gather(
            native.wait(sub.handle, timeout=150),
            end_once_all_live(devcluster.core, cluster_namespace, selector, 4),
        )
        assert live, "the four pods never ran at once"
        assert outcome.terminal_state == "Completed"
        domains = {n: lbl[domain] for n, lbl in devcluster.node_labels().items() if domain in lbl}
        pods = devcluster.core.list_namespaced_pod(cluster_namespace, label_selector=selector).items
        assert len({pod.metadata.labels[labels.JOB_KEY] for pod in pods}) == 2
        assert not exclusivity_problems(pods, domains, lambda p: p.metadata.labels[labels.JOB_KEY])

    async def test_ttl_deletes_the_run(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        with pytest.raises(JobSetGone):
            await native.wait(sub.handle, timeout=10)

    async def test_return_on_restart_then_a_second_wait_completes(
        self, native: RunFace, flavour: str, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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

    async def test_logs_of_the_default_pod(self, native: RunFace, cluster_namespace: str) -> None:
        js = manifest("talk", crjob("w", 2, log="hello\nworld"))
        sub = await native.submit(js, namespace=cluster_namespace)
        await native.wait(sub.handle, timeout=60)
        assert await native.logs(sub.handle) == ["hello", "world"]

    async def test_killed_process_and_a_new_one_reattaching(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
    ) -> None:
        script = (
            "import sys\n"
            "from jobset_core.lifecycle import ClientSettings, RunRequest, blocking\n"
            "from jobset_core.models import JobSet\n"
            "js = JobSet.model_validate_json(sys.argv[2])\n"
            "request = RunRequest(jobset=js, namespace=sys.argv[3], identity={'run': 'r1'},\n"
            "                     backend='native', cancel_on_kill=False)\n"
            "blocking(ClientSettings(kubeconfig_path=sys.argv[1]),\n"
            "         lambda lifecycle: lifecycle.execute(request))\n"
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
        self, native: RunFace, flavour: str, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
    ) -> None:
        # The pod must still be running when the suspension reaches the Job controller,
        # or it finishes, stays (a finished pod is not deleted) and the Job completes: a
        # pod that ran 3 s lost that race on a loaded machine. Pods exit at one moment
        # instead, well after the suspension, and the resumed pod exits then too.
        job = crjob("w", finish_at=finish_at(25))
        sub = await native.submit(manifest("nap", job), namespace=cluster_namespace)
        selector = f"{labels.JOBSET_NAME}=nap"

        def phases() -> list[str]:
            found = devcluster.core.list_namespaced_pod(cluster_namespace, label_selector=selector)
            return [p.status.phase for p in found.items]

        await until(lambda: "Running" in phases(), desc="a running pod")
        await native.set_suspend(sub.handle, True)
        assert (await native.status(sub.handle)).phase is Phase.SUSPENDED
        assert all(j.spec.suspend for j in jobs_of(devcluster, cluster_namespace, "nap"))
        deadline = time.monotonic() + 60
        while left := phases():
            if time.monotonic() > deadline:
                pytest.fail(f"the suspended Job's pods stayed: {left}")
            await asyncio.sleep(0.3)
        await native.set_suspend(sub.handle, False)
        outcome = await native.wait(sub.handle, timeout=60)
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 0)

    async def test_a_foreign_job_in_the_way_is_reported(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        # A status line may come first (the run as seen before the pass that meets the Job).
        assert (seen[-1].kind, seen[-1].reason) == ("creation-failed", "JobCreationFailed")
        assert {p.kind for p in seen[:-1]} <= {"status"}

    async def test_nothing_moves_without_a_process_and_an_adopting_retry_hands_back_the_restart(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
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
        self, native: RunFace, cluster_namespace: str, devcluster: Any
    ) -> None:
        sub = await native.submit(manifest("wide", crjob("w", 60)), namespace=cluster_namespace)
        assert len(jobs_of(devcluster, cluster_namespace, "wide")) == 60  # all in the first pass
        outcome = await native.wait(sub.handle, timeout=90)
        assert (outcome.terminal_state, outcome.replicated_jobs[0].succeeded) == ("Completed", 60)

    async def test_too_many_jobs_are_refused_before_the_anchor(
        self, native: RunFace, cluster_namespace: str, devcluster: Any
    ) -> None:
        from jobset_core.errors import SpecError
        from jobset_core.limits import MAX_RENDERED_JOBS

        js = manifest("huge", crjob("w", MAX_RENDERED_JOBS + 1))
        with pytest.raises(SpecError, match=r"spec.replicatedJobs\[0\].replicas"):
            await native.submit(js, namespace=cluster_namespace)
        assert everything(devcluster, cluster_namespace, "huge") == []

    @pytest.mark.nojobset(False)  # the private apiserver is ready once it serves JobSets
    async def test_apiserver_stopped_and_restarted_during_a_wait(
        self, flavour: str, cluster_namespace: str, devcluster: Any, tmp_path: Path
    ) -> None:
        # The native backend talks to a private kube-apiserver (same etcd); while it is down
        # the run cannot be reconciled, but its Jobs finish; the wait resumes after it is back.
        from tests.core.test_run_controller import PrivateApiServer

        server = PrivateApiServer(devcluster, tmp_path)
        server.start()
        running = threading.Event()
        over = threading.Event()  # the test ended: never start the server again
        problems: list[BaseException] = []
        restarted_at: list[float] = []

        def outage() -> None:
            try:
                if not running.wait(60):
                    raise AssertionError("the run never started")
                if over.is_set():
                    return
                server.stop()
                done = f"{labels.JOBSET_NAME}=outage"

                def finished() -> bool:
                    jobs = devcluster.batch.list_namespaced_job(
                        cluster_namespace, label_selector=done
                    ).items
                    return len(jobs) == 2 and all(j.status.succeeded == 1 for j in jobs)

                devcluster.wait_for(finished, timeout=60, desc="the Jobs to finish")
                time.sleep(1)
                if over.is_set():  # a start now would outlive the test (a leaked apiserver)
                    return
                restarted_at.append(time.monotonic())
                server.start()
            except BaseException as error:  # reported by the test body
                problems.append(error)

        def note(progress: Progress) -> None:
            if progress.phase is Phase.RUNNING:
                running.set()

        thread = threading.Thread(target=outage, daemon=True)
        try:
            async with open_backend(flavour, server.kubeconfig) as native:
                js = manifest("outage", crjob("w", 2, run="3"))
                sub = await native.submit(js, namespace=cluster_namespace)
                thread.start()
                outcome = await native.wait(sub.handle, timeout=150, on_progress=note)
                thread.join(30)
                returned_at = time.monotonic()
        finally:
            over.set()
            if thread.is_alive():
                running.set()  # let it see the end rather than wait for a start
                await asyncio.to_thread(thread.join, 130)
            server.stop()
        assert not problems, problems
        assert restarted_at and returned_at > restarted_at[0]
        assert (outcome.terminal_state, outcome.replicated_jobs[0].succeeded) == ("Completed", 2)

    async def test_forced_410_relists(
        self, cluster_namespace: str, devcluster: Any, tmp_path: Path
    ) -> None:
        # A watch the server ends with 410 Gone (its resourceVersion expired: a compaction, or
        # a watch cache that moved on) makes the informers list again, and the run is still
        # followed. The fault proxy sends the 410 ERROR event a server sends, once the
        # informers' watches are idle. (A watch from resourceVersion 1 is not enough: on a
        # cluster younger than its first compaction, the API server's watch caches of
        # built-in kinds still hold it.)
        kubeconfig = tmp_path / "proxied.kubeconfig"  # the proxy ends TLS: a token
        with FaultProxy(devcluster.state_dir) as proxy:
            proxy.admin_kubeconfig(kubeconfig, user="forced-410", namespace=cluster_namespace)
            async with Client(ClientSettings(kubeconfig_path=str(kubeconfig))) as client:
                observer = Observer(client, scope="run")
                run = Lifecycle(observer)
                js = manifest("stale", crjob("w", never_finish="true"))
                request = RunRequest(jobset=js, namespace=cluster_namespace, backend="native")
                sub = (await run.start(request)).submission
                target = run.runs.backend("native").target(sub.handle)
                started = time.monotonic()
                async with observer.track(target) as tracked:
                    # the anchor's, the Jobs', the pods' and the Events' watches, quiet
                    while not tracked.observation().jobs or proxy.open_streams() < 4:
                        await asyncio.sleep(0.1)
                        assert time.monotonic() - started < 30, proxy.open_streams()
                    await asyncio.sleep(1.0)
                    listed = observer.stats()["lists"]
                    assert proxy.cut_watches("gone", logs=False) >= 4
                    # counted as a relist, and listed for real (not resumed where it was)
                    while observer.stats()["relists"] < 1 or observer.stats()["lists"] <= listed:
                        await asyncio.sleep(0.1)
                        assert time.monotonic() - started < 60, observer.stats()
                    while not tracked.observation().synced or not tracked.observation().jobs:
                        await tracked.changed(1)
                        assert time.monotonic() - started < 60, observer.stats()
                    stats = observer.stats()
                await observer.aclose()
        assert stats["relists"] >= 1, stats
        assert proxy.stats.cut_gone >= 4, proxy.stats


async def test_a_start_meeting_its_anchor_being_deleted_waits_then_creates_its_own(
    native: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    """The native twin: the anchor being deleted holds the name until it is gone."""
    jobset = manifest("held", crjob("workers", never_finish="true"))

    first, second = await start_meeting_a_namesake_being_deleted(
        native, jobset, cluster_namespace, devcluster
    )
    assert second.created and second.handle.uid != first.handle.uid
    await native.cancel(second.handle)


def completed_jobs(anchor: Any, replicas: int) -> list[dict[str, Any]]:
    """The run's Jobs as a waiter sees them once all of them completed (what settles its
    end): owned by the anchor, of its current attempt."""
    return [
        {
            "metadata": {
                "name": f"{anchor.name}-w-{index}",
                "namespace": anchor.namespace,
                "uid": f"job-{index}",
                "labels": {
                    labels.JOBSET_NAME: anchor.name,
                    labels.REPLICATED_JOB_NAME: "w",
                    labels.JOB_INDEX: str(index),
                    labels.RESTART_ATTEMPT: "0",
                },
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": anchor.name,
                        "uid": anchor.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"parallelism": 1, "completions": 1},
            "status": {
                "succeeded": 1,
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        }
        for index in range(replicas)
    ]


@pytest.mark.cluster
async def test_a_settled_end_is_recorded_over_a_newer_anchor(
    cluster_namespace: str, devcluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A settled end is written after its verdict, with the anchor's resourceVersion as its
    precondition: when someone wrote the anchor meanwhile (the API server answers 409), the
    write plans again from what they wrote and the same Jobs, and the anchor ends up holding
    the end; a run deleted meanwhile is nothing to record."""
    from jobset_core.backends._anchor import parse_anchor, status_patch
    from jobset_core.backends._native_exec import plan_pass
    from jobset_core.backends.native import NativeBackend
    from jobset_core.lifecycle import prepare
    from jobset_core.models import JobSetStatus
    from jobset_core.observe import Kind
    from jobset_core.resources import CONFIG_MAP

    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    async with Client(settings) as client:
        backend = NativeBackend(client)
        ends = []
        for name in ("raced", "deleted"):
            request = RunRequest(
                jobset=manifest(name, crjob("w", 2, never_finish="true")),
                namespace=cluster_namespace,
                backend="native",
            )
            prepared, marks = prepare(request)
            submission = await backend.submit(prepared, marks=marks)
            found = submission.obj
            anchor = parse_anchor(found)
            jobs = completed_jobs(anchor, 2)
            step = plan_pass(anchor, jobs, dt.datetime.now(dt.UTC))
            assert step.settled and step.status_patch is not None
            # someone else writes first: a status that does not end the run
            counts = status_patch(JobSetStatus(restarts=0), anchor.resource_version)
            await client.patch(CONFIG_MAP, name, counts, namespace=cluster_namespace)
            if name == "deleted":
                await backend.cancel(submission.handle)
            remembered: list[Any] = []
            backend._write_settled(
                submission.handle,
                found,
                step.status_patch,
                jobs,
                lambda kind, obj, kept=remembered: kept.append((kind, obj)),
            )
            # the observer holds the end at once, before the write
            assert parse_anchor(remembered[0][1]).status.terminal_state == "Completed"
            await backend.flush()
            ends.append((submission, remembered))
        (raced, remembered), _ = ends
        now = await client.get(CONFIG_MAP, "raced", namespace=cluster_namespace)
        assert parse_anchor(now).status.terminal_state == "Completed"
        kind, last = remembered[-1]
        assert kind is Kind.ANCHOR
        assert last["metadata"]["resourceVersion"] == now["metadata"]["resourceVersion"]
        await backend.cancel(raced.handle)
    assert not [r for r in caplog.records if "not recorded" in r.getMessage()]
