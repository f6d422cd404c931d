"""Success policy, mirroring upstream ``success_policy_test.go``."""

from __future__ import annotations

import pytest

from jobset_core.models import JobSet
from jobset_core.policy import SuccessDecision, evaluate_success
from jobset_core.policy.success import (
    job_matches_success_policy,
    num_jobs_expected_to_succeed,
    num_jobs_matching_success_policy,
    replicated_job_matches_success_policy,
)
from tests.core.test_policy_builders import make_job, make_jobset, make_replicated_job

RJ1, RJ2, RJ3, RJ4 = (
    "test-replicated-job-1",
    "test-replicated-job-2",
    "test-replicated-job-3",
    "test-replicated-job-4",
)


def _js(
    operator: str = "All", targets: list[str] | None = None, replicas: tuple[int, ...] = ()
) -> JobSet:
    builder = make_jobset("test-jobset").success_policy(operator, targets)
    for i, n in enumerate(replicas, start=1):
        builder.replicated_job(make_replicated_job(f"test-replicated-job-{i}").replicas(n))
    return builder.obj()


@pytest.mark.parametrize(
    ("targets", "rjob", "expected"),
    [([], RJ1, True), ([RJ1, RJ2], RJ1, True), ([RJ1, RJ2], RJ3, False)],
    ids=[
        "jobset's TargetReplicatedJobs is empty",
        "job matches one of the TargetReplicatedJobs",
        "job does not match any of the TargetReplicatedJobs",
    ],
)
def test_job_matches_success_policy(targets: list[str], rjob: str, expected: bool) -> None:
    assert job_matches_success_policy(_js(targets=targets), make_job(rjob).view()) is expected


@pytest.mark.parametrize(
    ("targets", "rjob", "expected"),
    [([], RJ1, True), ([RJ1, RJ2], RJ1, True), ([RJ1, RJ2], RJ3, False)],
    ids=["jobset's TargetReplicatedJobs is empty", "matching case", "non-matching case"],
)
def test_replicated_job_matches_success_policy(
    targets: list[str], rjob: str, expected: bool
) -> None:
    js = _js(targets=targets, replicas=(1, 1, 1))
    replicated_job = js.replicated_job(rjob)
    assert replicated_job is not None
    assert replicated_job_matches_success_policy(js, replicated_job) is expected


@pytest.mark.parametrize(
    ("targets", "rjobs", "expected"),
    [
        ([RJ1, RJ2], [RJ1, RJ3], 1),
        ([RJ1, RJ2], [RJ1, RJ2], 2),
        ([RJ1, RJ2], [RJ3, RJ4], 0),
        ([], [RJ1, RJ2], 2),
    ],
    ids=[
        "one job matches the success policy",
        "all jobs matches the success policy",
        "non job matches the success policy",
        "empty target replicated jobs, all job matches the success policy",
    ],
)
def test_num_jobs_matching_success_policy(
    targets: list[str], rjobs: list[str], expected: int
) -> None:
    jobs = [make_job(rjob).view() for rjob in rjobs]
    assert num_jobs_matching_success_policy(_js(targets=targets), jobs) == expected


@pytest.mark.parametrize(
    ("operator", "targets", "expected"),
    [
        ("Any", None, 1),
        ("All", [RJ1, RJ2], 3),
        ("All", [RJ1, RJ3], 4),
        ("All", None, 6),
        ("All", [], 6),
    ],
    ids=[
        "any single job matching the jobSelector",
        "all replicated jobs match success policy",
        "some replicated jobs don't match success policy",
        "no targets means every replicated job",
        "empty targets means every replicated job",
    ],
)
def test_num_jobs_expected_to_succeed(
    operator: str, targets: list[str] | None, expected: int
) -> None:
    assert num_jobs_expected_to_succeed(_js(operator, targets, (1, 2, 3))) == expected


@pytest.mark.parametrize(
    ("operator", "targets", "succeeded", "expected"),
    [
        ("All", None, [RJ1, RJ2, RJ2], SuccessDecision("All", (), 3, 3, True)),
        ("All", None, [RJ1, RJ2], SuccessDecision("All", (), 3, 2, False)),
        ("All", [RJ2], [RJ2, RJ2], SuccessDecision("All", (RJ2,), 2, 2, True)),
        ("All", [RJ2], [RJ1, RJ2], SuccessDecision("All", (RJ2,), 2, 1, False)),
        ("Any", None, [RJ1], SuccessDecision("Any", (), 1, 1, True)),
        ("Any", [RJ2], [RJ1], SuccessDecision("Any", (RJ2,), 1, 0, False)),
    ],
    ids=[
        "all-every-job-succeeded",
        "all-one-missing",
        "all-targeted-done-other-running",
        "all-targeted-one-missing",
        "any-one-job",
        "any-untargeted-job-does-not-count",
    ],
)
def test_evaluate_success(
    operator: str, targets: list[str] | None, succeeded: list[str], expected: SuccessDecision
) -> None:
    jobs = [make_job(rjob, i).complete().view() for i, rjob in enumerate(succeeded)]
    assert evaluate_success(_js(operator, targets, (1, 2)), jobs) == expected


def test_absent_success_policy_behaves_like_the_webhook_default() -> None:
    js = _js(replicas=(1,)).model_copy(deep=True)
    js.spec.success_policy = None
    assert evaluate_success(js, [make_job(RJ1).complete().view()]).met
