"""Runs through Kueue, on the devcluster's real Kueue (v0.17): queued and why, the two clocks,
admission timeouts, requests no quota can hold, missing queues, preemptions and deactivation,
and an identity that may not read Workloads.

Each test has a ClusterQueue of its own (``tests.cluster.queues.own_queue``), so tests that run
at once never share quota; the pods run on the kwok nodes and request CPUs (Kueue counts
requests).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.errors import InvalidArgument, SpecError
from jobset_core.lifecycle import (
    ClientSettings,
    Deadline,
    Lifecycle,
    Reporter,
    RunRequest,
    error_for,
    session,
)
from jobset_core.models import load_jobset
from jobset_core.outcome import Progress
from tests.cluster.queues import HIGH, LOW, own_queue, queued_jobset, workload_of

pytestmark = [pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(300)]


def settings(devcluster: Any) -> ClientSettings:
    return ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))


def request(body: dict[str, Any], namespace: str, **fields: Any) -> RunRequest:
    labels = dict(body["metadata"].get("labels") or {})
    queue = labels.pop(L.KUEUE_QUEUE, None)  # given as the request's queue instead
    body = {**body, "metadata": {**body["metadata"], "labels": labels}}
    return RunRequest(
        jobset=load_jobset(body),
        namespace=namespace,
        backend="controller",
        queue=fields.pop("queue", queue),
        **fields,
    )


class Heard:
    """The progress lines a run reported, with the time each came."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, Progress]] = []

    def __call__(self, progress: Progress) -> None:
        self.lines.append((time.time(), progress))

    def kinds(self) -> list[str]:
        return [p.kind for _, p in self.lines]

    def first(self, kind: str, reason: str | None = None) -> tuple[float, Progress]:
        return next(
            (t, p)
            for t, p in self.lines
            if p.kind == kind and (reason is None or p.reason == reason)
        )


def jobset_names(devcluster: Any, namespace: str) -> list[str]:
    found = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )
    return [j["metadata"]["name"] for j in found["items"]]


def blocker(devcluster: Any, namespace: str, name: str, seconds: float, **fields: Any) -> str:
    """A queued JobSet that takes 3 of the queue's 4 CPUs for ``seconds``, admitted; its UID."""
    created = devcluster.create_jobset(
        namespace, queued_jobset(name, cpu="3", run_seconds=seconds, **fields)
    )
    uid = created["metadata"]["uid"]
    devcluster.wait_for(
        lambda: not devcluster.get_jobset(namespace, name)["spec"].get("suspend"),
        timeout=60,
        desc=f"{name} admitted",
    )
    return str(uid)


async def test_queue_time_never_counts_against_the_timeout(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        blocker(devcluster, ns, "first", 16)
        heard = Heard()
        body = queued_jobset("second", cpu="3", run_seconds=2, queue=queue)
        # 10 s leave a loaded machine 8 s to start the admitted run's pods and end it
        run = request(body, ns, deadline=Deadline(timeout=10), delete_policy="never")
        async with session(settings(devcluster)) as lifecycle:
            finished = await lifecycle.execute(run, Reporter(progress=heard))
    verdict = finished.verdict
    # queued ~16 s behind the first (more than its 10 s timeout), ran 2 s: completed
    assert verdict.kind == "completed", verdict.message
    assert verdict.queue is not None and verdict.queue.status == "admitted"
    assert verdict.queue.cluster_queue == f"cq-{ns}"
    assert verdict.queue.flavors == ("w: cpu=devcluster-flavor, memory=devcluster-flavor",)
    queued_at, _ = heard.first("queued")  # at once, before Kueue made its Workload
    _, queued = heard.first("queued", "Pending")  # then Kueue's reason
    admitted_at, admitted = heard.first("admitted")
    assert admitted_at - queued_at > 6, heard.lines
    assert "insufficient unused quota for cpu" in queued.message
    assert "queued in LocalQueue devcluster-queue" in queued.message
    assert f"admitted by LocalQueue devcluster-queue (ClusterQueue cq-{ns})" in admitted.message
    assert heard.kinds().index("queued") < heard.kinds().index("admitted")


async def test_admission_timeout_fails_with_the_queue_and_its_words(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        blocker(devcluster, ns, "first", 60)
        body = queued_jobset("second", cpu="3", run_seconds=1, queue=queue)
        run = request(
            body,
            ns,
            deadline=Deadline(timeout=600, admission_timeout=4),
            delete_policy="on_timeout",
        )
        began = time.monotonic()
        async with session(settings(devcluster)) as lifecycle:
            finished = await lifecycle.execute(run)
        took = time.monotonic() - began
    verdict = finished.verdict
    assert verdict.kind == "timeout" and verdict.reason == "AdmissionTimeout", verdict
    assert type(error_for(verdict)).__name__ == "AdmissionTimeout"
    assert "was not admitted by LocalQueue devcluster-queue within 4s (Kueue: Pending:" in (
        verdict.message
    )
    assert 4 <= took < 15, took
    assert finished.deleted  # on_timeout deletes what it gave up on, as for a run timeout
    devcluster.wait_for(
        lambda: "second" not in jobset_names(devcluster, ns), 60, desc="the timed-out JobSet gone"
    )


async def test_a_request_no_quota_can_hold_fails_at_once(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        body = queued_jobset("huge", cpu="3", replicas=2, run_seconds=1, queue=queue)
        began = time.monotonic()
        async with session(settings(devcluster)) as lifecycle:
            finished = await lifecycle.execute(request(body, ns, delete_policy="never"))
        took = time.monotonic() - began
        verdict = finished.verdict
        assert verdict.kind == "refused" and verdict.reason == "ExceedsMaximumQuota", verdict
        assert "will not be run by LocalQueue devcluster-queue: ExceedsMaximumQuota:" in (
            verdict.message
        )
        assert "> maximum capacity (4)" in verdict.message
        assert type(error_for(verdict)).__name__ == "QueueRefused"
        # within seconds of Kueue saying so (its scheduler judges it at once)
        workload = workload_of(devcluster.custom, ns, verdict.uid)
        assert workload is not None
        assert took < 20, took


async def test_a_missing_localqueue_is_refused_before_anything_exists(
    devcluster: Any, cluster_namespace: str
) -> None:
    body = queued_jobset("lost", cpu="1", run_seconds=1, queue="no-such-queue")
    async with session(settings(devcluster)) as lifecycle:
        with pytest.raises(SpecError) as caught:
            await lifecycle.execute(request(body, cluster_namespace))
    (problem,) = caught.value.problems
    assert problem.path == f"metadata.labels.{L.KUEUE_QUEUE}"
    assert "LocalQueue 'no-such-queue' does not exist in namespace" in problem.message
    assert jobset_names(devcluster, cluster_namespace) == []


async def test_the_native_backend_refuses_a_queue(devcluster: Any, cluster_namespace: str) -> None:
    body = queued_jobset("native", cpu="1", run_seconds=1, queue=None)
    with pytest.raises(InvalidArgument, match="native backend cannot run through a Kueue queue"):
        RunRequest(jobset=load_jobset(body), backend="native", queue="q")
    labelled = queued_jobset("native", cpu="1", run_seconds=1, queue="q")
    async with session(settings(devcluster)) as lifecycle:
        with pytest.raises(SpecError, match="native backend cannot run through a Kueue queue"):
            await lifecycle.start(
                RunRequest(
                    jobset=load_jobset(labelled), namespace=cluster_namespace, backend="native"
                )
            )
    anchors = devcluster.core.list_namespaced_config_map(
        cluster_namespace, label_selector="jobset-core/anchor"
    )
    assert anchors.items == []


async def preempted_run(
    devcluster: Any, ns: str, queue: str, on_preemption: str, lifecycle: Lifecycle
) -> tuple[Any, Heard]:
    """A low-priority run, preempted by a high-priority JobSet once it runs."""
    heard = Heard()
    body = queued_jobset("low", cpu="3", run_seconds=8, queue=queue, priority=LOW)
    run = request(body, ns, on_preemption=on_preemption, delete_policy="never")
    started = await lifecycle.start(run)

    async def preempt() -> None:
        while "admitted" not in heard.kinds():
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)
        high = queued_jobset("high", cpu="3", run_seconds=3, queue=queue, priority=HIGH)
        await asyncio.to_thread(devcluster.create_jobset, ns, high)

    task = asyncio.ensure_future(preempt())
    verdict = await lifecycle.wait(
        started.request,
        started.handle,
        report=Reporter(progress=heard),
        submission=started.submission,
    )
    await task
    return verdict, heard


async def test_a_preempted_run_waits_for_its_readmission(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        async with session(settings(devcluster)) as lifecycle:
            verdict, heard = await preempted_run(devcluster, ns, queue, "wait", lifecycle)
        pods = devcluster.core.list_namespaced_pod(ns, label_selector=f"{L.JOBSET_NAME}=low")
    assert verdict.kind == "completed", verdict.message
    assert verdict.queue is not None and verdict.queue.preemptions == 1
    assert verdict.outcome is not None and verdict.outcome.restarts == 0  # not a restart
    assert {p.metadata.labels[L.RESTART_ATTEMPT] for p in pods.items} == {"0"}
    kinds = heard.kinds()
    assert kinds.index("admitted") < kinds.index("preempted"), kinds
    _, preempted = heard.first("preempted")
    assert "evicted 1x (1 preempted)" in preempted.message
    assert kinds.count("admitted") >= 2  # admitted again after the requeue


@pytest.mark.parametrize(
    ("on_preemption", "kind", "error"),
    [("retry", "preempted", "JobSetPreempted"), ("fail", "refused", "QueueRefused")],
)
async def test_a_preemption_ends_the_wait_when_asked(
    devcluster: Any, cluster_namespace: str, on_preemption: str, kind: str, error: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        async with session(settings(devcluster)) as lifecycle:
            verdict, _ = await preempted_run(devcluster, ns, queue, on_preemption, lifecycle)
    assert verdict.kind == kind, verdict.message
    assert type(error_for(verdict)).__name__ == error
    assert "was preempted by LocalQueue devcluster-queue (preemption 1)" in verdict.message
    assert "Preempted to accommodate a workload" in verdict.message


async def test_a_deactivated_workload_fails_within_seconds(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with own_queue(devcluster.custom, ns) as queue:
        body = queued_jobset(
            "capped",
            cpu="1",
            run_seconds=60,
            queue=queue,
            labels={"kueue.x-k8s.io/max-exec-time-seconds": "3"},
        )
        heard = Heard()
        async with session(settings(devcluster)) as lifecycle:
            finished = await lifecycle.execute(
                request(body, ns, delete_policy="never"), Reporter(progress=heard)
            )
        verdict = finished.verdict
        said = time.time()
        workload = workload_of(devcluster.custom, ns, verdict.uid)
    assert verdict.kind == "refused", verdict.message
    assert verdict.reason in ("MaximumExecutionTimeExceeded", "Deactivated"), verdict
    assert "exceeding the maximum execution time" in verdict.message
    assert workload is not None and workload["spec"]["active"] is False
    from jobset_core.policy._time import parse_time

    # Kueue says so first with DeactivationTarget (then spec.active: false, then Evicted).
    words = [
        c
        for c in workload["status"]["conditions"]
        if c["type"] in ("DeactivationTarget", "Evicted")
    ]
    assert words, workload["status"]
    kueue_said = min(parse_time(c["lastTransitionTime"]).timestamp() for c in words)  # type: ignore[union-attr]
    assert said - kueue_said < 20, said - kueue_said


async def test_without_workload_access_the_jobset_and_its_events_tell(
    devcluster: Any, cluster_namespace: str, tmp_path: Any
) -> None:
    from tests.cluster.identities import least_privilege

    ns = cluster_namespace
    roles = ["jobset-airflow-worker-controller"]  # not the Kueue reader
    who = least_privilege(devcluster, ns, tmp_path, "no-workloads", roles, ttl=600)
    with own_queue(devcluster.custom, ns) as queue:
        blocker(devcluster, ns, "first", 6)
        heard = Heard()
        body = queued_jobset("second", cpu="3", run_seconds=1, queue=queue)
        async with session(ClientSettings(kubeconfig_path=str(who.kubeconfig))) as lifecycle:
            finished = await lifecycle.execute(
                request(body, ns, delete_policy="never"), Reporter(progress=heard)
            )
    assert finished.verdict.kind == "completed", finished.verdict.message
    assert finished.verdict.queue is not None and finished.verdict.queue.source == "jobset"
    unreadable = [p for _, p in heard.lines if p.reason == "WorkloadUnreadable"]
    assert len(unreadable) == 1, heard.lines
    assert "admitted" in heard.kinds()


def test_jobsetctl_runs_through_a_queue_and_status_shows_it(
    devcluster: Any, cluster_namespace: str, tmp_path: Any
) -> None:
    import io
    import json

    import yaml

    from jobset_core import cli

    ns = cluster_namespace
    base = ["--kubeconfig", str(devcluster.kubeconfig), "-n", ns]

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = cli.main([*args, *base], stdout=out, stderr=err, stdin=io.StringIO())
        return code, out.getvalue(), err.getvalue()

    with own_queue(devcluster.custom, ns) as queue:
        blocker(devcluster, ns, "first", 14)
        path = tmp_path / "second.yaml"
        path.write_text(yaml.safe_dump(queued_jobset("second", cpu="3", run_seconds=1, queue=None)))
        code, out, err = run("run", str(path), "--queue", queue, "--timeout", "9")
        assert code == 0, (out, err)  # queued ~14 s, longer than its 9 s timeout: completed
        lines = out.splitlines()
        queued = [line for line in lines if line.startswith("queued: ")]
        assert any("queued in LocalQueue devcluster-queue: Pending:" in q for q in queued), out
        assert any(line.startswith("admitted: ") for line in lines), out
        code, out, _ = run("status", "second")
        assert code == 0 and "  queue: admitted by LocalQueue devcluster-queue" in out, out
        code, out, _ = run("status", "second", "-o", "json")
        document = json.loads(out)
        assert document["queue"]["status"] == "admitted", document
        assert document["queue"]["cluster_queue"] == f"cq-{ns}"
        # An admission timeout exits 3, with the queue's words.
        blocker(devcluster, ns, "third", 60)
        path = tmp_path / "fourth.yaml"
        path.write_text(yaml.safe_dump(queued_jobset("fourth", cpu="3", run_seconds=1, queue=None)))
        code, out, err = run(
            "run", str(path), "--queue", queue, "--admission-timeout", "3",
            "--delete-policy", "on_timeout",
        )  # fmt: skip
        assert code == 3, (out, err)
        assert "was not admitted by LocalQueue devcluster-queue within 3s" in err, err
        assert "deleted: JobSet" in out
