"""``replicatedJobsStatus`` counts, mirroring upstream ``TestCalculateReplicatedJobStatuses``."""

from __future__ import annotations

import pytest

from jobset_core.models import JobSet, ReplicatedJobStatus
from jobset_core.policy import all_jobs_ready, bucket_child_jobs, replicated_jobs_status
from jobset_core.policy.counts import job_is_ready
from tests.core.test_policy_builders import JobWrapper, make_job, make_jobset, make_replicated_job


def _jobset() -> JobSet:
    return (
        make_jobset("test-jobset")
        .replicated_job(make_replicated_job("replicated-job-1").replicas(1))
        .replicated_job(make_replicated_job("replicated-job-2").replicas(3))
        .obj()
    )


def _rj(name: str, **counts: int) -> ReplicatedJobStatus:
    return ReplicatedJobStatus(name=name, **counts)


def _job(rjob: str, index: int) -> JobWrapper:
    return make_job(rjob, index, jobset="test-jobset")


CASES = {
    "partial jobs are ready, no succeeded jobs": (
        [
            _job("replicated-job-1", 0).parallelism(1).completions(2).ready(1).succeeded(1),
            _job("replicated-job-2", 0).parallelism(5).completions(None).ready(2).succeeded(3),
            _job("replicated-job-2", 1).parallelism(3).completions(2).ready(1).succeeded(1),
            _job("replicated-job-2", 2).parallelism(2).completions(3).ready(2).succeeded(1),
            _job("replicated-job-2", 3).parallelism(4).completions(5).ready(2).succeeded(1),
        ],
        [_rj("replicated-job-2", ready=3), _rj("replicated-job-1", ready=1)],
    ),
    "no jobs created": ([], [_rj("replicated-job-2"), _rj("replicated-job-1")]),
    "partial jobs created": (
        [_job("replicated-job-2", 0).parallelism(5).completions(None).ready(2).succeeded(3)],
        [_rj("replicated-job-2", ready=1), _rj("replicated-job-1")],
    ),
    "no ready jobs, only succeeded jobs": (
        [_job("replicated-job-2", 0).complete(), _job("replicated-job-1", 0).complete()],
        [_rj("replicated-job-2", succeeded=1), _rj("replicated-job-1", succeeded=1)],
    ),
    "no ready jobs, only failed jobs": (
        [
            _job("replicated-job-2", 0).fail(),
            _job("replicated-job-1", 0).fail(),
            _job("replicated-job-1", 1).fail(),
            _job("replicated-job-1", 2).fail(),
        ],
        [_rj("replicated-job-2", failed=1), _rj("replicated-job-1", failed=3)],
    ),
    "active jobs": (
        [
            _job("replicated-job-1", 0).parallelism(5).active(1),
            _job("replicated-job-2", 0).parallelism(5),
            _job("replicated-job-2", 1).parallelism(1).active(1),
        ],
        [_rj("replicated-job-2", active=1), _rj("replicated-job-1", active=1)],
    ),
    "suspended jobs": (
        [
            _job("replicated-job-1", 0).parallelism(5).suspended(),
            _job("replicated-job-2", 0).parallelism(5),
            _job("replicated-job-2", 1).parallelism(1).suspended(),
        ],
        [_rj("replicated-job-2", suspended=1), _rj("replicated-job-1", suspended=1)],
    ),
    "jobs of unknown or missing replicated job are skipped": (
        [
            _job("other", 0).ready(1),
            _job("replicated-job-1", 0)
            .label("jobset.sigs.k8s.io/replicatedjob-name", None)
            .complete(),
        ],
        [_rj("replicated-job-2"), _rj("replicated-job-1")],
    ),
}


@pytest.mark.parametrize(("jobs", "expected"), list(CASES.values()), ids=list(CASES))
def test_replicated_jobs_status(
    jobs: list[JobWrapper], expected: list[ReplicatedJobStatus]
) -> None:
    got = replicated_jobs_status(_jobset(), bucket_child_jobs([j.view() for j in jobs], 0))
    assert got == expected


def test_previous_attempt_jobs_are_not_counted() -> None:
    jobs = [_job("replicated-job-1", 0).restart_attempt(0).complete().view()]
    got = replicated_jobs_status(_jobset(), bucket_child_jobs(jobs, 1))
    assert got == [_rj("replicated-job-2"), _rj("replicated-job-1")]


def test_order_is_name_descending_like_the_written_status() -> None:
    js = (
        make_jobset()
        .replicated_job(make_replicated_job("b"))
        .replicated_job(make_replicated_job("c"))
        .replicated_job(make_replicated_job("a"))
        .obj()
    )
    assert [s.name for s in replicated_jobs_status(js, bucket_child_jobs([], 0))] == ["c", "b", "a"]


@pytest.mark.parametrize(
    ("parallelism", "completions", "ready", "succeeded", "expected"),
    [
        (1, None, 1, 0, True),
        (1, None, 0, 0, False),
        (None, None, 1, 0, True),
        (4, 2, 1, 1, True),
        (4, 8, 3, 0, False),
        (4, 8, 2, 2, True),
        (0, None, 0, 0, True),
    ],
    ids=[
        "one-pod-ready",
        "one-pod-not-ready",
        "parallelism-defaults-to-1",
        "completions-below-parallelism",
        "completions-above-parallelism-not-ready",
        "succeeded-counts-as-ready",
        "zero-parallelism-is-ready",
    ],
)
def test_job_is_ready(
    parallelism: int | None, completions: int | None, ready: int, succeeded: int, expected: bool
) -> None:
    job = (
        make_job()
        .parallelism(parallelism)
        .completions(completions)
        .ready(ready)
        .succeeded(succeeded)
    )
    assert job_is_ready(job.view()) is expected


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([_rj("replicated-job-1", ready=1), _rj("replicated-job-2", ready=2, succeeded=1)], True),
        ([_rj("replicated-job-1", ready=1), _rj("replicated-job-2", ready=2)], False),
        ([_rj("replicated-job-1", failed=1), _rj("replicated-job-2", ready=3)], False),
    ],
    ids=["ready-plus-succeeded-equal-replicas", "one-short", "failed-does-not-count"],
)
def test_all_jobs_ready(statuses: list[ReplicatedJobStatus], expected: bool) -> None:
    assert all_jobs_ready(_jobset(), statuses) is expected
