"""Following pod logs while a run is waited for, on both backends, against the devcluster.

The pods' logs are the devcluster log server's (``devcluster/log``, read when each request
comes, like a kubelet's log file); the selection, bounds and cursor are table-tested in
``test_log_plan.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.lifecycle import (
    ClientSettings,
    Deadline,
    Finished,
    Lifecycle,
    LogLine,
    LogOptions,
    Reporter,
    RunRequest,
    session,
)
from jobset_core.lifecycle._logs import CURSOR_ANNOTATION, FollowControl, Follower
from jobset_core.models import JobSet
from tests.core._runs import run_request

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


@pytest.fixture
async def run(devcluster: Any) -> AsyncIterator[Lifecycle]:
    async with fresh_run(devcluster) as made:
        yield made


async def logged(
    run: Lifecycle, js: JobSet, namespace: str, backend: str, *, timeout: float, logs: LogOptions
) -> tuple[Finished, list[LogLine]]:
    """Execute the run, its logs followed as ``logs`` says: how it ended, and the lines."""
    lines: list[LogLine] = []
    request = run_request(js, namespace, backend, timeout=timeout, logs=logs)
    return await run.execute(request, Reporter(log=lines.append)), lines


def fresh_run(devcluster: Any) -> Any:
    """A session of its own (a separate process, as far as the others know)."""
    return session(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig)))


def _waiting(namespace: str, backend: str, seconds: float, logs: LogOptions) -> RunRequest:
    return RunRequest(
        namespace=namespace,
        backend=backend,  # type: ignore[arg-type]
        deadline=Deadline(timeout=seconds).begin(time.time()),
        logs=logs,
        cancel_on_kill=False,
    )


def _rjob(name: str, replicas: int, notes: dict[str, str], parallel: int = 1) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": notes},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }
    job = {
        "backoffLimit": 0,
        "completions": parallel,
        "parallelism": parallel,
        "completionMode": "Indexed",
        "template": pod,
    }
    return {"name": name, "replicas": replicas, "template": {"spec": job}}


def _jobset(name: str, *rjobs: dict[str, Any], **spec: Any) -> JobSet:
    return JobSet.model_validate(
        {"metadata": {"name": name}, "spec": {"replicatedJobs": list(rjobs), **spec}}
    )


async def test_all_pods_of_every_attempt_with_their_prefix(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    """``all``: every pod's lines once, prefixed with the pod; a restarted attempt's new pods
    are picked up as they come."""
    js = _jobset(
        "alllogs",
        _rjob(
            "w",
            2,
            {
                "devcluster/log": "hello\nworld",
                "devcluster/run-seconds": "2",
                "devcluster/fail-until-attempt": "1",
            },
        ),
        failurePolicy={"maxRestarts": 1},
    )
    every = LogOptions(pods="all")
    finished, lines = await logged(run, js, cluster_namespace, backend, timeout=150, logs=every)
    assert finished.verdict.kind == "completed", finished.verdict
    pods = devcluster.core.list_namespaced_pod(
        cluster_namespace, label_selector=f"{labels.JOBSET_NAME}=alllogs"
    ).items
    second = {p.metadata.name for p in pods if p.metadata.labels[labels.RESTART_ATTEMPT] == "1"}
    assert len(second) == 2, [p.metadata.name for p in pods]
    shown = [line.shown() for line in lines if not line.notice]
    for name in second:  # the restarted attempt's pods, each line exactly once
        assert shown.count(f"[{name}] hello") == 1, shown
        assert shown.count(f"[{name}] world") == 1, shown
    assert [line for line in lines if line.notice] == []


async def test_the_total_cap_truncates_and_never_keeps_the_run_waiting(
    run: Lifecycle, backend: str, cluster_namespace: str
) -> None:
    text = "\n".join(f"line {i:04d}" for i in range(200))  # 10 bytes a line
    js = _jobset("chatty", _rjob("w", 1, {"devcluster/log": text, "devcluster/run-seconds": "2"}))
    started = time.monotonic()
    capped = LogOptions(max_bytes=55, max_bytes_per_second=None)
    finished, lines = await logged(run, js, cluster_namespace, backend, timeout=90, logs=capped)
    assert finished.verdict.kind == "completed", finished.verdict
    assert [line.text for line in lines if not line.notice] == [f"line {i:04d}" for i in range(5)]
    notices = [line.text for line in lines if line.notice]
    assert len(notices) == 1 and notices[0].startswith("<logs truncated: 55 bytes shown")
    assert time.monotonic() - started < 60


async def test_a_follower_that_starts_again_continues_without_repeating(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str
) -> None:
    """A restarted triggerer: the second follower (another client, another observer) reads
    the cursor the first kept on the run and shows only what came since."""
    first_text = "\n".join(f"step {i}" for i in range(5))
    js = _jobset(
        "resumed",
        _rjob("w", 1, {"devcluster/log": first_text, "devcluster/never-finish": "true"}),
    )
    started = await run.start(
        RunRequest(jobset=js, namespace=cluster_namespace, backend=backend)  # type: ignore[arg-type]
    )
    submission = started.submission
    handle = submission.handle
    options = LogOptions(resume=True)
    before: list[LogLine] = []

    def five() -> bool:
        return len([line for line in before if not line.notice]) >= 5

    deadline = time.time() + 60
    while not five() and time.time() < deadline:
        verdict = await run.wait(
            _waiting(cluster_namespace, backend, 3, options),
            handle,
            report=Reporter(log=before.append),
        )
        assert verdict.kind == "timeout", verdict
    assert [line.text for line in before] == [f"step {i}" for i in range(5)]
    anchor = (
        devcluster.custom.get_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets", handle.name
        )["metadata"]
        if backend == "controller"
        else devcluster.core.read_namespaced_config_map(handle.name, cluster_namespace).metadata
    )
    annotations = anchor["annotations"] if isinstance(anchor, dict) else anchor.annotations
    assert CURSOR_ANNOTATION in annotations

    # The container writes more; the pod's log now has 8 lines.
    (pod,) = devcluster.core.list_namespaced_pod(
        cluster_namespace, label_selector=f"{labels.JOBSET_NAME}=resumed"
    ).items
    more = first_text + "\nstep 5\nstep 6\nstep 7"
    devcluster.core.patch_namespaced_pod(
        pod.metadata.name,
        cluster_namespace,
        {"metadata": {"annotations": {"devcluster/log": more}}},
    )
    after: list[LogLine] = []
    async with fresh_run(devcluster) as again:
        verdict = await again.wait(
            _waiting(cluster_namespace, backend, 4, options),
            handle,
            report=Reporter(log=after.append),
        )
    assert verdict.kind == "timeout", verdict
    assert [line.text for line in after] == ["step 5", "step 6", "step 7"]
    await run.runs.delete(handle, wait=True, timeout=60)


class _TrailingView:
    """The observer's view of a run stuck at one moment: a pod watch that trails the run's
    end (the pods it shows, or none)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self._seen = SimpleNamespace(pods=pods, jobset=None, anchor=None, synced=True)

    def observation(self) -> Any:
        return self._seen

    async def changed(self, timeout: float | None) -> bool:
        await asyncio.sleep(timeout or 0)
        return False

    async def until(self, condition: Any, timeout: float | None) -> Any:
        return condition(self._seen)

    def wake(self) -> None:
        pass


@pytest.mark.parametrize("seen", ["running", "not-yet"])
async def test_the_last_lines_of_a_run_whose_pod_view_trails_its_end(
    run: Lifecycle, backend: str, devcluster: Any, cluster_namespace: str, seen: str
) -> None:
    """The run has ended, but the observer still shows its pod running (``running``: a
    follower then never reads the log to its end) or has not seen it yet (``not-yet``): the
    closing follower reads the cluster's own list of the run's pods, and every line."""
    notes = {"devcluster/log": "last\nwords", "devcluster/run-seconds": "2"}
    js = _jobset("trailing", _rjob("w", 1, notes))
    started = await run.start(
        RunRequest(jobset=js, namespace=cluster_namespace, backend=backend)  # type: ignore[arg-type]
    )
    handle = started.submission.handle
    core = devcluster.core
    selector = f"{labels.JOBSET_NAME}=trailing"

    def pods_in(phase: str) -> list[Any]:
        deadline = time.time() + 60
        while time.time() < deadline:
            pods = core.list_namespaced_pod(cluster_namespace, label_selector=selector).items
            if pods and all(p.status.phase == phase for p in pods):
                return pods
            time.sleep(0.2)
        raise AssertionError(f"no pod of the run reached {phase}")

    (running,) = await asyncio.to_thread(pods_in, "Running")
    stale = core.api_client.sanitize_for_serialization(running)
    await asyncio.to_thread(pods_in, "Succeeded")

    lines: list[LogLine] = []
    control = FollowControl()
    control.close()  # the wait is over before the follower looks
    follower = Follower(
        run.client,
        _TrailingView([stale] if seen == "running" else []),  # type: ignore[arg-type]
        handle,
        LogOptions(pods="all"),
        lines.append,
        control=control,
    )
    await asyncio.wait_for(follower.run(), 30)
    assert [line.text for line in lines] == ["last", "words"]
    await run.runs.delete(handle, wait=True, timeout=60)
