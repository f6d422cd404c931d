"""The core's lifecycle on the controller backend, against the real local control plane
(upstream JobSet controller).

Every test runs twice, through :class:`tests.core._runs.RunFace`: on the test's event loop
(``async``) and through the blocking façade on a thread of its own (``blocking``). Pods are
scripted by the devcluster's annotations (``devcluster/run-seconds``, ``exit-code``,
``fail-until-attempt``, ``never-finish``, ``termination-message``, ``log``); see
``tests/cluster/README.md``. Setup and independent checks use the official client through the
``devcluster`` fixture.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core.blocking import run as blocking_run
from jobset_core.client import Client, ClientSettings
from jobset_core.errors import (
    CreationFailed,
    Forbidden,
    IdentityMismatch,
    JobSetGone,
    SpecError,
    WaitTimeout,
)
from jobset_core.lifecycle import Deadline, Handle, Lifecycle, RunRequest
from jobset_core.models import JobSet, load_jobset
from jobset_core.observe import Observer
from jobset_core.outcome import Outcome, Phase, Progress
from jobset_core.resources import EVENT
from tests.cluster.bodies import in_turn
from tests.core._exclusive import NEVER_FINISH, end_once_all_live, exclusivity_problems
from tests.core._runs import (
    FLAVOURS,
    RunFace,
    open_face,
    start_meeting_a_namesake_being_deleted,
)

pytestmark = pytest.mark.cluster

WAIT = 90.0
SLICE = "devcluster/slice"
KIND = "controller"


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def backend(flavour: str, devcluster: Any) -> AsyncIterator[RunFace]:
    async with open_face(flavour, devcluster.kubeconfig, KIND) as face:
        yield face


# ---------------------------------------------------------------------------------- manifests


def rjob(
    name: str,
    replicas: int = 1,
    *,
    pods: int = 1,
    run: str = "0.5",
    backoff: int = 0,
    annotations: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A replicated job whose pods run ``run`` seconds (then do what ``annotations`` say)."""
    notes = {"devcluster/run-seconds": run, **(annotations or {})}
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": backoff,
                "template": {
                    "metadata": {"annotations": notes},
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/w:1"}]},
                },
            }
        },
        **extra,
    }


def manifest(name: str, *rjobs: dict[str, Any], annotations: Any = None, **spec: Any) -> JobSet:
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return load_jobset(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": metadata,
            "spec": {"replicatedJobs": list(rjobs), **spec},
        }
    )


FAIL = {"devcluster/exit-code": "1"}
IDENTITY = {"run": "test"}


class Recorder:
    """Collects progress events (thread-safe) and signals when one matches."""

    def __init__(self, when: Callable[[Progress], bool] = lambda _: False) -> None:
        self.events: list[Progress] = []
        self.matched = threading.Event()
        self._when = when

    def __call__(self, progress: Progress) -> None:
        self.events.append(progress)
        if self._when(progress):
            self.matched.set()

    def counts(self, rjob_name: str) -> list[tuple[int, int, int, int]]:
        out = []
        for event in self.events:
            for c in event.replicated_jobs:
                if c.name == rjob_name:
                    out.append((c.ready, c.active, c.succeeded, c.failed))
        return out


async def run(
    backend: RunFace, jobset: JobSet, namespace: str, **wait: Any
) -> tuple[Handle, Outcome, Recorder]:
    recorder = wait.pop("recorder", None) or Recorder()
    submission = await backend.submit(jobset, namespace=namespace, identity=IDENTITY)
    outcome = await backend.wait(
        submission.handle, timeout=wait.pop("timeout", WAIT), on_progress=recorder, **wait
    )
    return submission.handle, outcome, recorder


def objects_left(devcluster: Any, namespace: str) -> dict[str, list[str]]:
    """Every JobSet, Job, pod and Service in the namespace, by kind (independent check)."""
    jobsets = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )["items"]
    return {
        "jobsets": [j["metadata"]["name"] for j in jobsets],
        "jobs": [j.metadata.name for j in devcluster.batch.list_namespaced_job(namespace).items],
        "pods": [p.metadata.name for p in devcluster.core.list_namespaced_pod(namespace).items],
        "services": [
            s.metadata.name for s in devcluster.core.list_namespaced_service(namespace).items
        ],
    }


def nothing_left(devcluster: Any, namespace: str) -> Callable[[], bool]:
    return lambda: not any(objects_left(devcluster, namespace).values())


# ---------------------------------------------------------------------------------- success


async def test_success_all_with_result_logs_and_progress(
    backend: RunFace, cluster_namespace: str
) -> None:
    driver = rjob(
        "driver",
        annotations={
            "devcluster/termination-message": '{"accuracy": 0.93}',
            "devcluster/log": "starting\ndone",
        },
    )
    jobset = manifest(
        "all", driver, rjob("workers", 2, pods=2), coordinator={"replicatedJob": "driver"}
    )
    handle, outcome, recorder = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED and outcome.succeeded
    assert outcome.reason == "AllJobsCompleted"
    assert outcome.result == {"accuracy": 0.93}
    assert outcome.uid == handle.uid and outcome.backend == "controller"
    assert [(c.name, c.succeeded) for c in outcome.replicated_jobs] == [
        ("driver", 1),
        ("workers", 2),
    ]
    assert outcome.duration_seconds is not None and outcome.finished_at
    # One event per change, never the same twice in a row; the last one is the terminal state.
    lines = [e.line() for e in recorder.events]
    assert all(a != b for a, b in itertools.pairwise(lines))
    assert recorder.events[-1].phase is Phase.COMPLETED
    assert any(e.phase is Phase.RUNNING for e in recorder.events)
    assert await backend.logs(handle) == ["starting", "done"]
    status = await backend.status(handle)
    assert status.phase is Phase.COMPLETED and status.result == {"accuracy": 0.93}
    assert (await backend.jobset_status(handle)).terminal_state == "Completed"
    assert await backend.failed_pod_logs(handle) == {}


async def test_success_any_with_targets_ends_other_jobs(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest(
        "any",
        rjob("driver"),
        rjob("workers", 2, annotations={"devcluster/never-finish": "true"}),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["driver"]},
    )
    _handle, outcome, _ = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    counts = {c.name: c for c in outcome.replicated_jobs}
    assert counts["driver"].succeeded == 1 and counts["workers"].succeeded == 0
    # Upstream deletes the still-active worker Jobs of a completed JobSet.
    devcluster.wait_for(
        lambda: (
            not [
                j
                for j in devcluster.batch.list_namespaced_job(cluster_namespace).items
                if "workers" in j.metadata.name and j.metadata.deletion_timestamp is None
            ]
        ),
        timeout=60,
        desc="active worker Jobs deleted",
    )


# ---------------------------------------------------------------------------------- failure


async def test_fail_jobset_on_matching_reason(backend: RunFace, cluster_namespace: str) -> None:
    jobset = manifest(
        "failfast",
        rjob("workers", annotations={**FAIL, "devcluster/log": "boom"}),
        failurePolicy={
            "maxRestarts": 3,
            "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}],
        },
    )
    handle, outcome, _ = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.FAILED and not outcome.succeeded
    assert outcome.reason == "FailJobSetFailurePolicyAction"
    assert outcome.restarts == 0
    assert outcome.failed_job == "failfast-workers-0"
    logs = await backend.failed_pod_logs(handle, tail_lines=5)
    assert list(logs.values()) == ["boom\n"] or list(logs.values()) == ["boom"]


async def test_restart_jobset_up_to_max_then_reached_max_restarts(
    backend: RunFace, cluster_namespace: str
) -> None:
    jobset = manifest("maxed", rjob("workers", annotations=FAIL), failurePolicy={"maxRestarts": 2})
    _, outcome, recorder = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.FAILED
    assert outcome.reason == "ReachedMaxRestarts"
    assert (outcome.restarts, outcome.restarts_count_towards_max) == (2, 2)
    restarting = [e for e in recorder.events if e.kind == "restarting"]
    assert {e.restarts for e in restarting} == {1, 2}
    assert all(e.reason == "DefaultFailurePolicy" for e in restarting)


async def test_restart_ignoring_max_restarts(backend: RunFace, cluster_namespace: str) -> None:
    jobset = manifest(
        "ignoremax",
        rjob("workers", annotations={"devcluster/fail-until-attempt": "2"}),
        failurePolicy={
            "maxRestarts": 1,
            "rules": [{"name": "always", "action": "RestartJobSetAndIgnoreMaxRestarts"}],
        },
    )
    _, outcome, recorder = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    assert (outcome.restarts, outcome.restarts_count_towards_max) == (2, 0)
    assert any(e.reason == "FailurePolicy_always" for e in recorder.events)


async def test_on_restart_return_names_the_failed_job(
    backend: RunFace, cluster_namespace: str
) -> None:
    jobset = manifest(
        "ret",
        rjob("workers", 2, annotations={"devcluster/fail-until-attempt": "1"}),
        failurePolicy={"maxRestarts": 1},
    )
    handle, first, _ = await run(backend, jobset, cluster_namespace, on_restart="return")
    assert first.phase is Phase.RESTARTING and first.terminal_state is None
    assert first.restarts == 1
    assert first.reason == "DefaultFailurePolicy"
    assert first.failed_job in {"ret-workers-0", "ret-workers-1"}
    assert "BackoffLimitExceeded" in first.message
    # The next wait carries on from restart 1 to the end.
    final = await backend.wait(handle, timeout=WAIT, on_restart="return")
    assert final.phase is Phase.COMPLETED and final.restarts == 1


# ---------------------------------------------------------------------------------- ordering


def first_started(counts: list[tuple[int, int, int, int]]) -> int | None:
    return next((i for i, c in enumerate(counts) if any(c)), None)


async def test_in_order_startup(backend: RunFace, cluster_namespace: str) -> None:
    jobset = manifest(
        "inorder",
        rjob("first", 2, run="3"),
        rjob("second", run="0.5"),
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    _, outcome, recorder = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    first, second = recorder.counts("first"), recorder.counts("second")
    started = first_started(second)
    assert started is not None
    # The second replicated job starts only once every Job of the first is ready.
    ready, _, succeeded, _ = first[started]
    assert ready + succeeded == 2, (first, second)
    assert any(e.reason == "InOrderStartupPolicyInProgress" for e in recorder.events)


async def test_depends_on_complete(backend: RunFace, cluster_namespace: str) -> None:
    jobset = manifest(
        "deps",
        rjob("prepare", run="1"),
        rjob("train", 2, dependsOn=[{"name": "prepare", "status": "Complete"}]),
    )
    _, outcome, recorder = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    started = first_started(recorder.counts("train"))
    assert started is not None
    assert recorder.counts("prepare")[started][2] == 1  # prepare had succeeded


# ---------------------------------------------------------------------------------- lifecycle


async def test_suspend_then_resume(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("susp", rjob("workers", 2), suspend=True)
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    handle = submission.handle
    with pytest.raises(WaitTimeout):
        await backend.wait(handle, timeout=3)
    assert (await backend.status(handle)).phase is Phase.SUSPENDED
    jobs = devcluster.batch.list_namespaced_job(cluster_namespace).items
    assert len(jobs) == 2 and all(j.spec.suspend for j in jobs)
    assert not devcluster.core.list_namespaced_pod(cluster_namespace).items
    await backend.set_suspend(handle, False)
    outcome = await backend.wait(handle, timeout=WAIT)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)


async def test_exclusive_placement_gives_distinct_slices(
    backend: RunFace, exclusive_placement: None, cluster_namespace: str, devcluster: Any
) -> None:
    # The pods run until all four run at once, then end together (tests/core/_exclusive.py).
    # Slices, not zones: the run holds two of the devcluster's four, not every kwok node.
    jobset = manifest(
        "excl",
        in_turn(rjob("workers", 2, pods=2, annotations=NEVER_FINISH)),
        annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": SLICE},
    )
    selector = "jobset.sigs.k8s.io/jobset-name=excl"
    (_, outcome, _), live = await asyncio.gather(
        run(backend, jobset, cluster_namespace),
        end_once_all_live(devcluster.core, cluster_namespace, selector, 4),
    )
    assert live, "the four pods never ran at once"
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    slices = {n: lbl[SLICE] for n, lbl in devcluster.node_labels().items() if SLICE in lbl}
    pods = devcluster.core.list_namespaced_pod(cluster_namespace).items
    assert len({pod.metadata.labels["job-name"] for pod in pods}) == 2
    assert not exclusivity_problems(pods, slices, lambda p: p.metadata.labels["job-name"])


async def test_ttl_deletes_the_finished_jobset(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("ttl", rjob("workers"), ttlSecondsAfterFinished=1)
    _, outcome, _ = await run(backend, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    devcluster.wait_for(nothing_left(devcluster, cluster_namespace), 60, desc="TTL deletion")


async def test_timeout_leaves_the_jobset_running(backend: RunFace, cluster_namespace: str) -> None:
    jobset = manifest("slow", rjob("workers", annotations={"devcluster/never-finish": "true"}))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    started = time.monotonic()
    with pytest.raises(WaitTimeout, match="did not finish within 2s"):
        await backend.wait(submission.handle, timeout=2)
    assert time.monotonic() - started < 10
    assert (await backend.status(submission.handle)).terminal_state is None


async def test_cancel_leaves_nothing_behind(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("cancel", rjob("workers", 2, annotations={"devcluster/never-finish": "true"}))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    handle = submission.handle
    devcluster.wait_for(
        lambda: len(devcluster.core.list_namespaced_pod(cluster_namespace).items) == 2,
        60,
        desc="pods running",
    )
    assert objects_left(devcluster, cluster_namespace)["services"] == ["cancel"]
    started = time.monotonic()
    await backend.cancel(handle)
    assert time.monotonic() - started < 5
    await backend.cancel(handle)  # twice is fine
    devcluster.wait_for(nothing_left(devcluster, cluster_namespace), 60, desc="everything gone")


async def test_delete_wait_returns_when_everything_is_gone(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("del", rjob("workers", 2, annotations={"devcluster/never-finish": "true"}))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    devcluster.wait_for(
        lambda: len(devcluster.core.list_namespaced_pod(cluster_namespace).items) == 2, 60
    )
    await backend.delete(submission.handle, wait=True, timeout=60)
    assert objects_left(devcluster, cluster_namespace) == {
        "jobsets": [],
        "jobs": [],
        "pods": [],
        "services": [],
    }


async def test_a_start_meeting_its_namesake_being_deleted_waits_then_creates_its_own(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    """A try ends once its delete is accepted; the next one's start waits for the old run
    to go (never adopting it, never failing on it), then creates its own."""
    jobset = manifest("held", rjob("workers", annotations={"devcluster/never-finish": "true"}))

    first, second = await start_meeting_a_namesake_being_deleted(
        backend, jobset, cluster_namespace, devcluster
    )
    assert second.created and second.handle.uid != first.handle.uid
    await backend.cancel(second.handle)


# ---------------------------------------------------------------------------------- identity


async def test_submit_is_idempotent_and_adopts_only_its_own(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("ident", rjob("workers", annotations={"devcluster/never-finish": "true"}))
    first = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    again = await backend.submit(
        jobset, namespace=cluster_namespace, identity=IDENTITY, expected_uid=first.handle.uid
    )
    assert first.created and not again.created
    assert again.handle == first.handle
    with pytest.raises(IdentityMismatch, match="identity labels differ"):
        await backend.submit(jobset, namespace=cluster_namespace, identity={"run": "other"})
    with pytest.raises(IdentityMismatch, match="uid"):
        await backend.submit(
            jobset, namespace=cluster_namespace, identity=IDENTITY, expected_uid="not-it"
        )
    with pytest.raises(IdentityMismatch):
        await backend.attach("ident", namespace=cluster_namespace, identity={"run": "other"})
    assert await backend.attach("ident", namespace=cluster_namespace, uid=first.handle.uid) == (
        first.handle
    )
    assert objects_left(devcluster, cluster_namespace)["jobsets"] == ["ident"]
    # A namesake created by someone else is never adopted.
    foreign = manifest("foreign", rjob("workers"))
    devcluster.create_jobset(cluster_namespace, foreign.to_dict())
    with pytest.raises(IdentityMismatch):
        await backend.submit(foreign, namespace=cluster_namespace, identity=IDENTITY)


async def test_invalid_jobset_creates_nothing(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    bad = manifest(
        "Bad_Name",
        rjob("workers"),
        rjob("workers"),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["missing"]},
    )
    with pytest.raises(SpecError) as caught:
        await backend.submit(bad, namespace=cluster_namespace, identity=IDENTITY)
    paths = {p.path for p in caught.value.problems}
    assert "metadata.name" in paths
    assert any(p.startswith("spec.successPolicy") for p in paths), paths
    assert len(caught.value.problems) >= 3
    assert objects_left(devcluster, cluster_namespace)["jobsets"] == []


async def test_creation_failed_surfaces_promptly(
    flavour: str, cluster_namespace: str, devcluster: Any
) -> None:
    # parallelism without completions: the webhook makes the Job Indexed, and Kubernetes then
    # rejects it ("completions required"); upstream only emits JobCreationFailed events.
    broken = rjob("workers")
    del broken["template"]["spec"]["completions"]
    broken["template"]["spec"]["parallelism"] = 2
    jobset = manifest("broken", broken)
    async with open_face(flavour, devcluster.kubeconfig, KIND) as checked:
        with pytest.raises(SpecError):
            await checked.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    # Offline checks off, the server's dry run of the child Job refuses it on its JobSet path.
    async with open_face(flavour, devcluster.kubeconfig, KIND, validate=False) as server:
        with pytest.raises(SpecError) as refused:
            await server.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    paths = [p.path for p in refused.value.problems]
    assert paths == ["spec.replicatedJobs[0].template.spec.completions"], refused.value
    # Both off (a policy that changed after the submit): the controller's events tell.
    options = {"validate": False, "server_checks": False}
    async with open_face(flavour, devcluster.kubeconfig, KIND, **options) as unchecked:
        submission = await unchecked.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
        recorder = Recorder()
        started = time.monotonic()
        with pytest.raises(CreationFailed) as caught:
            await unchecked.wait(submission.handle, timeout=60, on_progress=recorder)
    assert time.monotonic() - started < 30
    assert caught.value.reason == "JobCreationFailed"
    assert "completions" in str(caught.value)
    assert recorder.events[-1].kind == "creation-failed"


async def test_headless_service_creation_failure_surfaces(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    from kubernetes import client as k8s

    quota = k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="no-services"),
        spec=k8s.V1ResourceQuotaSpec(hard={"services": "0"}),
    )
    devcluster.core.create_namespaced_resource_quota(cluster_namespace, quota)
    jobset = manifest("nosvc", rjob("w"))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    with pytest.raises(CreationFailed) as caught:
        await backend.wait(submission.handle, timeout=60)
    assert caught.value.reason == "HeadlessServiceCreationFailed"
    assert "quota" in str(caught.value)


async def test_two_jobsets_in_one_namespace_never_cross_talk(
    backend: RunFace, cluster_namespace: str
) -> None:
    ok = manifest("pair", rjob("w", annotations={"devcluster/log": "from pair"}))
    bad = manifest("pair-w", rjob("w", annotations={**FAIL, "devcluster/log": "from pair-w"}))
    a = await backend.submit(ok, namespace=cluster_namespace, identity=IDENTITY)
    b = await backend.submit(bad, namespace=cluster_namespace, identity=IDENTITY)
    ra, rb = Recorder(), Recorder()
    out_b = await backend.wait(b.handle, timeout=WAIT, on_progress=rb)
    out_a = await backend.wait(a.handle, timeout=WAIT, on_progress=ra)
    assert (out_a.name, out_a.phase) == ("pair", Phase.COMPLETED)
    assert (out_b.name, out_b.phase) == ("pair-w", Phase.FAILED)
    assert all(e.phase is not Phase.FAILED for e in ra.events)
    assert await backend.logs(a.handle) == ["from pair"]
    assert await backend.logs(b.handle) == ["from pair-w"]
    assert list(await backend.failed_pod_logs(a.handle)) == []
    assert len(await backend.failed_pod_logs(b.handle)) == 1


# ---------------------------------------------------------------------------------- watch


async def test_forced_410_relists_and_still_sees_the_end(
    cluster_namespace: str, devcluster: Any
) -> None:

    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    async with Client(settings) as client:
        observer = Observer(client, scope="run")
        run = Lifecycle(observer)
        jobset = manifest("gone", rjob("workers", run="1"))
        request = RunRequest(
            jobset=jobset, namespace=cluster_namespace, identity=IDENTITY, backend=KIND
        )
        submission = (await run.start(request)).submission
        # resourceVersion 1 is far older than the watch cache keeps: the server answers 410,
        # every informer lists again, and the wait still sees the end.
        target = run.runs.backend(KIND).target(submission.handle, since="1")
        async with observer.track(target) as tracked:
            waiting = request.but(deadline=Deadline(timeout=WAIT).begin(time.time()))
            verdict = await run.wait(waiting, submission.handle)
            stats = observer.stats()
            assert tracked.observation().jobset is not None
        await observer.aclose()
    assert verdict.kind == "completed"
    assert stats["relists"] >= 1, stats


#: ``sh -c`` it: run ``$2...`` while process ``$1`` lives (checked every second).
_WATCHDOG = (
    'owner=$1; shift; "$@" & child=$!; '
    'while kill -0 "$owner" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done; '
    'kill -KILL "$child" 2>/dev/null; wait "$child"'
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateApiServer:
    """A second kube-apiserver on the devcluster's etcd, started from the recorded command line
    (``.devcluster/state.json``) on its own port: stopping it disturbs no other test."""

    def __init__(self, devcluster: Any, workdir: Path) -> None:
        state_dir = devcluster.state_dir
        if state_dir is None or not (state_dir / "state.json").exists():
            pytest.skip("needs the devcluster's recorded state (not an external kubeconfig)")
        state = json.loads((state_dir / "state.json").read_text())
        self.port = _free_port()
        replace = {"--secure-port": str(self.port), "--cert-dir": str(workdir / "certs")}
        argv = []
        for arg in state["components"]["kube-apiserver"]["argv"]:
            key = arg.split("=", 1)[0]
            argv.append(f"{key}={replace[key]}" if key in replace else arg)
        self.argv, self.cwd, self.log = argv, state_dir, workdir / "apiserver.log"
        config = yaml.safe_load(devcluster.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                # Under a watchdog that kills it once the test process is gone, also when that
                # was killed outright and no cleanup ran (a killed pytest had left these
                # running for hours). Not the parent-death signal: a test thread starts it.
                ["sh", "-c", _WATCHDOG, "watchdog", str(os.getpid()), *self.argv],
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=dict(os.environ, HOME=str(self.cwd)),
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"private kube-apiserver exited: {self.log.read_text()[-2000:]}")
            if self._ready():
                return
            time.sleep(0.3)
        pytest.fail("private kube-apiserver did not become ready")

    def _ready(self) -> bool:
        settings = ClientSettings(kubeconfig_path=str(self.kubeconfig))

        async def served() -> bool:
            async with Client(settings) as client:
                return await client.jobset_api_served()

        try:
            return blocking_run(served)
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


@pytest.fixture
def private_apiserver(devcluster: Any, tmp_path: Path) -> Iterator[PrivateApiServer]:
    server = PrivateApiServer(devcluster, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_apiserver_stopped_and_restarted_during_a_watch(
    flavour: str,
    cluster_namespace: str,
    devcluster: Any,
    private_apiserver: PrivateApiServer,
) -> None:
    jobset = manifest("outage", rjob("workers", 2, run="4"))
    recorder = Recorder(lambda p: p.phase is Phase.RUNNING)
    problems: list[BaseException] = []
    restarted_at: list[float] = []

    def outage() -> None:
        try:
            if not recorder.matched.wait(60):
                raise AssertionError("the JobSet never ran")
            private_apiserver.stop()
            # The JobSet finishes while our API server is down (the controller uses the other).
            devcluster.wait_jobset_terminal(cluster_namespace, "outage", timeout=60)
            time.sleep(1)
            restarted_at.append(time.monotonic())
            private_apiserver.start()
        except BaseException as error:  # reported by the test body
            problems.append(error)

    async with open_face(flavour, private_apiserver.kubeconfig, KIND) as backend:
        submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
        thread = threading.Thread(target=outage, daemon=True)
        thread.start()
        outcome = await backend.wait(submission.handle, timeout=150, on_progress=recorder)
        thread.join(30)
        returned_at = time.monotonic()
    assert not problems, problems
    # The end was seen through the restarted server: the JobSet finished while it was down.
    assert restarted_at and returned_at > restarted_at[0]
    assert outcome.phase is Phase.COMPLETED, (outcome.reason, outcome.message)
    assert outcome.replicated_jobs[0].succeeded == 2


async def test_wait_on_a_deleted_jobset_fails_fast(
    backend: RunFace, cluster_namespace: str
) -> None:
    jobset = manifest("vanish", rjob("workers", annotations={"devcluster/never-finish": "true"}))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    await backend.delete(submission.handle, wait=True, timeout=60)
    with pytest.raises(JobSetGone, match="was deleted"):
        await backend.wait(submission.handle, timeout=30)


async def test_deleted_while_waiting_ends_the_wait(
    backend: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    jobset = manifest("doomed", rjob("w", annotations={"devcluster/never-finish": "true"}))
    submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
    recorder = Recorder(lambda p: p.phase is Phase.RUNNING)

    def delete_when_running() -> None:
        if recorder.matched.wait(60):
            devcluster.delete_jobset(cluster_namespace, "doomed")

    thread = threading.Thread(target=delete_when_running, daemon=True)
    thread.start()
    started = time.monotonic()
    with pytest.raises(JobSetGone, match="was deleted"):
        await backend.wait(submission.handle, timeout=60, on_progress=recorder)
    assert time.monotonic() - started < 30
    thread.join(5)


async def test_async_wait_can_be_cancelled(cluster_namespace: str, devcluster: Any) -> None:
    async with open_face("async", devcluster.kubeconfig, KIND) as backend:
        jobset = manifest("cancelwait", rjob("w", annotations={"devcluster/never-finish": "true"}))
        submission = await backend.submit(jobset, namespace=cluster_namespace, identity=IDENTITY)
        task = asyncio.ensure_future(backend.wait(submission.handle, timeout=60))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _limited_kubeconfig(devcluster: Any, namespace: str, workdir: Path) -> Path:
    """A kubeconfig for a service account that may run JobSets but not read Events."""
    from kubernetes import client as k8s

    rbac = k8s.RbacAuthorizationV1Api(devcluster.api_client())
    devcluster.core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="runner"))
    )
    rules = [
        ("jobset.x-k8s.io", "jobsets", ["get", "list", "watch", "create", "delete", "patch"]),
        ("", "pods", ["get", "list", "watch"]),
        ("", "pods/log", ["get"]),
        ("batch", "jobs", ["get", "list", "watch"]),
    ]
    rbac.create_namespaced_role(
        namespace,
        k8s.V1Role(
            metadata=k8s.V1ObjectMeta(name="runner"),
            rules=[k8s.V1PolicyRule(api_groups=[g], resources=[r], verbs=v) for g, r, v in rules],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        k8s.V1RoleBinding(
            metadata=k8s.V1ObjectMeta(name="runner"),
            role_ref=k8s.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="runner"
            ),
            subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name="runner", namespace=namespace)],
        ),
    )
    token = devcluster.core.create_namespaced_service_account_token(
        "runner",
        namespace,
        k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
        ),
    ).status.token
    config = yaml.safe_load(devcluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path = workdir / "limited-kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_wait_without_rbac_for_events_still_finishes(
    flavour: str, cluster_namespace: str, devcluster: Any, tmp_path: Path
) -> None:
    kubeconfig = _limited_kubeconfig(devcluster, cluster_namespace, tmp_path)
    settings = ClientSettings(kubeconfig_path=str(kubeconfig))
    async with Client(settings) as plain:
        with pytest.raises(Forbidden):  # the premise
            await plain.list(EVENT, namespace=cluster_namespace)
    async with open_face(flavour, kubeconfig, KIND) as limited:
        jobset = manifest("limited", rjob("w", annotations={"devcluster/termination-message": "7"}))
        _, outcome, _ = await run(limited, jobset, cluster_namespace)
    assert outcome.phase is Phase.COMPLETED and outcome.result == 7


# ---------------------------------------------------------------------------------- parity

PARITY = [
    pytest.param({}, {}, ("Completed", "AllJobsCompleted", 0), id="success"),
    pytest.param(
        {"devcluster/fail-until-attempt": "1"},
        {"failurePolicy": {"maxRestarts": 2}},
        ("Completed", "AllJobsCompleted", 1),
        id="restart-then-success",
    ),
    pytest.param(
        FAIL,
        {"failurePolicy": {"maxRestarts": 1}},
        ("Failed", "ReachedMaxRestarts", 1),
        id="reached-max-restarts",
    ),
]


@pytest.mark.parametrize(("notes", "spec", "end"), PARITY)
async def test_same_manifest_same_end_on_both_backends(
    notes: dict[str, str],
    spec: dict[str, Any],
    end: tuple[str, str, int],
    devcluster: Any,
    cluster_namespace: str,
) -> None:
    """The controller and the native backend end a manifest the same way: terminal state,
    reason, restart count, and the restart-attempt label of the last attempt's pods."""
    ends, attempts = {}, {}
    for kind in ("controller", "native"):
        async with open_face("async", devcluster.kubeconfig, kind) as backend:  # type: ignore[arg-type]
            jobset = manifest(f"par-{kind}", rjob("w", 2, annotations=notes), **spec)
            submission = await backend.submit(
                jobset, namespace=cluster_namespace, identity=IDENTITY
            )
            outcome = await backend.wait(submission.handle, timeout=WAIT)
        ends[kind] = (outcome.terminal_state, outcome.reason, outcome.restarts)
        pods = devcluster.core.list_namespaced_pod(
            cluster_namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name=par-{kind}"
        ).items
        attempts[kind] = max(
            int(p.metadata.labels["jobset.sigs.k8s.io/restart-attempt"]) for p in pods
        )
    assert ends == {"controller": end, "native": end}
    assert attempts["controller"] == attempts["native"] == end[2]
