"""Pods that cannot start (pure): which waiting states count, since when, and when the run fails.

The pod and Event shapes are the kubelet's (v1.36, as ``tests/cluster/test_realnode_kwok_parity.py``
records them on the devcluster's real node), trimmed as the observer keeps them.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.policy._time import parse_time
from jobset_core.policy.pod_start import (
    START_FAILURES,
    PodStartRules,
    check_pod_starts,
    describe_failure,
)

T0 = "2026-12-01T10:00:00Z"
NOW = parse_time(T0).timestamp()  # type: ignore[union-attr]


def at(seconds: float) -> str:
    import datetime as dt

    from jobset_core.policy._time import format_time

    return format_time(dt.datetime.fromtimestamp(NOW + seconds, dt.UTC))


def pod(
    name: str = "js-w-0-0-abc",
    *,
    waiting: str | None = None,
    message: str = "",
    attempt: int = 0,
    phase: str = "Pending",
    restarts: int = 0,
    init: bool = False,
    unschedulable: str | None = None,
    deleting: bool = False,
    last_exit: dict[str, Any] | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {"startedAt": T0}}
    if waiting is not None:
        state = {"waiting": {"reason": waiting, "message": message}}
    container = {"name": "c", "restartCount": restarts, "state": state}
    if last_exit is not None:
        container["lastState"] = {"terminated": last_exit}
    status: dict[str, Any] = {"phase": phase}
    status["initContainerStatuses" if init else "containerStatuses"] = [container]
    if unschedulable is not None:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": unschedulable,
                    "lastTransitionTime": at(-30),
                }
            ],
        }
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {L.RESTART_ATTEMPT: str(attempt), L.JOBSET_NAME: "js"},
        "ownerReferences": [{"kind": "Job", "name": "js-w-0", "uid": "j"}],
    }
    if deleting:
        meta["deletionTimestamp"] = T0
    return {"metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": status}


def warning(
    involved: dict[str, str], reason: str, message: str, *, first: float, last: float, count: int
) -> dict[str, Any]:
    """A Warning Event about ``involved``, first and last seen at those seconds from ``T0``."""
    return {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "count": count,
        "firstTimestamp": at(first),
        "lastTimestamp": at(last),
        "involvedObject": involved,
    }


def event(
    pod_name: str, reason: str, message: str, first: float, *, count: int = 1, last: float = 0
) -> dict[str, Any]:
    pod = {"kind": "Pod", "name": pod_name, "uid": f"uid-{pod_name}"}
    return warning(pod, reason, message, first=first, last=max(first, last), count=count)


PULL = 'failed to pull and unpack image "devcluster.local/absent:1": connection refused'


def test_the_start_failures_are_the_kubelets_waiting_reasons() -> None:
    assert {"ErrImagePull", "ImagePullBackOff", "InvalidImageName"} <= START_FAILURES
    assert {"CreateContainerConfigError", "CreateContainerError"} <= START_FAILURES
    assert "ContainerCreating" not in START_FAILURES  # a slow pull is progressing
    assert "CrashLoopBackOff" not in START_FAILURES  # counted by restarts, not time


@pytest.mark.parametrize("reason", sorted(START_FAILURES))
def test_a_start_failure_fails_the_run_once_it_outlasts_the_grace_period(reason: str) -> None:
    rules = PodStartRules(grace=60)
    first = check_pod_starts([pod(waiting=reason, message="m")], [], rules, now=NOW)
    assert first.failed == () and first.recheck_at == NOW + 60
    assert [(p.pod, p.container, p.reason) for p in first.problems] == [
        ("js-w-0-0-abc", "c", reason)
    ]
    # nothing changed but the time: still the first sighting counts
    later = check_pod_starts(
        [pod(waiting=reason, message="m")], [], rules, now=NOW + 60, seen=first.seen
    )
    assert [p.reason for p in later.failed] == [reason]


def test_grace_zero_fails_at_once_and_none_never() -> None:
    bad = [pod(waiting="ErrImagePull", message=PULL)]
    assert check_pod_starts(bad, [], PodStartRules(grace=0), now=NOW).failed
    off = check_pod_starts(bad, [], PodStartRules(grace=None), now=NOW + 10**6)
    assert off.problems == () and off.recheck_at is None


def test_container_creating_and_running_never_count() -> None:
    pods = [pod("a", waiting="ContainerCreating"), pod("b", phase="Running")]
    check = check_pod_starts(pods, [], PodStartRules(grace=0), now=NOW)
    assert check.problems == () and check.recheck_at is None


def test_the_kubelets_first_event_dates_the_failure_for_a_waiter_that_came_late() -> None:
    """A sensor's poke, a restarted triggerer: the Events say since when."""
    name = "js-w-0-0-abc"
    events = [
        event(name, "Failed", f'Failed to pull image "x": {PULL}', -100, count=3, last=-5),
        event(name, "Failed", "Error: ErrImagePull", -100, count=3, last=-5),
        event(name, "Failed", "Error: ImagePullBackOff", -90, count=2, last=-2),
    ]
    bad = [pod(name, waiting="ImagePullBackOff", message="Back-off pulling image")]
    check = check_pod_starts(bad, events, PodStartRules(grace=60), now=NOW)
    (failed,) = check.failed
    assert failed.since == NOW - 99  # whole seconds count from the end of their second
    # the message: who, what, for how long, and the pod's last events
    text = describe_failure(check, now=NOW)
    assert text.startswith(f"pod {name} container c cannot start: ImagePullBackOff: Back-off")
    assert "(for 99s, grace 60s)" in text
    assert "last events: Failed: Failed to pull image" in text
    assert "Failed: Error: ImagePullBackOff (x2)" in text
    # an event of another pod, or a Normal one, dates nothing
    others = [event("other", "Failed", "Error: ErrImagePull", -500)]
    normal = [{**event(name, "BackOff", "Back-off pulling image", -500), "type": "Normal"}]
    assert not check_pod_starts(bad, others + normal, PodStartRules(grace=60), now=NOW).failed


def test_a_truncated_timestamp_never_cuts_the_grace_short() -> None:
    """``metav1.Time`` has whole seconds: the failure began somewhere in that second."""
    name = "js-w-0-0-abc"
    bad = [pod(name, waiting="ErrImagePull")]
    rules = PodStartRules(grace=10)
    coarse = [event(name, "Failed", "Error: ErrImagePull", -20)]
    assert check_pod_starts(bad, coarse, rules, now=NOW).failed[0].since == NOW - 19
    fine = [{**coarse[0], "firstTimestamp": at(-20).replace("Z", ".250000Z")}]
    assert check_pod_starts(bad, fine, rules, now=NOW).failed[0].since == NOW - 19.75


def test_a_pod_that_recovers_restarts_its_clock() -> None:
    rules = PodStartRules(grace=30)
    seen = check_pod_starts([pod(waiting="ErrImagePull")], [], rules, now=NOW).seen
    running = check_pod_starts([pod()], [], rules, now=NOW + 20, seen=seen)
    assert running.problems == () and not running.seen
    again = check_pod_starts(
        [pod(waiting="ErrImagePull")], [], rules, now=NOW + 40, seen=running.seen
    )
    assert again.failed == () and again.recheck_at == NOW + 70


def test_only_the_current_attempt_counts() -> None:
    rules = PodStartRules(grace=0)
    old = pod("old", waiting="ErrImagePull", attempt=0)
    assert check_pod_starts([old], [], rules, now=NOW, attempt=1).problems == ()
    assert check_pod_starts([old], [], rules, now=NOW, attempt=0).failed
    deleting = pod("gone", waiting="ErrImagePull", deleting=True)
    finished = pod("done", waiting="ErrImagePull", phase="Failed")
    assert check_pod_starts([deleting, finished], [], rules, now=NOW).problems == ()


def test_init_containers_count_too() -> None:
    check = check_pod_starts(
        [pod(waiting="CreateContainerConfigError", message='secret "s" not found', init=True)],
        [],
        PodStartRules(grace=0),
        now=NOW,
    )
    assert [p.message for p in check.failed] == ['secret "s" not found']


def test_unschedulable_pods_fail_after_the_pending_timeout_only_when_asked() -> None:
    message = "0/9 nodes are available: 9 Insufficient nvidia.com/gpu."
    waiting = [pod(unschedulable=message)]
    assert check_pod_starts(waiting, [], PodStartRules(), now=NOW + 10**6).problems == ()
    rules = PodStartRules(pending_timeout=60)
    soon = check_pod_starts(waiting, [], rules, now=NOW)
    assert soon.failed == () and soon.recheck_at == NOW + 31  # since its condition's second
    late = check_pod_starts(waiting, [], rules, now=NOW + 31)
    text = describe_failure(late, now=NOW + 31)
    assert text.startswith("pod js-w-0-0-abc cannot be scheduled: Unschedulable: 0/9 nodes")
    assert "(pending for 60s, pending_timeout 60s)" in text


def test_crash_loops_fail_at_the_restart_count_only_when_asked() -> None:
    exit_ = {"exitCode": 2, "reason": "Error", "message": "why"}
    looping = [pod(waiting="CrashLoopBackOff", message="back-off 40s", restarts=3, last_exit=exit_)]
    assert check_pod_starts(looping, [], PodStartRules(), now=NOW).problems == ()
    assert not check_pod_starts(looping, [], PodStartRules(crash_loop_restarts=4), now=NOW).problems
    check = check_pod_starts(looping, [], PodStartRules(crash_loop_restarts=3), now=NOW)
    text = describe_failure(check, now=NOW)
    assert "container c is crash-looping: CrashLoopBackOff: back-off 40s" in text
    assert "(3 restarts, crash_loop_restarts=3); last exit: exit code 2 (Error): why" in text


def test_the_message_names_the_first_pod_and_counts_the_others() -> None:
    pods = [pod(f"p{i}", waiting="ErrImagePull", message=PULL) for i in range(6)]
    check = check_pod_starts(pods, [], PodStartRules(grace=0), now=NOW)
    text = describe_failure(check, now=NOW)
    assert text.startswith("pod p0 container c cannot start: ErrImagePull")
    assert "; 5 more cannot start: p1 (ErrImagePull), p2 (ErrImagePull), p3 (ErrImagePull)" in text
    assert text.endswith(" and 2 more")
    assert check.failed[0].job == "js-w-0"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"grace": -1}, ValueError),
        ({"grace": float("inf")}, ValueError),
        ({"grace": "2m"}, TypeError),
        ({"pending_timeout": -5}, ValueError),
        ({"crash_loop_restarts": 0}, ValueError),
        ({"crash_loop_restarts": True}, ValueError),
    ],
)
def test_bad_rules_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        PodStartRules(**kwargs)


def test_rules_round_trip_through_json() -> None:
    rules = PodStartRules(grace=5, pending_timeout=600, crash_loop_restarts=3)
    assert PodStartRules.from_dict(rules.to_dict()) == rules
    assert PodStartRules.from_dict(None) == PodStartRules()


# ---------------------------------------------------------------------------------- the judge
# The one judge of every waiter turns a check that failed into the run's verdict.


def _observation(*pods: dict[str, Any], restarts: int = 0, suspend: bool = False) -> Any:
    from jobset_core.observe import Observation

    spec: dict[str, Any] = {
        "replicatedJobs": [{"name": "w", "replicas": 1, "template": {}}],
        "suspend": suspend,
    }
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "uid": "u-1"},
        "spec": spec,
        "status": {"restarts": restarts},
    }
    return Observation(("ns", "js"), jobset=jobset, pods=pods, synced=True)


def test_the_judge_fails_the_run_with_the_pods_cannot_start_reason() -> None:
    from jobset_core.errors import JobSetFailed, PodsCannotStart
    from jobset_core.lifecycle import Handle, Judge, WaitRules, error_for
    from jobset_core.outcome import PODS_CANNOT_START, Phase

    judge = Judge(Handle("js", "ns", "u-1", "controller"), WaitRules(pod_start=PodStartRules(5)))
    bad = pod(waiting="ErrImagePull", message=PULL)
    first = judge.step(_observation(bad), NOW)
    assert first.verdict is None and first.recheck_at == NOW + 5
    (notice,) = first.notices  # said once, when first seen
    assert notice.kind == "cannot-start" and notice.reason == "ErrImagePull"
    assert "the run fails in 5s unless it starts" in notice.message
    assert judge.step(_observation(bad), NOW + 1).notices == ()
    assert judge.step(_observation(bad), None).verdict is None  # no time, no such judgement
    verdict = judge.step(_observation(bad), NOW + 5).verdict
    assert verdict is not None and verdict.kind == "failed" and verdict.pods_cannot_start
    assert verdict.outcome is not None and verdict.outcome.phase is Phase.FAILED
    assert (verdict.reason, verdict.outcome.reason) == (PODS_CANNOT_START, PODS_CANNOT_START)
    assert verdict.outcome.failed_job == "js-w-0"
    assert verdict.message.startswith(
        "JobSet ns/js failed: PodsCannotStart: pod js-w-0-0-abc container c cannot start: "
        "ErrImagePull: failed to pull"
    )
    error = error_for(verdict)
    assert isinstance(error, PodsCannotStart) and isinstance(error, JobSetFailed)


def test_the_judge_leaves_suspended_runs_and_earlier_attempts_alone() -> None:
    from jobset_core.lifecycle import Handle, Judge, WaitRules

    rules = WaitRules(pod_start=PodStartRules(0))
    handle = Handle("js", "ns", "u-1", "controller")
    bad = pod(waiting="ErrImagePull", attempt=0)
    assert Judge(handle, rules).step(_observation(bad, suspend=True), NOW).verdict is None
    assert Judge(handle, rules).step(_observation(bad, restarts=1), NOW).verdict is None
    assert Judge(handle, rules).step(_observation(bad), NOW).verdict is not None
