"""What Kueue says of a run (pure): the queue read from a Workload or, without one, from the
JobSet and Kueue's Events; the two clocks of a :class:`Deadline`; the judge's queue verdicts.

The Workload shapes are Kueue v0.17's (``kueue.x-k8s.io/v1beta2``, as its workload and
scheduler controllers write them; ``tests/core/test_run_queue.py`` meets the real ones).
"""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.errors import AdmissionTimeout, JobSetPreempted, QueueRefused
from jobset_core.lifecycle import Deadline, Handle, Judge, WaitRules, error_for
from jobset_core.lifecycle.verdict import should_delete
from jobset_core.observe import Kind, Observation
from jobset_core.policy._time import parse_time
from jobset_core.policy.queue import Queue, read_queue

T0 = "2026-12-01T10:00:00Z"
NOW = parse_time(T0).timestamp()  # type: ignore[union-attr]
UID = "js-uid-1"


def at(seconds: float) -> str:
    import datetime as dt

    from jobset_core.policy._time import format_time

    return format_time(dt.datetime.fromtimestamp(NOW + seconds, dt.UTC))


def cond(ctype: str, status: str, reason: str = "", message: str = "", t: float = 0) -> dict:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at(t),
    }


def workload(
    *conditions: dict[str, Any],
    active: bool | None = None,
    evictions: list[dict[str, Any]] | None = None,
    past: int | None = None,
    admission: dict[str, Any] | None = None,
    uid: str = UID,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if evictions is not None:
        status["schedulingStats"] = {"evictions": evictions}
    if past is not None:
        status["accumulatedPastExecutionTimeSeconds"] = past
    if admission is not None:
        status["admission"] = admission
    spec: dict[str, Any] = {"queueName": "lq"}
    if active is not None:
        spec["active"] = active
    return {
        "metadata": {
            "name": "jobset-js-1a2b3",
            "namespace": "ns",
            "labels": {L.KUEUE_JOB_UID: uid},
            "ownerReferences": [{"kind": "JobSet", "name": "js", "uid": uid}],
        },
        "spec": spec,
        "status": status,
    }


PENDING = cond(
    "QuotaReserved",
    "False",
    "Pending",
    "couldn't assign flavors to pod set w: insufficient unused quota for cpu in flavor f, 2 "
    "more needed",
    t=1,
)
NEVER = cond(
    "QuotaReserved",
    "False",
    "Pending",
    "couldn't assign flavors to pod set w: insufficient quota for cpu in flavor f, previously "
    "considered podsets requests (0) + current podset request (6) > maximum capacity (4)",
    t=1,
)
NO_QUEUE = cond("QuotaReserved", "False", "Inadmissible", "LocalQueue lq doesn't exist", t=1)
STOPPED_QUEUE = cond("QuotaReserved", "False", "Inadmissible", "ClusterQueue cq is inactive", t=1)
RESERVED = cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 5)
ADMITTED = cond("Admitted", "True", "Admitted", "The workload is admitted", t=5)
PREEMPTED = cond(
    "Evicted",
    "True",
    "Preempted",
    "Preempted to accommodate a workload (UID: x, JobUID: y) due to prioritization in the "
    "ClusterQueue",
    t=30,
)
ASSIGNED = {
    "clusterQueue": "cq",
    "podSetAssignments": [{"name": "w", "flavors": {"cpu": "f", "memory": "f"}, "count": 2}],
}


@pytest.mark.parametrize(
    ("workload_", "status", "reason", "since", "evictions"),
    [
        pytest.param(workload(PENDING), "queued", "Pending", None, 0, id="waiting-for-quota"),
        pytest.param(workload(NEVER), "refused", "ExceedsMaximumQuota", None, 0, id="never-fits"),
        pytest.param(workload(NO_QUEUE), "refused", "Inadmissible", None, 0, id="no-localqueue"),
        pytest.param(
            workload(STOPPED_QUEUE), "queued", "Inadmissible", None, 0, id="stopped-queue-waits"
        ),
        pytest.param(
            workload(RESERVED, cond("Admitted", "False", "UnsatisfiedChecks", "checks", 5)),
            "queued",
            "UnsatisfiedChecks",
            None,
            0,
            id="admission-checks",
        ),
        pytest.param(
            workload(RESERVED, ADMITTED, admission=ASSIGNED),
            "admitted",
            "Admitted",
            NOW + 5,
            0,
            id="admitted",
        ),
        pytest.param(
            workload(
                cond("QuotaReserved", "False", "Pending", "insufficient unused quota", 30),
                cond("Admitted", "False", "NoReservation", "", 30),
                PREEMPTED,
                evictions=[{"reason": "Preempted", "underlyingCause": "", "count": 1}],
                past=25,
            ),
            "queued",
            "Pending",
            NOW + 30,
            1,
            id="requeued-after-preemption",
        ),
        pytest.param(
            workload(
                RESERVED,
                cond("Admitted", "False", "NoReservation", "", 30),
                PREEMPTED,
            ),
            "queued",
            "Preempted",
            NOW + 30,
            1,
            id="evicted-not-yet-counted",
        ),
        pytest.param(
            workload(
                cond("QuotaReserved", "True", "QuotaReserved", "again", 60),
                cond("Admitted", "True", "Admitted", "", 60),
                cond("Evicted", "False", "QuotaReserved", "Previously: Preempted", 60),
                evictions=[{"reason": "Preempted", "underlyingCause": "", "count": 1}],
                past=25,
            ),
            "admitted",
            "Admitted",
            NOW + 60,
            1,
            id="readmitted",
        ),
        pytest.param(
            workload(
                cond(
                    "Evicted",
                    "True",
                    "DeactivatedDueToMaximumExecutionTimeExceeded",
                    "The workload is deactivated due to exceeding the maximum execution time",
                    40,
                ),
                active=False,
            ),
            "refused",
            "MaximumExecutionTimeExceeded",
            None,
            1,
            id="deactivated-by-kueue",
        ),
        pytest.param(
            workload(
                cond("Evicted", "True", "Deactivated", "The workload is deactivated", 40),
                active=False,
            ),
            "refused",
            "Deactivated",
            None,
            1,
            id="deactivated-by-hand",
        ),
        pytest.param(
            workload(
                cond(
                    "QuotaReserved",
                    "False",
                    "Pending",
                    "couldn't assign flavors to pod set w: insufficient quota for cpu in flavor "
                    "small, previously considered podsets requests (0) + current podset request "
                    "(6) > maximum capacity (4), insufficient unused quota for cpu in flavor "
                    "big, 2 more needed",
                    1,
                )
            ),
            "queued",
            "Pending",
            None,
            0,
            id="one-flavor-too-small-another-busy",
        ),
        pytest.param(
            workload(
                ADMITTED,
                cond(
                    "DeactivationTarget",
                    "True",
                    "RequeuingLimitExceeded",
                    "exceeding the maximum number of re-queuing retries",
                    40,
                ),
                active=False,
            ),
            "refused",
            "RequeuingLimitExceeded",
            None,
            0,
            id="being-deactivated",
        ),
    ],
)
def test_a_workload_says(
    workload_: dict[str, Any], status: str, reason: str, since: float | None, evictions: int
) -> None:
    queue = read_queue(jobset(), workload_)
    assert queue is not None
    assert (queue.status, queue.reason, queue.since, queue.evictions) == (
        status,
        reason,
        since,
        evictions,
    )
    assert queue.local_queue == "lq"
    assert queue.source == "workload"


def test_admitted_names_its_clusterqueue_and_flavors() -> None:
    queue = read_queue(jobset(), workload(RESERVED, ADMITTED, admission=ASSIGNED))
    assert queue is not None
    assert queue.cluster_queue == "cq"
    assert queue.flavors == ("w: cpu=f, memory=f",)
    assert "admitted by LocalQueue lq (ClusterQueue cq) with flavors w: cpu=f" in queue.line()


def test_running_time_counts_only_admitted_time() -> None:
    queue = read_queue(
        jobset(),
        workload(
            cond("QuotaReserved", "True", "QuotaReserved", "", 100),
            cond("Admitted", "True", "Admitted", "", 100),
            evictions=[{"reason": "Preempted", "underlyingCause": "", "count": 2}],
            past=40,
        ),
    )
    assert queue is not None
    assert queue.running_seconds(NOW + 130) == 70  # 40 before the evictions + 30 now
    assert queue.preemptions == 2


def jobset(
    *, queue: str | None = "lq", suspend: bool = True, conditions: tuple[dict, ...] = ()
) -> dict[str, Any]:
    labels = {L.KUEUE_QUEUE: queue} if queue else {}
    return {
        "metadata": {"name": "js", "namespace": "ns", "uid": UID, "labels": labels},
        "spec": {"suspend": suspend, "replicatedJobs": []},
        "status": {"conditions": list(conditions)},
    }


def event(reason: str, message: str, t: float, count: int = 1) -> dict[str, Any]:
    return {
        "type": "Normal",
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": at(t),
        "involvedObject": {"kind": "JobSet", "name": "js", "namespace": "ns", "uid": UID},
    }


def test_not_kueues() -> None:
    assert read_queue(jobset(queue=None), None) is None
    assert read_queue(jobset(queue=None, suspend=False), None) is None
    assert read_queue(jobset(suspend=False), None) is None  # labelled, never suspended: not held


def test_queued_before_its_workload_exists() -> None:
    queue = read_queue(jobset(), None)
    assert queue == Queue(status="queued", local_queue="lq")


@pytest.mark.parametrize(
    ("js", "events", "status", "reason", "evictions"),
    [
        pytest.param(jobset(), [event("CreatedWorkload", "Created Workload", 1)], "queued", "", 0),
        pytest.param(
            jobset(
                suspend=False,
                conditions=(cond("Suspended", "False", "ResumeJobs", "", 7),),
            ),
            [event("Started", "Admitted by clusterQueue cq", 7)],
            "admitted",
            "Admitted",
            0,
        ),
        pytest.param(
            jobset(),
            [
                event("Started", "Admitted by clusterQueue cq", 7),
                event("Stopped", "Preempted to accommodate a workload", 30),
            ],
            "queued",
            "Evicted",
            1,
        ),
        pytest.param(
            jobset(),
            [
                event("Started", "Admitted by clusterQueue cq", 7),
                event(
                    "Stopped",
                    "The workload is deactivated due to exceeding the maximum execution time",
                    30,
                ),
            ],
            "refused",
            "Deactivated",
            1,
        ),
    ],
)
def test_without_the_workload_the_jobset_and_kueues_events_say(
    js: dict[str, Any], events: list[dict[str, Any]], status: str, reason: str, evictions: int
) -> None:
    queue = read_queue(js, None, events, workload_readable=False)
    assert queue is not None
    assert (queue.status, queue.reason, queue.evictions, queue.source) == (
        status,
        reason,
        evictions,
        "jobset",
    )


def test_admitted_time_without_the_workload_is_the_jobsets_resume() -> None:
    js = jobset(suspend=False, conditions=(cond("Suspended", "False", "ResumeJobs", "", 7),))
    queue = read_queue(js, None, [], workload_readable=False)
    assert queue is not None and queue.since == NOW + 7


# ------------------------------------------------------------------------- the two clocks


@pytest.mark.parametrize(
    ("deadline", "queue", "now", "ends", "clock"),
    [
        pytest.param(Deadline(timeout=60, started=NOW), None, NOW + 5, NOW + 60, "run", id="plain"),
        pytest.param(
            Deadline(timeout=60, started=NOW),
            Queue(status="queued"),
            NOW + 500,
            None,
            "run",
            id="queue-time-not-counted",
        ),
        pytest.param(
            Deadline(timeout=60, admission_timeout=30, started=NOW),
            Queue(status="queued"),
            NOW + 5,
            NOW + 30,
            "admission",
            id="admission-clock",
        ),
        pytest.param(
            Deadline(timeout=60, admission_timeout=30, started=NOW),
            Queue(status="queued", since=NOW + 100, evictions=1),
            NOW + 105,
            NOW + 130,
            "admission",
            id="admission-clock-again-after-eviction",
        ),
        pytest.param(
            Deadline(timeout=60, admission_timeout=30, started=NOW),
            Queue(status="admitted", since=NOW + 500),
            NOW + 510,
            NOW + 560,
            "run",
            id="run-clock-from-admission",
        ),
        pytest.param(
            Deadline(timeout=60, started=NOW),
            Queue(status="admitted", since=NOW + 500, past_running=45),
            NOW + 505,
            NOW + 515,
            "run",
            id="earlier-admissions-count",
        ),
        pytest.param(
            Deadline(timeout=60, admission_timeout=900, not_after=NOW + 40, started=NOW),
            Queue(status="queued"),
            NOW + 5,
            NOW + 40,
            "task",
            id="the-callers-limit-stands",
        ),
    ],
)
def test_the_clocks(
    deadline: Deadline, queue: Queue | None, now: float, ends: float | None, clock: str
) -> None:
    limit = deadline.limit(queue, now)
    assert limit.ends_at == ends
    if ends is not None:
        assert limit.clock == clock


def test_a_deadline_travels_whole() -> None:
    deadline = Deadline(timeout=5, admission_timeout=7, not_after=NOW, started=NOW - 1)
    assert Deadline.from_dict(deadline.to_dict()) == deadline
    assert Deadline(admission_timeout=1).limited


# ------------------------------------------------------------------------- the judge


HANDLE = Handle("js", "ns", UID, "controller")


def seen(js: dict[str, Any], *workloads: dict[str, Any], forbidden: bool = False) -> Observation:
    return Observation(
        ("ns", "js"),
        jobset={"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", **js},
        synced=True,
        workloads=workloads,
        forbidden=frozenset({Kind.WORKLOAD}) if forbidden else frozenset(),
    )


def test_the_judge_reports_the_queue_and_never_judges_a_queued_runs_pods() -> None:
    judge = Judge(HANDLE, WaitRules(deadline=Deadline(started=NOW)))
    step = judge.step(seen(jobset(), workload(PENDING)), NOW + 1)
    assert step.verdict is None
    assert [p.kind for p in step.reports] == ["status", "queued"]
    assert "queued in LocalQueue lq: Pending: couldn't assign flavors" in step.reports[1].message
    again = judge.step(seen(jobset(), workload(PENDING)), NOW + 2)
    assert again.reports == ()  # nothing new to say


def test_admission_timeout_names_the_queue_and_the_reason() -> None:
    rules = WaitRules(deadline=Deadline(timeout=5, admission_timeout=20, started=NOW))
    judge = Judge(HANDLE, rules)
    judge.step(seen(jobset(), workload(PENDING)), NOW + 1)
    assert judge.limit(NOW + 1).ends_at == NOW + 20  # not the run's 5 s: it is not running
    verdict = judge.timeout(20.0, NOW + 20)
    assert verdict.kind == "timeout" and verdict.reason == "AdmissionTimeout"
    assert "was not admitted by LocalQueue lq within 20s (Kueue: Pending:" in verdict.message
    assert isinstance(error_for(verdict), AdmissionTimeout)
    assert should_delete("on_timeout", verdict)


@pytest.mark.parametrize("wl", [workload(NEVER), workload(NO_QUEUE)], ids=["never-fits", "no-lq"])
def test_a_queue_that_will_not_run_it_fails_at_once(wl: dict[str, Any]) -> None:
    step = Judge(HANDLE).step(seen(jobset(), wl), NOW + 1)
    assert step.verdict is not None and step.verdict.kind == "refused"
    assert "will not be run by LocalQueue lq" in step.verdict.message
    assert isinstance(error_for(step.verdict), QueueRefused)
    assert step.verdict.queue is not None and step.verdict.queue.status == "refused"


def admitted_then_preempted(count: int) -> dict[str, Any]:
    return workload(
        cond("QuotaReserved", "False", "Pending", "insufficient unused quota", 30),
        PREEMPTED,
        evictions=[{"reason": "Preempted", "underlyingCause": "", "count": count}],
    )


@pytest.mark.parametrize(
    ("on_preemption", "kind", "error"),
    [
        ("wait", None, None),
        ("retry", "preempted", JobSetPreempted),
        ("fail", "refused", QueueRefused),
    ],
)
def test_a_preemption(on_preemption: Any, kind: str | None, error: type | None) -> None:
    judge = Judge(HANDLE, WaitRules(on_restart="return", on_preemption=on_preemption))
    admitted = workload(RESERVED, ADMITTED, admission=ASSIGNED)
    assert judge.step(seen(jobset(suspend=False), admitted), NOW + 6).verdict is None
    step = judge.step(seen(jobset(), admitted_then_preempted(1)), NOW + 31)
    assert "preempted" in [p.kind for p in step.reports]
    if kind is None:
        assert step.verdict is None
        return
    assert step.verdict is not None and step.verdict.kind == kind
    assert "was preempted by LocalQueue lq (preemption 1)" in step.verdict.message
    assert isinstance(error_for(step.verdict), error)  # type: ignore[arg-type]
    assert not should_delete("on_success", step.verdict) or kind == "refused"


def test_a_preemption_seen_before_the_wait_began_is_not_news() -> None:
    judge = Judge(HANDLE, WaitRules(on_preemption="retry"))
    assert judge.step(seen(jobset(), admitted_then_preempted(1)), NOW + 31).verdict is None
    assert judge.step(seen(jobset(), admitted_then_preempted(2)), NOW + 60).verdict is not None


def test_a_namesakes_workload_is_not_the_runs() -> None:
    judge = Judge(HANDLE)
    step = judge.step(seen(jobset(), workload(NEVER, uid="old-uid")), NOW + 1)
    assert step.verdict is None
    assert judge.queue == Queue(status="queued", local_queue="lq")


def test_without_workload_access_it_says_so_once() -> None:
    judge = Judge(HANDLE)
    step = judge.step(seen(jobset(), forbidden=True), NOW + 1)
    said = [p.message for p in step.reports if p.reason == "WorkloadUnreadable"]
    assert len(said) == 1 and "may not read Kueue Workloads in ns" in said[0]
    step = judge.step(seen(jobset(suspend=False), forbidden=True), NOW + 2)
    assert not [p for p in step.reports if p.reason == "WorkloadUnreadable"]
