"""Failure policy, mirroring upstream ``failure_policy_test.go`` (and the v0.12 strings)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.models import FailurePolicyRule, JobSet
from jobset_core.policy import (
    ChildJob,
    ConditionSpec,
    FailedJobRef,
    FailureDecision,
    PlannedEvent,
    evaluate_failure,
)
from jobset_core.policy.failure import (
    find_first_failed_job,
    find_first_failed_policy_rule_and_job,
    rule_is_applicable,
)
from tests.core.test_policy_builders import at, make_job, make_jobset, make_replicated_job

RJ1, RJ2 = "test-replicated-job-1", "test-replicated-job-2"
BACKOFF, DEADLINE, INDEXES = "BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes"


def _failed(
    name_index: int, minute: int, reason: str = "", rjob: str = RJ1, message: str = ""
) -> ChildJob:
    return make_job(rjob, name_index).fail(reason, message, at(minute)).view()


def _rule(action: str = "RestartJobSet", **fields: Any) -> FailurePolicyRule:
    return FailurePolicyRule.model_validate({"action": action, **fields})


# --- findFirstFailedJob -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        ([], None),
        ([_failed(1, 59)], "js-test-replicated-job-1-1"),
        ([_failed(1, 57), _failed(2, 55)], "js-test-replicated-job-1-2"),
        ([make_job(RJ1, 1).view(), make_job(RJ1, 2).view()], None),
        ([_failed(1, 5), _failed(2, 5)], "js-test-replicated-job-1-1"),
        (
            [_failed(1, 5), make_job(RJ1, 2).condition("Failed", at="").view()],
            "js-test-replicated-job-1-2",
        ),
    ],
    ids=[
        "No failed jobs",
        "Single failed job",
        "Multiple failed jobs, earliest first",
        "Jobs without failed condition",
        "tie keeps list order",
        "missing time counts as earliest (Go zero time)",
    ],
)
def test_find_first_failed_job(jobs: list[ChildJob], expected: str | None) -> None:
    found = find_first_failed_job(jobs)
    assert (found.name if found else None) == expected


# --- ruleIsApplicable ---------------------------------------------------------------------------

_APPLICABLE = [
    ("all parent replicated jobs, all reasons", {}, RJ1, BACKOFF, "", True),
    ("all parents, matching reason", {"onJobFailureReasons": [BACKOFF]}, RJ1, BACKOFF, "", True),
    ("all parents, other reason", {"onJobFailureReasons": [BACKOFF]}, RJ1, DEADLINE, "", False),
    ("matching parent, all reasons", {"targetReplicatedJobs": [RJ1]}, RJ1, BACKOFF, "", True),
    (
        "matching parent and reason",
        {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]},
        RJ1,
        BACKOFF,
        "",
        True,
    ),
    (
        "matching parent, other reason",
        {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]},
        RJ1,
        DEADLINE,
        "",
        False,
    ),
    ("other parent, all reasons", {"targetReplicatedJobs": [RJ1]}, RJ2, BACKOFF, "", False),
    (
        "other parent, matching reason",
        {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]},
        RJ2,
        BACKOFF,
        "",
        False,
    ),
    (
        "other parent and reason",
        {"onJobFailureReasons": [BACKOFF], "targetReplicatedJobs": [RJ1]},
        RJ2,
        DEADLINE,
        "",
        False,
    ),
    (
        "pattern found inside the message",
        {"onJobFailureMessagePatterns": ["critical"]},
        RJ1,
        "PodFailurePolicy",
        "some critical error",
        True,
    ),
    (
        "pattern not in the message",
        {"onJobFailureMessagePatterns": ["some message"]},
        RJ1,
        "PodFailurePolicy",
        "some critical error with a message",
        False,
    ),
    (
        "anchored pattern",
        {"onJobFailureMessagePatterns": ["matching FailJob rule at index 1$"]},
        RJ1,
        "PodFailurePolicy",
        "Container main for pod x failed with exit code 42 matching FailJob rule at index 1",
        True,
    ),
    (
        "any of several patterns",
        {"onJobFailureMessagePatterns": ["nope", "exit code [0-9]+"]},
        RJ1,
        "",
        "exit code 3",
        True,
    ),
    (
        "invalid pattern skipped, valid one matches",
        {"onJobFailureMessagePatterns": ["(", "boom"]},
        RJ1,
        "",
        "boom",
        True,
    ),
    (
        "only invalid patterns never match",
        {"onJobFailureMessagePatterns": ["("]},
        RJ1,
        "",
        "(",
        False,
    ),
    (
        "comment group is not RE2",
        {"onJobFailureMessagePatterns": ["(?#c)boom"]},
        RJ1,
        "",
        "boom",
        False,
    ),
    (
        "look-ahead is not RE2",
        {"onJobFailureMessagePatterns": ["boom(?=!)"]},
        RJ1,
        "",
        "boom!",
        False,
    ),
    (
        "case-insensitive flag",
        {"onJobFailureMessagePatterns": ["(?i)node .* not ready"]},
        RJ1,
        "",
        "Node x NOT READY",
        True,
    ),
    ("RE2 end of text", {"onJobFailureMessagePatterns": [r"index 0\z"]}, RJ1, "", "index 0", True),
    (
        "reason and pattern both required",
        {"onJobFailureReasons": [BACKOFF], "onJobFailureMessagePatterns": ["x"]},
        RJ1,
        DEADLINE,
        "x",
        False,
    ),
]


@pytest.mark.parametrize(
    ("rule", "parent", "reason", "message", "expected"),
    [case[1:] for case in _APPLICABLE],
    ids=[case[0] for case in _APPLICABLE],
)
def test_rule_is_applicable(
    rule: dict[str, Any], parent: str, reason: str, message: str, expected: bool
) -> None:
    job = make_job(parent).fail(reason, message).view()
    assert rule_is_applicable(_rule(**rule), job) is expected


def test_rule_never_applies_to_a_job_without_parent_label() -> None:
    job = make_job().label("jobset.sigs.k8s.io/replicatedjob-name", None).fail().view()
    assert rule_is_applicable(_rule(), job) is False


# --- findFirstFailedPolicyRuleAndJob ------------------------------------------------------------

JOB1 = _failed(1, 54, BACKOFF)
JOB1_EARLIER = _failed(9, 48, BACKOFF)
JOB2 = _failed(2, 57, DEADLINE)
JOB3 = _failed(3, 59, INDEXES)
RULE1 = _rule(name="r1", onJobFailureReasons=[BACKOFF])
RULE2 = _rule(name="r2", onJobFailureReasons=[DEADLINE])
RULE3 = _rule(name="r3", onJobFailureReasons=[INDEXES])
UNMATCHED = _rule(name="unmatched", targetReplicatedJobs=["fakeReplicatedJobName"])

_FIRST_RULE = [
    ("0 failed jobs, 0 rules", [], [], None, None),
    ("1 failed job, 0 rules", [], [JOB1], None, None),
    ("1 failed job, 1 rule not matching", [RULE2], [JOB1], None, None),
    ("1 failed job matching the first of 3 rules", [RULE1, RULE2, RULE3], [JOB1], 0, JOB1),
    ("1 failed job matching the second of 3 rules", [RULE1, RULE2, RULE3], [JOB2], 1, JOB2),
    ("1 failed job matching the third of 3 rules", [RULE1, RULE2, RULE3], [JOB3], 2, JOB3),
    ("2 failed jobs, 0 rules", [], [JOB1, JOB2], None, None),
    ("2 failed jobs, 1 rule matching neither", [RULE2], [JOB1, JOB1_EARLIER], None, None),
    (
        "2 failed jobs, 1 rule matching both: the earlier one",
        [RULE1],
        [JOB1, JOB1_EARLIER],
        0,
        JOB1_EARLIER,
    ),
    (
        "first rule matches none, second matches both",
        [UNMATCHED, RULE1],
        [JOB1, JOB1_EARLIER],
        1,
        JOB1_EARLIER,
    ),
    (
        "first matching rule wins over an earlier-failing job",
        [RULE2, RULE1],
        [JOB1_EARLIER, JOB2],
        0,
        JOB2,
    ),
]


@pytest.mark.parametrize(
    ("rules", "jobs", "index", "job"), [c[1:] for c in _FIRST_RULE], ids=[c[0] for c in _FIRST_RULE]
)
def test_find_first_failed_policy_rule_and_job(
    rules: list[FailurePolicyRule], jobs: list[ChildJob], index: int | None, job: ChildJob | None
) -> None:
    match = find_first_failed_policy_rule_and_job(rules, jobs)
    assert (match.index if match else None, match.job if match else None) == (index, job)


# --- executeFailurePolicy / applyFailurePolicyRuleAction ----------------------------------------


def _js(policy: dict[str, Any] | None, restarts: int = 0, towards_max: int = 0) -> JobSet:
    builder = make_jobset().replicated_job(make_replicated_job(RJ1).replicas(3))
    builder.replicated_job(make_replicated_job(RJ2))
    if policy is not None:
        builder.failure_policy(**policy)
    return builder.status(restarts=restarts, restartsCountTowardsMax=towards_max).obj()


def _ref(job: ChildJob) -> FailedJobRef:
    return FailedJobRef.of(job)


FIRST = _failed(1, 10, BACKOFF, message="boom")
LATER = _failed(2, 20, DEADLINE, rjob=RJ2)
NAME = FIRST.name
IGNORE_MAX_MESSAGE = (
    f"applying RestartJobSetAndIgnoreMaxRestarts failure policy action (first failed job: {NAME})"
)

_APPLY = [
    (
        "no failure policy: FailedJobs",
        None,
        0,
        0,
        [LATER, FIRST],
        FailureDecision(
            "Fail",
            None,
            None,
            None,
            _ref(FIRST),
            0,
            0,
            ConditionSpec(
                "Failed",
                "True",
                "FailedJobs",
                f"jobset failed due to one or more job failures (first failed job: {NAME})",
                "Warning",
            ),
            None,
        ),
    ),
    (
        "FailJobSet action",
        {"rules": [{"name": "stop", "action": "FailJobSet"}]},
        0,
        0,
        [FIRST],
        FailureDecision(
            "Fail",
            "FailJobSet",
            "stop",
            0,
            _ref(FIRST),
            0,
            0,
            ConditionSpec(
                "Failed",
                "True",
                "FailJobSetFailurePolicyAction",
                f"applying FailJobSet failure policy action (first failed job: {NAME})",
                "Warning",
            ),
            None,
        ),
    ),
    (
        "RestartJobSet when restarts < maxRestarts increments restarts and counts towards max",
        {"max_restarts": 5, "rules": [{"name": "again", "action": "RestartJobSet"}]},
        1,
        1,
        [FIRST],
        FailureDecision(
            "Restart",
            "RestartJobSet",
            "again",
            0,
            _ref(FIRST),
            2,
            2,
            ConditionSpec(
                "RestartingJobSet",
                "True",
                "FailurePolicy_again",
                f"applying RestartJobSet failure policy action (first failed job: {NAME})",
                "Warning",
                False,
            ),
            PlannedEvent(
                "Warning",
                "RestartJobSetFailurePolicyAction",
                f"applying RestartJobSet failure policy action (first failed job: {NAME})",
            ),
        ),
    ),
    (
        "RestartJobSet action when restarts >= maxRestarts fails the jobset",
        {"max_restarts": 2, "rules": [{"name": "again", "action": "RestartJobSet"}]},
        2,
        2,
        [FIRST],
        FailureDecision(
            "Fail",
            "RestartJobSet",
            "again",
            0,
            _ref(FIRST),
            2,
            2,
            ConditionSpec(
                "Failed",
                "True",
                "ReachedMaxRestarts",
                f"jobset failed due to reaching max number of restarts (first failed job: {NAME})",
                "Warning",
            ),
            None,
        ),
    ),
    (
        "RestartJobSetAndIgnoreMaxRestarts action does not count toward max restarts",
        {
            "max_restarts": 1,
            "rules": [{"name": "infra", "action": "RestartJobSetAndIgnoreMaxRestarts"}],
        },
        1,
        1,
        [FIRST],
        FailureDecision(
            "Restart",
            "RestartJobSetAndIgnoreMaxRestarts",
            "infra",
            0,
            _ref(FIRST),
            2,
            1,
            ConditionSpec(
                "RestartingJobSet",
                "True",
                "FailurePolicy_infra",
                IGNORE_MAX_MESSAGE,
                "Warning",
                False,
            ),
            PlannedEvent(
                "Warning",
                "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                IGNORE_MAX_MESSAGE,
            ),
        ),
    ),
    (
        "no rule matches: default RestartJobSet on the first failed job",
        {
            "max_restarts": 3,
            "rules": [{"name": "other", "action": "FailJobSet", "onJobFailureReasons": [INDEXES]}],
        },
        0,
        0,
        [LATER, FIRST],
        FailureDecision(
            "Restart",
            "RestartJobSet",
            None,
            None,
            _ref(FIRST),
            1,
            1,
            ConditionSpec(
                "RestartingJobSet",
                "True",
                "DefaultFailurePolicy",
                f"applying RestartJobSet failure policy action (first failed job: {NAME})",
                "Warning",
                False,
            ),
            PlannedEvent(
                "Warning",
                "RestartJobSetFailurePolicyAction",
                f"applying RestartJobSet failure policy action (first failed job: {NAME})",
            ),
        ),
    ),
    (
        "empty failure policy: maxRestarts 0 fails on the first failure",
        {},
        0,
        0,
        [FIRST],
        FailureDecision(
            "Fail",
            "RestartJobSet",
            None,
            None,
            _ref(FIRST),
            0,
            0,
            ConditionSpec(
                "Failed",
                "True",
                "ReachedMaxRestarts",
                f"jobset failed due to reaching max number of restarts (first failed job: {NAME})",
                "Warning",
            ),
            None,
        ),
    ),
    (
        "matching rule picks its own earliest job, not the globally first one",
        {
            "rules": [
                {"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": [DEADLINE]}
            ]
        },
        0,
        0,
        [FIRST, LATER],
        FailureDecision(
            "Fail",
            "FailJobSet",
            "deadline",
            0,
            _ref(LATER),
            0,
            0,
            ConditionSpec(
                "Failed",
                "True",
                "FailJobSetFailurePolicyAction",
                f"applying FailJobSet failure policy action (first failed job: {LATER.name})",
                "Warning",
            ),
            None,
        ),
    ),
    (
        "RestartJob needs the alpha gate: unsupported, counters untouched",
        {"max_restarts": 3, "rules": [{"name": "one", "action": "RestartJob"}]},
        1,
        1,
        [FIRST],
        FailureDecision("Unsupported", "RestartJob", "one", 0, _ref(FIRST), 1, 1, None, None),
    ),
]


@pytest.mark.parametrize(
    ("policy", "restarts", "towards_max", "failed", "expected"),
    [c[1:] for c in _APPLY],
    ids=[c[0] for c in _APPLY],
)
def test_evaluate_failure(
    policy: dict[str, Any] | None,
    restarts: int,
    towards_max: int,
    failed: list[ChildJob],
    expected: FailureDecision,
) -> None:
    assert evaluate_failure(_js(policy, restarts, towards_max), failed) == expected


def test_no_failed_job_means_no_decision() -> None:
    assert evaluate_failure(_js(None), []) is None


def test_decision_reports_the_failed_jobs_reason_and_message() -> None:
    decision = evaluate_failure(_js({"max_restarts": 1}), [FIRST])
    assert decision is not None
    assert decision.failed_job == FailedJobRef(NAME, RJ1, BACKOFF, "boom", at(10))
    assert not decision.terminal


def test_rule_without_name_gives_the_empty_suffix_like_upstream() -> None:
    js = _js({"max_restarts": 1, "rules": [{"name": "x", "action": "RestartJobSet"}]})
    assert js.spec.failure_policy is not None and js.spec.failure_policy.rules is not None
    js.spec.failure_policy.rules[0].name = None
    decision = evaluate_failure(js, [FIRST])
    assert decision is not None and decision.condition is not None
    assert decision.condition.reason == "FailurePolicy_"
