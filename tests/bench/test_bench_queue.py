"""The queue family's pure parts: the objects it creates, how it reads a Workload and a task's
log line, the admission latencies, and the fleet's and the floor's helpers it relies on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from benchmarks import floor, queue
from benchmarks.fleet import Said, stopped
from benchmarks.goals import judge
from benchmarks.results import Figure
from benchmarks.workloads import BENCH_LABEL
from jobset_core.policy.queue import read_queue


def test_the_names_it_mirrors_are_the_devclusters() -> None:
    from tests.cluster import queues

    assert queue.FLAVOR == queues.FLAVOR
    assert queue.QUEUE_LABEL == queues.QUEUE_LABEL
    assert queue.JOB_UID_LABEL == queues.JOB_UID_LABEL
    assert (queue.GROUP, queue.VERSION) == (queues.GROUP, queues.VERSION)
    assert queue.LOCAL_QUEUE != "default"  # Kueue would queue every JobSet of the namespace


def test_a_queued_jobset_is_labelled_suspended_and_requests_cpu() -> None:
    body = queue.queued_body("q1", run="r1", queue="lq", cpu=2)
    assert body["metadata"]["labels"] == {BENCH_LABEL: "r1", queue.QUEUE_LABEL: "lq"}
    assert body["spec"]["suspend"] is True
    (job,) = body["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"devcluster/never-finish": "true"}
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "2"}}


def test_the_cluster_queue_serves_the_runs_namespaces_with_the_quota_asked() -> None:
    body = queue.cluster_queue_body("cq", "r1", 3)
    assert body["spec"]["namespaceSelector"] == {"matchLabels": {BENCH_LABEL: "r1"}}
    (group,) = body["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == queue.FLAVOR
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["cpu"] == "3"
    assert queue.local_queue_body("cq")["spec"] == {"clusterQueue": "cq"}
    assert queue.local_queue_body("cq")["metadata"]["name"] == queue.LOCAL_QUEUE


def _workload(*conditions: Mapping[str, Any], active: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "jobset-q1-abcde",
            "namespace": "n",
            "labels": {queue.JOB_UID_LABEL: "u1"},
            "ownerReferences": [{"kind": "JobSet", "name": "q1", "uid": "u1"}],
        },
        "spec": {"active": active, "queueName": "lq"},
        "status": {"conditions": list(conditions)},
    }


WAITS = {
    "type": "QuotaReserved",
    "status": "False",
    "reason": "Pending",
    "message": "couldn't assign flavors to pod set w: insufficient unused quota for cpu in "
    "flavor devcluster-flavor, 1 more needed",
}
NEVER_FITS = {
    **WAITS,
    "message": "couldn't assign flavors to pod set w: insufficient quota for cpu in flavor "
    "devcluster-flavor, request > maximum capacity (2 > 1)",
}
ADMITTED = [
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
    {"type": "Admitted", "status": "True", "reason": "Admitted"},
]


@pytest.mark.parametrize(
    ("workload", "state", "core"),
    [
        (_workload(WAITS), "waiting", "queued"),
        (_workload(NEVER_FITS), "refused", "refused"),
        (_workload(*ADMITTED), "admitted", "admitted"),
        (_workload(WAITS, active=False), "refused", "refused"),
        (_workload(), "new", "queued"),
    ],
)
def test_the_workload_states_it_waits_for_are_the_cores(
    workload: dict[str, Any], state: str, core: str
) -> None:
    # The family keeps its runs "waiting": exactly what the core reads as queued, not refused.
    assert queue.pending_state(workload) == state
    found = read_queue(None, workload)
    assert found is not None and found.status == core


def test_the_floor_sees_a_workload_admitted_until_it_is_evicted() -> None:
    assert floor.admitted(_workload(*ADMITTED))
    assert floor.ended("workloads", _workload(*ADMITTED))
    assert not floor.admitted(_workload(WAITS))
    evicted = {"type": "Evicted", "status": "True", "reason": "Preempted"}
    assert not floor.admitted(_workload(*ADMITTED, evicted))
    assert floor.owner(_workload()) == "q1"
    assert floor.owner({"metadata": {}}) == ""


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (
            "JobSet n/q1 admitted: Suspended restarts=0 Admitted admitted by LocalQueue lq",
            "admitted",
        ),
        ("JobSet n/q1 queued: Suspended restarts=0 Pending queued in LocalQueue lq: x", "queued"),
        ("JobSet n/q10 admitted: Suspended", None),  # another run
        ("JobSet n/q1: the verdict's message", None),
        ("deleted JobSet n/q1 (task killed by a user)", None),
        ("JobSet n/q1 no colon here", None),
    ],
)
def test_a_line_says_its_kind_for_its_own_run_only(line: str, kind: str | None) -> None:
    assert queue.said_kind(line, "n/q1") == kind


def test_admission_latency_runs_from_the_admitting_write() -> None:
    seen = {"n/a": ("wa", 10.050), "n/b": ("wb", 10.100), "m/c": ("wc", 11.0)}
    said = {"n/a": 10.070, "n/b": 10.300}  # c was never logged
    writes = {("n", "wa"): 10.000, ("n", "wb"): 10.080, ("m", "wc"): 10.990}

    def decisive(namespace: str, name: str, at: float) -> float | None:
        return writes.get((namespace, name))

    ours, floor_ms = queue.admission_ms(seen, said, decisive)
    assert ours == pytest.approx([70.0, 220.0])
    assert floor_ms == pytest.approx([10.0, 50.0, 20.0])  # by run: m/c, n/a, n/b
    # Without an audit log the sighting is the admission: no floor.
    ours, floor_ms = queue.admission_ms(seen, said, None)
    assert ours == pytest.approx([20.0, 200.0]) and floor_ms == []


def test_the_queue_goals_bound_the_ratios() -> None:
    figures = [
        Figure.of("queue: API requests per waiting task-hour (10 ns, x)", "requests", 0.05, 0.05),
        Figure.of("queue: admission → task log p95 (10 ns, x)", "ms", 60.0, 40.0, floor=40.0),
        Figure.of("queue: admission → task log p50 (10 ns, x)", "ms", 60.0, 40.0, floor=40.0),
    ]
    judged = {j.goal.name: (j.met, round(j.by, 2)) for j in judge(figures)}
    assert judged == {
        "queued tasks cost no more requests per task-hour than waiting ones": (True, 0.0),
        "admission to task log p95 within 1.25x the raw-watch floor": (False, 0.2),
    }


def test_said_hears_each_line_as_logged_and_passes_it_on() -> None:
    logged: list[tuple[Any, ...]] = []

    class Real:
        def info(self, event: str, *args: Any) -> None:
            logged.append((event, *args))

        def warning(self, event: str) -> str:
            return f"warned {event}"

    heard: list[str] = []
    said = Said(Real(), heard.append)
    said.info("%s %s", "JobSet n/q1", "queued: x")
    said.info("plain")
    assert heard == ["JobSet n/q1 queued: x", "plain"]
    assert logged == [("%s %s", "JobSet n/q1", "queued: x"), ("plain",)]
    assert said.warning("w") == "warned w"


def test_informers_that_stopped_for_good_are_counted_by_kind() -> None:
    from jobset_core.errors import Forbidden
    from jobset_core.observe._informer import Source
    from jobset_core.observe._views import Kind

    class Informer:
        def __init__(self, kind: Kind, problem: Exception | None) -> None:
            self.source = Source(kind, None)
            self.problem = problem

    class Observer:
        _informers = {
            1: Informer(Kind.WORKLOAD, Forbidden(403, "Forbidden")),
            2: Informer(Kind.WORKLOAD, Forbidden(403, "Forbidden")),
            3: Informer(Kind.JOBSET, None),
        }

    assert stopped(Observer()) == {"workload": 2}


def test_what_the_waiter_adds_to_the_floor_is_per_logged_run() -> None:
    seen = {"n/a": ("wa", 10.050), "n/b": ("wb", 10.100), "m/c": ("wc", 11.0)}
    said = {"n/a": 10.070, "n/b": 10.090}
    assert queue.beyond_floor(seen, said) == pytest.approx([20.0, -10.0])
