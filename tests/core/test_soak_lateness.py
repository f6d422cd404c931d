"""The soak splits a task's late seconds at its waiter's verdict line: ours before it (from
the terminal condition, or from the moment that waiter began, whichever is later), Airflow's
the rest. Pure: log files written here in Airflow's structured format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soak.lateness import Said, said_in, split

T0 = 1_800_000_000.0  # the terminal condition


def _iso(at: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def _log(path: Path, *lines: tuple[float, str]) -> None:
    path.write_text(
        "".join(json.dumps({"timestamp": _iso(a), "event": e}) + "\n" for a, e in lines)
    )


DONE = "JobSet soak-ns/soak-t01-ab12cd completed (AllJobsCompleted)"
FAIL = "JobSet soak-ns/soak-t01-ab12cd failed: FailedJobs: a child Job failed"
TRIGGER_SAYS = f"JobSet soak-ns/soak-t01-ab12cd: {DONE}"


def test_a_worker_try_says_its_verdict_in_the_task_log(tmp_path: Path) -> None:
    _log(
        tmp_path / "attempt=2.log",
        (T0 - 30, "starting"),
        (T0 - 29, "JobSet soak-ns/soak-t01-ab12cd is Running"),
        (T0 + 1.5, FAIL),
        (T0 + 1.6, "Task instance in failure state"),
    )
    _log(tmp_path / "attempt=1.log", (T0 - 90, "starting"), (T0 - 80, DONE))  # another try
    said = said_in(tmp_path, 2, "soak-ns", "soak-t01-")
    assert said == Said(at=T0 + 1.5, began=T0 - 30, where="task")


def test_a_deferred_try_says_it_in_the_trigger_log_a_restarted_triggerer_wrote(
    tmp_path: Path,
) -> None:
    _log(tmp_path / "attempt=1.log", (T0 - 60, "starting"), (T0 - 59, "deferring"))
    _log(tmp_path / "attempt=1.log.trigger.7.log", (T0 - 58, "trigger starting"))
    _log(
        tmp_path / "attempt=1.log.trigger.9.log",
        (T0 + 20, "trigger starting"),  # reassigned after the triggerer's restart
        (T0 + 20.4, TRIGGER_SAYS),
    )
    said = said_in(tmp_path, 1, "soak-ns", "soak-t01-")
    assert said == Said(at=T0 + 20.4, began=T0 + 20, where="trigger")


def test_lines_of_other_jobsets_and_progress_lines_are_not_verdicts(tmp_path: Path) -> None:
    _log(
        tmp_path / "attempt=1.log",
        (T0, "JobSet soak-ns/soak-t011-ffff completed (AllJobsCompleted)"),
        (T0, "JobSet other-ns/soak-t01-ab12cd completed (AllJobsCompleted)"),
        (T0 + 1, "JobSet soak-ns/soak-t01-ab12cd is restarting (restart 1), RestartJobSet"),
        (T0 + 2, "not json at all"),
    )
    (tmp_path / "attempt=1.log").write_text(
        (tmp_path / "attempt=1.log").read_text() + "garbage line\n"
    )
    assert said_in(tmp_path, 1, "soak-ns", "soak-t01-") is None


def test_the_operators_work_after_the_verdict_is_read_from_the_task_runners_marks(
    tmp_path: Path,
) -> None:
    """Worker mode: from the verdict line to the end mark (the run's deletion waited for is
    ours); deferred: from the resumption to the end mark, the trigger's event to the
    resumption being Airflow's."""
    _log(
        tmp_path / "attempt=1.log",
        (T0 - 40, "::group::Pre Execute"),
        (T0 - 39, "::endgroup::"),
        (T0 + 1.0, FAIL),
        (T0 + 9.0, "deleted JobSet soak-ns/soak-t01-ab12cd (delete_policy=always)"),
        (T0 + 9.1, "Task failed with exception"),
        (T0 + 9.2, "::group::Post Execute"),
    )
    worker = said_in(tmp_path, 1, "soak-ns", "soak-t01-")
    assert worker == Said(T0 + 1.0, T0 - 40, "task", resumed=T0 - 39, ended=T0 + 9.1)
    found = split(T0, T0 + 10.0, worker)
    assert found is not None and (found.ours, found.airflow) == (9.1, 0.9)

    _log(
        tmp_path / "attempt=2.log",
        (T0 - 40, "::group::Pre Execute"),
        (T0 - 39, "::endgroup::"),
        (T0 - 38, "deferring"),
        (T0 + 6.0, "::group::Pre Execute"),  # resumed after the trigger's event
        (T0 + 6.5, "::endgroup::"),
        (T0 + 7.0, "deleted JobSet soak-ns/soak-t01-ab12cd (delete_policy=always)"),
        (T0 + 7.5, "::group::Post Execute"),
    )
    _log(tmp_path / "attempt=2.log.trigger.3.log", (T0 - 37, "start"), (T0 + 0.5, TRIGGER_SAYS))
    deferred = said_in(tmp_path, 2, "soak-ns", "soak-t01-")
    assert deferred == Said(T0 + 0.5, T0 - 37, "trigger", resumed=T0 + 6.5, ended=T0 + 7.5)
    found = split(T0, T0 + 8.0, deferred)
    assert found is not None and (found.ours, found.airflow) == (1.5, 6.5)


def test_a_triggers_hold_of_its_event_is_ours(tmp_path: Path) -> None:
    """The trigger held its event for Airflow's worker (a run that ended seconds after the
    deferral): the hold is counted as ours."""
    _log(
        tmp_path / "attempt=1.log",
        (T0 - 3, "::group::Pre Execute"),
        (T0 - 2.5, "::endgroup::"),
        (T0 - 2, "deferring"),
        (T0 + 5.0, "::group::Pre Execute"),
        (T0 + 5.5, "::endgroup::"),
        (T0 + 6.0, "::group::Post Execute"),
    )
    _log(
        tmp_path / "attempt=1.log.trigger.1.log",
        (T0 - 1.5, "start"),
        (T0 + 0.5, TRIGGER_SAYS),
        (T0 + 0.5, "the task resumes in 3.5s: Airflow's worker may not have seen ..."),
        (T0 + 4.0, "Trigger fired event"),
    )
    said = said_in(tmp_path, 1, "soak-ns", "soak-t01-")
    assert said == Said(T0 + 0.5, T0 - 1.5, "trigger", T0 + 5.5, T0 + 6.0, held=3.5)
    found = split(T0, T0 + 6.5, said)
    assert found is not None and (found.ours, found.airflow) == (4.5, 2.0)


@pytest.mark.parametrize(
    ("said", "ended", "ours", "airflow"),
    [
        # the waiter ran all along: ours to its line, Airflow's after it
        (Said(at=T0 + 0.8, began=T0 - 50, where="task"), T0 + 3.0, 0.8, 2.2),
        # a trigger reassigned 20 s after the end: those 20 s are Airflow's
        (Said(at=T0 + 20.4, began=T0 + 20, where="trigger"), T0 + 25.0, 0.4, 24.6),
        # whole-second condition times: a line "before" the condition is no negative share
        (Said(at=T0 - 0.3, began=T0 - 50, where="task"), T0 + 1.0, 0.0, 1.0),
        # never more than the lateness itself
        (Said(at=T0 + 9.0, began=T0 - 50, where="task"), T0 + 5.0, 5.0, 0.0),
    ],
)
def test_the_split(said: Said, ended: float, ours: float, airflow: float) -> None:
    found = split(T0, ended, said)
    assert found is not None
    assert (found.ours, found.airflow) == (ours, airflow)


@pytest.mark.parametrize(
    ("outages", "ours", "cluster"),
    [
        # no outage: all ours
        ((), 2.8, 0.0),
        # the API server down while the operator's code after the verdict waited (a soak's
        # t31: 14 s of a resumed try's 14.3 s of work): the cluster's
        (((T0 + 1.0, T0 + 2.5),), 1.5, 1.3),
        # down across the verdict: both spans lose what it covers
        (((T0 + 0.5, T0 + 1.5),), 2.2, 0.6),
        # an outage before the terminal condition, or while Airflow held the task, is nobody's
        (((T0 - 9.0, T0 - 1.0), (T0 + 0.9, T0 + 1.1)), 2.8, 0.0),
        # two outages, both within ours
        (((T0 + 0.1, T0 + 0.3), (T0 + 2.0, T0 + 2.2)), 2.4, 0.4),
    ],
)
def test_ours_while_the_api_server_was_down_is_the_clusters(
    outages: tuple[tuple[float, float], ...], ours: float, cluster: float
) -> None:
    # the waiter says it at +0.8, the operator resumes at +1.2 and ends at +3.2, the task at +4
    said = Said(at=T0 + 0.8, began=T0 - 50, where="trigger", resumed=T0 + 1.2, ended=T0 + 3.2)
    found = split(T0, T0 + 4.0, said, outages)
    assert found is not None
    assert (found.ours, found.cluster, found.airflow) == (ours, cluster, 1.2)


def test_no_verdict_line_no_split() -> None:
    assert split(T0, T0 + 4, None) is None
