"""Condition mechanics (upstream ``updateCondition``/``TestUpdateConditions``), the terminal
helper (``jobSetFinished``) and the TTL decision (``ttl_after_finished.go``)."""

from __future__ import annotations

import datetime as dt

import pytest

from jobset_core.models import Condition, JobSet, JobSetStatus
from jobset_core.policy import (
    ConditionSpec,
    TerminalStatus,
    evaluate_ttl,
    terminal_status,
    update_condition,
)
from jobset_core.policy._time import format_time, parse_time
from tests.core.test_policy_builders import T0, at, cond, make_jobset

NOW = "2024-01-01T01:00:00Z"


def _c(
    type_: str, status: str = "True", reason: str = "R", message: str = "m", t: str = T0
) -> Condition:
    return Condition.model_validate(cond(type_, status, reason, message, t))


_CASES = [
    (
        "adds a True condition",
        [],
        ConditionSpec("Completed", "True", "R", "m"),
        [_c("Completed", t=NOW)],
        True,
    ),
    (
        "never adds a False condition",
        [],
        ConditionSpec("Suspended", "False", "ResumeJobs", "m"),
        [],
        False,
    ),
    (
        "identical condition: no change",
        [_c("Suspended")],
        ConditionSpec("Suspended", "True", "R", "m"),
        [_c("Suspended")],
        False,
    ),
    (
        "status flip replaces it and its time",
        [_c("Suspended")],
        ConditionSpec("Suspended", "False", "X", "y"),
        [_c("Suspended", "False", "X", "y", NOW)],
        True,
    ),
    (
        "same status, new reason: updated, time kept",
        [_c("RestartingJobSet")],
        ConditionSpec("RestartingJobSet", "True", "X", "y"),
        [_c("RestartingJobSet", "True", "X", "y", T0)],
        True,
    ),
    (
        "in progress flipped off when completed arrives",
        [_c("StartupPolicyInProgress")],
        ConditionSpec("StartupPolicyCompleted", "True", "R", "m"),
        [_c("StartupPolicyInProgress", "False"), _c("StartupPolicyCompleted", t=NOW)],
        True,
    ),
    (
        "completed flipped off when in progress arrives",
        [_c("StartupPolicyCompleted")],
        ConditionSpec("StartupPolicyInProgress", "True", "R", "m"),
        [_c("StartupPolicyCompleted", "False"), _c("StartupPolicyInProgress", t=NOW)],
        True,
    ),
    (
        "other conditions untouched",
        [_c("Suspended", "False")],
        ConditionSpec("Completed", "True", "R", "m"),
        [_c("Suspended", "False"), _c("Completed", t=NOW)],
        True,
    ),
]


@pytest.mark.parametrize(
    ("existing", "spec", "expected", "changed"), [c[1:] for c in _CASES], ids=[c[0] for c in _CASES]
)
def test_update_condition(
    existing: list[Condition], spec: ConditionSpec, expected: list[Condition], changed: bool
) -> None:
    update = update_condition(existing, spec, NOW)
    assert list(update.conditions) == expected
    assert update.changed is changed


def test_update_condition_does_not_modify_its_input() -> None:
    existing = [_c("StartupPolicyInProgress")]
    update_condition(existing, ConditionSpec("StartupPolicyCompleted", "True", "R", "m"), NOW)
    assert existing == [_c("StartupPolicyInProgress")]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (None, TerminalStatus("Running")),
        (JobSetStatus(), TerminalStatus("Running")),
        (JobSetStatus(conditions=[_c("Suspended")]), TerminalStatus("Running")),
        (JobSetStatus(conditions=[_c("Completed", "False")]), TerminalStatus("Running")),
        (
            JobSetStatus(
                conditions=[
                    _c(
                        "Completed",
                        reason="AllJobsCompleted",
                        message="jobset completed successfully",
                    )
                ],
                terminal_state="Completed",
            ),
            TerminalStatus("Completed", "AllJobsCompleted", "jobset completed successfully", T0),
        ),
        (
            JobSetStatus(
                conditions=[_c("Failed", reason="ReachedMaxRestarts", message="x", t=at(5))]
            ),
            TerminalStatus("Failed", "ReachedMaxRestarts", "x", at(5)),
        ),
        (JobSetStatus(terminal_state="Failed"), TerminalStatus("Failed")),
    ],
    ids=[
        "never-reconciled",
        "empty",
        "suspended-is-running",
        "false-completed",
        "completed",
        "failed",
        "terminal-state-without-condition",
    ],
)
def test_terminal_status(status: JobSetStatus | None, expected: TerminalStatus) -> None:
    got = terminal_status(status)
    assert got == expected
    assert got.finished is (expected.state != "Running")


def _finished_js(ttl: int | None, finished_at: str | None = T0, deleting: bool = False) -> JobSet:
    builder = make_jobset()
    if ttl is not None:
        builder.ttl(ttl)
    if deleting:
        builder.deletion_timestamp(NOW)
    condition = cond("Completed", "True", "AllJobsCompleted")
    if finished_at is None:
        del condition["lastTransitionTime"]
    else:
        condition["lastTransitionTime"] = finished_at
    return builder.status(conditions=[condition], terminalState="Completed").obj()


T_NOW = dt.datetime(2024, 1, 1, 0, 10, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("ttl", "finished_at", "deleting", "expected"),
    [
        (0, T0, False, (True, None, T0)),
        (600, T0, False, (True, None, at(10))),
        (900, T0, False, (False, 300.0, at(15))),
        (60, None, False, (False, None, None)),
        (0, T0, True, (False, -600.0, T0)),
    ],
    ids=[
        "zero-ttl-deletes-now",
        "expired-exactly-now",
        "not-expired-requeues",
        "unknown-finish-time",
        "already-deleting",
    ],
)
def test_evaluate_ttl(
    ttl: int,
    finished_at: str | None,
    deleting: bool,
    expected: tuple[bool, float | None, str | None],
) -> None:
    decision = evaluate_ttl(_finished_js(ttl, finished_at, deleting), T_NOW)
    assert decision is not None
    assert (decision.delete_jobset, decision.requeue_after_seconds, decision.expire_at) == expected


def test_no_ttl_decision_without_ttl_or_before_finishing() -> None:
    assert evaluate_ttl(_finished_js(None), T_NOW) is None
    assert evaluate_ttl(make_jobset().ttl(0).obj(), T_NOW) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01T00:00:00Z", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        ("2024-01-01T01:00:00+01:00", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        (
            "2024-01-01T00:00:00.123456789Z",
            dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=dt.UTC),
        ),
        ("yesterday", None),
        (None, None),
    ],
    ids=["utc", "offset", "nanoseconds", "garbage", "absent"],
)
def test_parse_time(text: str | None, expected: dt.datetime | None) -> None:
    assert parse_time(text) == expected


def test_format_time_is_metav1_shape() -> None:
    assert format_time(
        dt.datetime(2024, 1, 1, 2, 3, 4, 999, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    ) == ("2024-01-01T01:03:04Z")
