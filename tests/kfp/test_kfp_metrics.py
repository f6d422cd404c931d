"""Metrics of a finished run: counts per replicated job and durations from the child Jobs."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.outcome import Outcome, Phase, ReplicatedJobCounts
from kfp_components._metrics import metric_values, replicated_job_durations

pytestmark = pytest.mark.kfp

RJOB = "jobset.sigs.k8s.io/replicatedjob-name"


def _job(
    rjob: str | None, start: str | None, end: str | None, how: str = "complete"
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if start:
        status["startTime"] = start
    if end and how == "complete":
        status["completionTime"] = end
    if end and how == "failed":
        status["conditions"] = [{"type": "Failed", "status": "True", "lastTransitionTime": end}]
    labels = {RJOB: rjob} if rjob else {}
    return {"metadata": {"labels": labels}, "status": status}


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([], {}, id="no-jobs"),
        pytest.param(
            [_job("w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z")], {"w": 10.0}, id="one-job"
        ),
        pytest.param(
            [
                _job("w", "2026-01-01T00:00:02Z", "2026-01-01T00:00:10Z"),
                _job("w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z"),
            ],
            {"w": 30.0},
            id="first-start-to-last-end",
        ),
        pytest.param(
            [_job("w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", how="failed")],
            {"w": 5.0},
            id="failed-job-ends-at-its-condition",
        ),
        pytest.param(
            [
                _job("w", "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"),
                _job("w", "2026-01-01T00:00:00Z", None),
            ],
            {},
            id="unfinished-job-not-timed",
        ),
        pytest.param(
            [_job(None, "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z")], {}, id="unlabelled"
        ),
    ],
)
def test_replicated_job_durations(jobs: list[dict[str, Any]], expected: dict[str, float]) -> None:
    assert replicated_job_durations(jobs) == expected


def test_metric_values() -> None:
    outcome = Outcome(
        name="t",
        namespace="n",
        backend="controller",
        phase=Phase.COMPLETED,
        terminal_state="Completed",
        restarts=2,
        duration_seconds=42.0,
        replicated_jobs=(ReplicatedJobCounts(name="w", replicas=2, succeeded=2),),
    )
    assert metric_values(outcome, {"w": 40.0}) == {
        "restarts": 2.0,
        "duration_seconds": 42.0,
        "w.replicas": 2.0,
        "w.succeeded": 2.0,
        "w.failed": 0.0,
        "w.ready": 0.0,
        "w.active": 0.0,
        "w.duration_seconds": 40.0,
    }
