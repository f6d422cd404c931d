"""The failure policy on the devcluster, on both backends: what the pure tables of
``test_policy_failure.py`` and ``test_policy_startup.py`` decide, held to real child Jobs.

``onJobFailureMessagePatterns``: upstream (``pkg/controllers/failure_policy.go``,
``findFirstFailedPolicyRuleAndJob``/``ruleIsApplicable``/``anyMatchFound``) matches each
pattern with Go's ``regexp.MatchString`` against the ``message`` of the failed child Job's
``Failed=True`` condition, skipping a pattern that does not compile. That message is the Job
controller's, the same for pods of the kwok nodes and of the real node; with a
``podFailurePolicy`` ``FailJob`` rule on exit codes it names the container, the pod and the exit
code (``Container main for pod <ns>/<pod> failed with exit code 42 matching FailJob rule at
index 0``, reason ``PodFailurePolicy``), without one it is ``Job has reached the specified
backoff limit`` (``BackoffLimitExceeded``). The tests below run a JobSet whose failed Job's
message matches the rule and one whose message does not, both failing with reason
``PodFailurePolicy``, side by side.

``BlockingRecreate``: no pod of the new attempt may exist while a pod of the old one does
(upstream creates no Job while a Job of a previous attempt exists, and a Job deleted in the
foreground goes only after its pods). It is read from a watch of the pods
(``tests/core/_pod_timeline.py``), with the old attempt's pods slow to go: on the kwok nodes a
finalizer holds them, on the real node they take seconds to stop after SIGTERM. Beside each
``BlockingRecreate`` JobSet runs the same JobSet with ``Recreate``, which must overlap: without
that the scenario could not tell the two apart.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.models import JobSet, load_jobset
from jobset_core.outcome import Outcome
from tests.cluster.bodies import jobset, replicated_job
from tests.cluster.pytest_devcluster import SHELL_IMAGE, RealNode
from tests.core._pod_timeline import HOLD, PodEvent, PodTimeline, overlaps, release_due
from tests.core._runs import RunFace, open_face

WAIT = 90.0

#: Matches the Job controller's pod-failure-policy message for exit code 42 or 43 only: anchored
#: at the start, alternation, a word boundary (not 420), and open at the end (a rule matched
#: with a full match instead of Go's search would miss it).
FATAL = r"^Container main for pod \S+ failed with exit code (42|43)\b"
#: A look-behind: Go's RE2 does not compile it, so upstream skips the pattern; Python's ``re``
#: would match it against the exit-code-4 message.
NOT_RE2 = r"(?<=exit code )4\b"
#: ``podFailurePolicy``: exit codes 4 and 42 fail the Job at once, reason ``PodFailurePolicy``.
FAIL_JOB_ON = {
    "rules": [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "In", "values": [4, 42]},
        }
    ]
}


@pytest.fixture
async def face(backend: str, devcluster: Any) -> AsyncIterator[RunFace]:
    async with open_face("async", devcluster.kubeconfig, backend) as opened:  # type: ignore[arg-type]
        yield opened


def pod_spec(rjob: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return spec


def on_real_node(
    rjob: dict[str, Any], script: str, *, grace: int = 1, shared: Path | None = None
) -> dict[str, Any]:
    """``rjob``'s pods run ``script`` in the shell image on the real node, with ``$ATTEMPT``
    = their ``restart-attempt`` label, ``$JOBSET`` their JobSet and ``$POD`` their name;
    ``shared`` (a folder of the real node's shared folder) is mounted at ``/shared``."""
    spec = RealNode.place(pod_spec(rjob))
    spec["terminationGracePeriodSeconds"] = grace
    label = "metadata.labels['{}']".format
    env = {
        "ATTEMPT": label(labels.RESTART_ATTEMPT),
        "JOBSET": label(labels.JOBSET_NAME),
        "POD": "metadata.name",
    }
    container: dict[str, Any] = {
        "name": "main",
        "image": SHELL_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        "env": [
            {"name": key, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for key, path in env.items()
        ],
    }
    if shared is not None:
        container["volumeMounts"] = [{"name": "shared", "mountPath": "/shared"}]
        spec["volumes"] = [
            {"name": "shared", "hostPath": {"path": str(shared), "type": "Directory"}}
        ]
    spec["containers"] = [container]
    return rjob


async def run_side_by_side(face: RunFace, namespace: str, *jobsets: JobSet) -> list[Outcome]:
    submissions = await asyncio.gather(*(face.submit(js, namespace=namespace) for js in jobsets))
    return list(await asyncio.gather(*(face.wait(s.handle, timeout=WAIT) for s in submissions)))


# ------------------------------------------------------------------ onJobFailureMessagePatterns


def pattern_case(name: str, exit_code: int, *, real_node: bool) -> JobSet:
    """One replicated job of one pod that exits ``exit_code`` (each attempt); the Job fails by
    ``podFailurePolicy``; a rule fails the JobSet when the message matches :data:`FATAL`,
    anything else takes the default ``RestartJobSet`` (one restart, then
    ``ReachedMaxRestarts``)."""
    notes = {"devcluster/exit-code": str(exit_code), "devcluster/run-seconds": "0.5"}
    rjob = replicated_job("w", annotations=notes)
    rjob["template"]["spec"]["podFailurePolicy"] = FAIL_JOB_ON
    if real_node:
        on_real_node(rjob, f"exit {exit_code}")
    rule = {
        "name": "fatal",
        "action": "FailJobSet",
        "onJobFailureReasons": ["PodFailurePolicy"],
        "onJobFailureMessagePatterns": [NOT_RE2, FATAL],
    }
    return load_jobset(jobset(name, rjob, failurePolicy={"maxRestarts": 1, "rules": [rule]}))


def failure_of(devcluster: Any, namespace: str, job: str) -> tuple[str, str]:
    """``(reason, message)`` of the Job's ``Failed=True`` condition."""
    found = devcluster.batch.read_namespaced_job(job, namespace)
    (failed,) = [c for c in found.status.conditions if c.type == "Failed" and c.status == "True"]
    return failed.reason, failed.message


def pattern_cases(*, real_node: bool) -> list[JobSet]:
    """The Job of ``fatal`` fails with exit code 42 (its message matches), that of ``other``
    with exit code 4 (it does not)."""
    return [
        pattern_case("fatal", 42, real_node=real_node),
        pattern_case("other", 4, real_node=real_node),
    ]


def check_pattern_cases(devcluster: Any, namespace: str, matched: Outcome, missed: Outcome) -> None:
    # What the rule saw: the Job controller's message, naming the pod and the exit code.
    for name, code in (("fatal", 42), ("other", 4)):
        reason, message = failure_of(devcluster, namespace, f"{name}-w-0")
        assert reason == "PodFailurePolicy", message
        pod = rf"{namespace}/{name}-w-0-0-[a-z0-9]{{5}}"
        expected = (
            rf"Container main for pod {pod} failed with exit code {code}"
            r" matching FailJob rule at index 0"
        )
        assert re.fullmatch(expected, message), message
    # The rule's action where its pattern matched; the default elsewhere, though the reason is
    # the same and the invalid pattern would match in Python.
    assert (matched.terminal_state, matched.reason, matched.restarts) == (
        "Failed",
        "FailJobSetFailurePolicyAction",
        0,
    ), matched.message
    assert matched.failed_job == "fatal-w-0"
    assert (missed.terminal_state, missed.reason, missed.restarts) == (
        "Failed",
        "ReachedMaxRestarts",
        1,
    ), missed.message


@pytest.mark.cluster
@pytest.mark.nojobset(backend="native")
async def test_a_rule_matches_the_failed_jobs_message(
    face: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    outcomes = await run_side_by_side(face, cluster_namespace, *pattern_cases(real_node=False))
    check_pattern_cases(devcluster, cluster_namespace, *outcomes)


# ------------------------------------------------------------------ BlockingRecreate

#: The margin a held pod of the BlockingRecreate JobSet stays beyond the Recreate twin's delay.
HOLD_SECONDS = 1.5


def restart_case(name: str, strategy: str, *, shared: Path | None = None) -> JobSet:
    """Two replicated jobs of one pod: ``fail`` fails on attempt 0 and succeeds after; ``slow``
    is still running then, and its pods are held (``tests/core/_pod_timeline.py``): on kwok by
    a finalizer; on the real node (given ``shared``, a folder for the pods) the container traps
    SIGTERM and exits only when told, and ``fail`` fails only once ``slow`` runs. One restart,
    then the JobSet completes."""
    fail = replicated_job(
        "fail", annotations={"devcluster/fail-until-attempt": "1", "devcluster/run-seconds": "0.5"}
    )
    slow = replicated_job("slow", annotations={"devcluster/run-seconds": "1", HOLD: "true"})
    if shared is not None:
        wait_for_slow = (
            'if [ "$ATTEMPT" = 0 ]; then i=0; '
            'while [ ! -e "/shared/$JOBSET" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; '
            "exit 1; fi"
        )
        on_real_node(fail, wait_for_slow, shared=shared)
        # attempt 0 runs until the restart stops it, and stops when told; attempt 1 runs 0.5 s
        stop_when_told = (
            """trap 'while [ ! -e "/shared/$POD.go" ]; do sleep 0.1; done; exit 0' TERM; """
            'n=5; if [ "$ATTEMPT" = 0 ]; then n=600; touch "/shared/$JOBSET"; fi; i=0; '
            "while [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done"
        )
        on_real_node(slow, stop_when_told, grace=60, shared=shared)
    else:
        slow["template"]["spec"]["template"]["metadata"]["finalizers"] = [HOLD]
    policy = {"maxRestarts": 1, "restartStrategy": strategy}
    return load_jobset(jobset(name, fail, slow, failurePolicy=policy))


def restart_cases(*, shared: Path | None = None) -> list[JobSet]:
    return [
        restart_case("blocking", "BlockingRecreate", shared=shared),
        restart_case("plain", "Recreate", shared=shared),
    ]


def check_restart_cases(timeline: PodTimeline, blocking: Outcome, plain: Outcome) -> None:
    for outcome in (blocking, plain):
        assert (outcome.terminal_state, outcome.restarts) == ("Completed", 1), outcome.message
    story = {name: timeline.story(name) for name in ("blocking", "plain")}
    assert not timeline.overlaps("blocking"), story["blocking"]
    # The control: the same scenario under Recreate does start a new pod beside an old one.
    assert timeline.overlaps("plain"), story["plain"]
    added = {e.attempt for e in timeline.events("blocking") if e.type == "ADDED"}
    assert added == {0, 1}, story["blocking"]


@pytest.mark.cluster
@pytest.mark.nojobset(backend="native")
async def test_blocking_recreate_starts_no_pod_while_an_old_one_exists(
    face: RunFace, cluster_namespace: str, devcluster: Any
) -> None:
    timeline = PodTimeline(devcluster, cluster_namespace, hold=HOLD_SECONDS, control="plain")
    with timeline:
        outcomes = await run_side_by_side(face, cluster_namespace, *restart_cases())
        timeline.check()
    check_restart_cases(timeline, *outcomes)


# ------------------------------------------------------------------ the real node


@pytest.mark.realnode
async def test_the_message_rule_and_blocking_recreate_on_the_real_node(
    face: RunFace, cluster_namespace: str, devcluster: Any, real_node: RealNode
) -> None:
    """Both scenarios with real containers, at once (a real pod takes seconds to start): the
    rule matched against the message of a Job whose container really exited 42, and
    ``BlockingRecreate`` with an old pod that takes seconds to stop after SIGTERM."""
    assert real_node.shared_dir is not None, "the shared folder of a local devcluster"
    shared = real_node.shared_dir / cluster_namespace
    shared.mkdir(parents=True)
    try:
        cases = [*pattern_cases(real_node=True), *restart_cases(shared=shared)]
        timeline = PodTimeline(
            devcluster, cluster_namespace, hold=HOLD_SECONDS, control="plain", shared=shared
        )
        with timeline:
            outcomes = await run_side_by_side(face, cluster_namespace, *cases)
            timeline.check()
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    check_pattern_cases(devcluster, cluster_namespace, *outcomes[:2])
    check_restart_cases(timeline, *outcomes[2:])


# ------------------------------------------------------------------ the timeline's rules


def ev(seq: int, kind: str, name: str, attempt: int, js: str = "js", **more: Any) -> PodEvent:
    return PodEvent(seq, float(seq), kind, name, js, attempt, **more)


@pytest.mark.parametrize(
    ("events", "found"),
    [
        ([ev(0, "ADDED", "a", 0), ev(1, "DELETED", "a", 0), ev(2, "ADDED", "b", 1)], 0),
        ([ev(0, "ADDED", "a", 0), ev(1, "ADDED", "b", 1), ev(2, "DELETED", "a", 0)], 1),
        # a deleting pod still exists
        (
            [
                ev(0, "ADDED", "a", 0),
                ev(1, "MODIFIED", "a", 0, deleting=True),
                ev(2, "ADDED", "b", 1),
            ],
            1,
        ),
        # two pods of one attempt may coexist, and so may pods of two JobSets
        ([ev(0, "ADDED", "a", 0), ev(1, "ADDED", "b", 0)], 0),
        ([ev(0, "ADDED", "a", 0), ev(1, "ADDED", "b", 1, js="other")], 0),
    ],
    ids=["after", "beside", "beside-a-deleting-one", "same-attempt", "other-jobset"],
)
def test_overlaps_are_pods_of_a_later_attempt_beside_an_earlier_one(
    events: list[PodEvent], found: int
) -> None:
    assert len(overlaps(events)) == found


def restart(js: str, t0: int) -> list[PodEvent]:
    """``slow`` (held) and ``fail`` of attempt 0 deleted; ``fail`` gone at ``t0 + 3``."""
    return [
        ev(t0, "ADDED", f"{js}-slow", 0, js, held=True),
        ev(t0 + 1, "ADDED", f"{js}-fail", 0, js),
        ev(t0 + 2, "MODIFIED", f"{js}-slow", 0, js, held=True, deleting=True),
        ev(t0 + 3, "DELETED", f"{js}-fail", 0, js),
    ]


def test_a_held_pod_goes_once_the_rest_of_its_attempt_is_gone_for_hold_seconds() -> None:
    events = restart("js", 0)
    assert not release_due(events[:3], "js-slow", 100.0, hold=3.0)  # fail still exists
    assert not release_due(events, "js-slow", 5.9, hold=3.0)
    assert release_due(events, "js-slow", 6.0, hold=3.0)
    assert not release_due(events[:2], "js-slow", 100.0, hold=3.0)  # not deleting
    assert release_due([*events, ev(4, "ADDED", "js-fail2", 1)], "js-slow", 4.0, hold=3.0)


def test_a_held_pod_stays_as_long_as_the_recreate_control_needed_to_overlap() -> None:
    blocking = restart("blocking", 0)
    plain = restart("plain", 10)  # its fail pod gone at 13
    due = lambda events, now: release_due(  # noqa: E731
        events, "blocking-slow", now, hold=1.0, control="plain"
    )
    assert not due(blocking, 3.0 + 29.0)  # the control has not overlapped yet
    assert due(blocking, 3.0 + 30.0)  # ... but not for ever
    overlapped = [*blocking, *plain, ev(18, "ADDED", "plain-fail2", 1, "plain")]  # 5 s after
    assert not due(overlapped, 3.0 + 5.9)
    assert due(overlapped, 3.0 + 6.0)
    # the control's own held pod goes at its overlap, not before
    assert not release_due(plain, "plain-slow", 13.0 + 29.0, hold=1.0, control="plain")
    assert release_due(overlapped, "plain-slow", 18.0, hold=1.0, control="plain")
