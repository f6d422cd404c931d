"""The failure policy on the devcluster, on both backends: what the pure tables of
``test_policy_failure.py`` decide, held to real child Jobs.

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
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobset_core.models import JobSet, load_jobset
from jobset_core.outcome import Outcome
from tests.cluster.bodies import jobset, replicated_job
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


async def run_side_by_side(face: RunFace, namespace: str, *jobsets: JobSet) -> list[Outcome]:
    submissions = await asyncio.gather(*(face.submit(js, namespace=namespace) for js in jobsets))
    return list(await asyncio.gather(*(face.wait(s.handle, timeout=WAIT) for s in submissions)))


# ------------------------------------------------------------------ onJobFailureMessagePatterns


def pattern_case(name: str, exit_code: int) -> JobSet:
    """One replicated job of one pod that exits ``exit_code`` (each attempt); the Job fails by
    ``podFailurePolicy``; a rule fails the JobSet when the message matches :data:`FATAL`,
    anything else takes the default ``RestartJobSet`` (one restart, then
    ``ReachedMaxRestarts``)."""
    notes = {"devcluster/exit-code": str(exit_code), "devcluster/run-seconds": "0.5"}
    rjob = replicated_job("w", annotations=notes)
    rjob["template"]["spec"]["podFailurePolicy"] = FAIL_JOB_ON
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


def pattern_cases() -> list[JobSet]:
    """The Job of ``fatal`` fails with exit code 42 (its message matches), that of ``other``
    with exit code 4 (it does not)."""
    return [
        pattern_case("fatal", 42),
        pattern_case("other", 4),
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
    outcomes = await run_side_by_side(face, cluster_namespace, *pattern_cases())
    check_pattern_cases(devcluster, cluster_namespace, *outcomes)
