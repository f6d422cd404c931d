"""Fluent fixtures for the policy tests (cf. upstream ``pkg/util/testing/wrappers.go``), and
the tests of :class:`ChildJob` parsing and of the bucketing that everything else builds on.

Other ``test_policy_*`` modules import the builders from here.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels
from jobset_core.defaults import with_defaults
from jobset_core.models import JobSet
from jobset_core.policy import ChildJob, bucket_child_jobs

NS = "default"
T0 = "2024-01-01T00:00:00Z"


def at(minute: int) -> str:
    """A timestamp ``minute`` minutes after :data:`T0`."""
    return f"2024-01-01T00:{minute:02d}:00Z"


class ReplicatedJobWrapper:
    """``MakeReplicatedJob(name)``."""

    def __init__(self, name: str) -> None:
        self._rjob: dict[str, Any] = {
            "name": name,
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            },
        }

    def replicas(self, n: int) -> ReplicatedJobWrapper:
        self._rjob["replicas"] = n
        return self

    def parallelism(self, n: int) -> ReplicatedJobWrapper:
        self._rjob["template"]["spec"]["parallelism"] = n
        return self

    def completions(self, n: int) -> ReplicatedJobWrapper:
        self._rjob["template"]["spec"]["completions"] = n
        return self

    def depends_on(self, name: str, status: str) -> ReplicatedJobWrapper:
        self._rjob.setdefault("dependsOn", []).append({"name": name, "status": status})
        return self

    def obj(self) -> dict[str, Any]:
        return self._rjob


def make_replicated_job(name: str) -> ReplicatedJobWrapper:
    return ReplicatedJobWrapper(name)


class JobSetWrapper:
    """``MakeJobSet(name, ns)``: a JobSet, defaulted like the webhook would on ``obj()``."""

    def __init__(self, name: str, ns: str = NS) -> None:
        self._js: dict[str, Any] = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicatedJobs": []},
        }

    def _set(self, where: str, key: str, value: Any) -> JobSetWrapper:
        self._js[where][key] = value
        return self

    def replicated_job(self, rjob: ReplicatedJobWrapper) -> JobSetWrapper:
        self._js["spec"]["replicatedJobs"].append(rjob.obj())
        return self

    def success_policy(self, operator: str, targets: list[str] | None = None) -> JobSetWrapper:
        self._js["spec"]["successPolicy"] = {"operator": operator}
        if targets is not None:
            self._js["spec"]["successPolicy"]["targetReplicatedJobs"] = targets
        return self

    def failure_policy(
        self,
        max_restarts: int | None = None,
        rules: list[dict[str, Any]] | None = None,
        restart_strategy: str | None = None,
    ) -> JobSetWrapper:
        policy: dict[str, Any] = {}
        if max_restarts is not None:
            policy["maxRestarts"] = max_restarts
        if rules is not None:
            policy["rules"] = rules
        if restart_strategy is not None:
            policy["restartStrategy"] = restart_strategy
        self._js["spec"]["failurePolicy"] = policy
        return self

    def startup_policy(self, order: str) -> JobSetWrapper:
        return self._set("spec", "startupPolicy", {"startupPolicyOrder": order})

    def suspend(self, value: bool) -> JobSetWrapper:
        return self._set("spec", "suspend", value)

    def ttl(self, seconds: int) -> JobSetWrapper:
        return self._set("spec", "ttlSecondsAfterFinished", seconds)

    def managed_by(self, value: str) -> JobSetWrapper:
        return self._set("spec", "managedBy", value)

    def enable_dns_hostnames(self, value: bool) -> JobSetWrapper:
        self._js["spec"].setdefault("network", {})["enableDNSHostnames"] = value
        return self

    def uid(self, value: str) -> JobSetWrapper:
        return self._set("metadata", "uid", value)

    def deletion_timestamp(self, value: str) -> JobSetWrapper:
        return self._set("metadata", "deletionTimestamp", value)

    def status(self, **fields: Any) -> JobSetWrapper:
        """Set status fields in API spelling, e.g. ``restarts=1, conditions=[...]``."""
        self._js.setdefault("status", {}).update(fields)
        return self

    def obj(self) -> JobSet:
        return with_defaults(JobSet.model_validate(self._js))


def make_jobset(name: str = "js", ns: str = NS) -> JobSetWrapper:
    return JobSetWrapper(name, ns)


def cond(
    type_: str, status: str = "True", reason: str = "", message: str = "", at: str = T0
) -> dict[str, Any]:
    """A ``metav1.Condition`` dict for JobSet statuses."""
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


class JobWrapper:
    """``MakeJob(name, ns)``: a child Job as the API server returns it."""

    def __init__(self, jobset: str, rjob: str, index: int, ns: str = NS) -> None:
        name = f"{jobset}-{rjob}-{index}"
        self._job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": f"uid-{name}",
                "labels": {
                    labels.JOBSET_NAME: jobset,
                    labels.REPLICATED_JOB_NAME: rjob,
                    labels.JOB_INDEX: str(index),
                    labels.RESTART_ATTEMPT: "0",
                },
            },
            "spec": {"parallelism": 1, "completions": 1, "suspend": False},
            "status": {},
        }

    def label(self, key: str, value: str | None) -> JobWrapper:
        if value is None:
            self._job["metadata"]["labels"].pop(key, None)
        else:
            self._job["metadata"]["labels"][key] = value
        return self

    def restart_attempt(self, n: int) -> JobWrapper:
        return self.label(labels.RESTART_ATTEMPT, str(n))

    def owner(self, uid: str, kind: str = "JobSet", controller: bool = True) -> JobWrapper:
        self._job["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": kind,
                "name": "js",
                "uid": uid,
                "controller": controller,
            }
        ]
        return self

    def spec(self, **fields: Any) -> JobWrapper:
        self._job["spec"].update(fields)
        return self

    def parallelism(self, n: int | None) -> JobWrapper:
        return self._set("spec", "parallelism", n)

    def completions(self, n: int | None) -> JobWrapper:
        return self._set("spec", "completions", n)

    def suspended(self, value: bool = True) -> JobWrapper:
        return self._set("spec", "suspend", value)

    def ready(self, n: int) -> JobWrapper:
        return self._set("status", "ready", n)

    def active(self, n: int) -> JobWrapper:
        return self._set("status", "active", n)

    def succeeded(self, n: int) -> JobWrapper:
        return self._set("status", "succeeded", n)

    def start_time(self, value: str = T0) -> JobWrapper:
        return self._set("status", "startTime", value)

    def deleting(self, value: str = T0) -> JobWrapper:
        self._job["metadata"]["deletionTimestamp"] = value
        return self

    def condition(
        self, type_: str, status: str = "True", reason: str = "", message: str = "", at: str = T0
    ) -> JobWrapper:
        self._job["status"].setdefault("conditions", []).append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": at,
            }
        )
        return self

    def complete(self, at: str = T0) -> JobWrapper:
        """Upstream test helper ``completeJob``: SuccessCriteriaMet + Complete."""
        self.condition("SuccessCriteriaMet", at=at)
        return self.condition("Complete", at=at)

    def fail(
        self, reason: str = "BackoffLimitExceeded", message: str = "", at: str = T0
    ) -> JobWrapper:
        """Upstream test helper ``failJobWithOptions``: FailureTarget + Failed."""
        self.condition("FailureTarget", reason=reason, message=message, at=at)
        return self.condition("Failed", reason=reason, message=message, at=at)

    def _set(self, part: str, key: str, value: Any) -> JobWrapper:
        if value is None:
            self._job[part].pop(key, None)
        else:
            self._job[part][key] = value
        return self

    def obj(self) -> dict[str, Any]:
        return self._job

    def view(self) -> ChildJob:
        return ChildJob.from_api(self._job)


def make_job(rjob: str = "workers", index: int = 0, jobset: str = "js") -> JobWrapper:
    return JobWrapper(jobset, rjob, index)


# --- ChildJob.from_api -------------------------------------------------------------------------


def test_from_api_reads_what_the_controller_reads() -> None:
    job = (
        make_job("workers", 2)
        .restart_attempt(3)
        .owner("js-uid")
        .parallelism(4)
        .completions(8)
        .suspended()
        .active(2)
        .ready(1)
        .succeeded(3)
        .start_time()
        .deleting("2024-01-01T00:05:00Z")
        .fail("DeadlineExceeded", "too slow", at(7))
        .view()
    )
    assert job.name == "js-workers-2"
    assert (job.namespace, job.uid, job.owner_uid) == (NS, "uid-js-workers-2", "js-uid")
    assert (job.replicated_job, job.job_index, job.restart_attempt) == ("workers", 2, 3)
    assert (job.parallelism, job.completions, job.suspend) == (4, 8, True)
    assert (job.active, job.ready, job.succeeded, job.failed) == (2, 1, 3, 0)
    assert job.start_time == T0
    assert job.deleting
    assert job.finished_type == "Failed"
    assert job.failure is not None
    assert (job.failure.reason, job.failure.message, job.failure.last_transition_time) == (
        "DeadlineExceeded",
        "too slow",
        at(7),
    )


def test_from_api_defaults_like_the_api_server() -> None:
    job = ChildJob.from_api({"metadata": {"name": "x"}})
    assert (job.parallelism, job.completions, job.suspend) == (1, None, False)
    assert (job.active, job.ready, job.succeeded, job.failed) == (0, 0, 0, 0)
    assert (job.replicated_job, job.job_index, job.restart_attempt) == (None, None, None)
    assert job.finished_type is None and job.failure is None and not job.deleting


def test_from_api_accepts_client_objects() -> None:
    class V1ObjectMeta:  # shaped like the official client's models
        openapi_types = {"name": "str", "labels": "dict"}
        attribute_map = {"name": "name", "labels": "labels"}

        def __init__(self) -> None:
            self.name = "js-a-0"
            self.labels = {labels.RESTART_ATTEMPT: "1"}

    class V1Job:
        openapi_types = {"metadata": "V1ObjectMeta"}
        attribute_map = {"metadata": "metadata"}

        def __init__(self) -> None:
            self.metadata = V1ObjectMeta()

    job = ChildJob.from_api(V1Job())
    assert (job.name, job.restart_attempt) == ("js-a-0", 1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("12", 12),
        ("+2", 2),
        ("-1", -1),
        ("", None),
        ("1_0", None),
        (" 1", None),
        ("x", None),
        (None, None),
    ],
    ids=[
        "zero",
        "number",
        "plus-sign",
        "negative",
        "empty",
        "underscore",
        "space",
        "word",
        "missing",
    ],
)
def test_restart_attempt_label_parsed_like_go_atoi(value: str | None, expected: int | None) -> None:
    assert make_job().label(labels.RESTART_ATTEMPT, value).view().restart_attempt == expected


@pytest.mark.parametrize(
    ("conditions", "finished"),
    [
        ([("Complete", "True")], "Complete"),
        ([("Failed", "True")], "Failed"),
        ([("Failed", "False"), ("Complete", "True")], "Complete"),
        ([("Suspended", "True")], None),
        ([("Complete", "Unknown")], None),
        ([("Complete", "True"), ("Failed", "True")], "Complete"),
    ],
    ids=[
        "complete",
        "failed",
        "false-condition-ignored",
        "other-type",
        "unknown-status",
        "first-wins",
    ],
)
def test_finished_type_mirrors_job_finished(
    conditions: list[tuple[str, str]], finished: str | None
) -> None:
    job = make_job()
    for type_, status in conditions:
        job.condition(type_, status)
    assert job.view().finished_type == finished


def test_owner_uid_only_for_a_jobset_controller() -> None:
    assert make_job().owner("u", kind="Deployment").view().owner_uid is None
    assert make_job().owner("u", controller=False).view().owner_uid is None
    assert make_job().view().owner_uid is None


# --- bucket_child_jobs (getChildJobs) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "restarts", "bucket"),
    [
        (make_job().restart_attempt(0), 0, "active"),
        (make_job().restart_attempt(0).complete(), 0, "successful"),
        (make_job().restart_attempt(0).fail(), 0, "failed"),
        (make_job().restart_attempt(0), 1, "previous"),
        (make_job().restart_attempt(0).fail(), 1, "previous"),
        (make_job().restart_attempt(2).complete(), 1, "successful"),
        (make_job().label(labels.RESTART_ATTEMPT, "abc"), 0, "invalid"),
        (make_job().label(labels.RESTART_ATTEMPT, None), 0, "invalid"),
    ],
    ids=[
        "current-attempt-running-is-active",
        "complete-is-successful",
        "failed-is-failed",
        "older-attempt-is-previous",
        "older-failed-is-still-previous",
        "newer-attempt-counts-as-current",
        "non-integer-label",
        "missing-label",
    ],
)
def test_bucket_child_jobs(job: JobWrapper, restarts: int, bucket: str) -> None:
    buckets = bucket_child_jobs([job.view()], restarts)
    placed = {
        name
        for name in ("active", "successful", "failed", "previous", "invalid")
        if getattr(buckets, name)
    }
    assert placed == {bucket}


def test_buckets_keep_list_order_and_names_cover_all() -> None:
    jobs = [make_job("a", i).view() for i in (2, 0, 1)] + [
        make_job("b", 0).restart_attempt(0).fail().view()
    ]
    buckets = bucket_child_jobs(jobs, 0)
    assert [j.name for j in buckets.active] == ["js-a-2", "js-a-0", "js-a-1"]
    assert buckets.names() == {"js-a-0", "js-a-1", "js-a-2", "js-b-0"}
