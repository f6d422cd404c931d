"""Pods that can never be created (pure): which ``FailedCreate`` messages are refusals, which
Jobs they hold back, since when, and when the run fails.

The messages are the API server's (v1.36) as the Job controller quotes them in its Events, as
the devcluster wrote them (``test_run_pod_create.py`` meets them for real); the Job, pod and
Event shapes are the observer's trimmed ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.policy.pod_create import (
    FAILED_CREATE,
    PODS_REFUSED,
    QUOTA_GRACE,
    check_pod_creates,
    describe_refused,
    read_refusal,
)

# The same clock as the pod start rules' table: times from ``T0``, ``NOW`` its epoch.
from tests.core.test_policy_pod_start import NOW, T0, at, warning

PSA = (
    'Error creating: pods "js-w-0-0-mp8wb" is forbidden: violates PodSecurity "restricted:latest": '
    'allowPrivilegeEscalation != false (container "c" must set '
    "securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "
    '"c" must set securityContext.runAsNonRoot=true)'
)
QUOTA_USED = (
    'Error creating: pods "js-w-0-1-l654x" is forbidden: exceeded quota: q, requested: pods=1, '
    "used: pods=1, limited: pods=1"
)
QUOTA_NEVER = (
    'Error creating: pods "js-w-0-0-x" is forbidden: exceeded quota: compute, requested: '
    "limits.cpu=2,pods=1, used: limits.cpu=0,pods=0, limited: limits.cpu=1500m,pods=10"
)
NO_SA = (
    'Error creating: pods "js-w-0-0-" is forbidden: error looking up service account '
    'ns/trainer: serviceaccount "trainer" not found'
)


@pytest.mark.parametrize(
    ("message", "kind", "plugin", "final"),
    [
        (PSA, "pod-security", 'PodSecurity "restricted:latest"', True),
        (QUOTA_USED, "quota", "ResourceQuota q", False),
        (QUOTA_NEVER, "quota", "ResourceQuota compute", True),
        (
            'Error creating: pods "p" is forbidden: exceeded quota: q, requested: '
            "requests.memory=1Gi, used: requests.memory=512Mi, limited: requests.memory=1Gi",
            "quota",
            "ResourceQuota q",
            False,
        ),
        (
            'Error creating: pods "p" is forbidden: exceeded quota: q, requested: pods=1, used: '
            "pods=0, limited: pods=0",
            "quota",
            "ResourceQuota q",
            True,
        ),
        (
            'Error creating: pods "p" is forbidden: failed quota: q: must specify limits.cpu for: '
            "c; limits.memory for: c",
            "quota",
            "ResourceQuota q",
            True,
        ),
        (
            'Error creating: pods "p" is forbidden: maximum cpu usage per Container is 1, but '
            "limit is 2",
            "limit-range",
            "LimitRange",
            True,
        ),
        (
            'Error creating: pods "p" is forbidden: [minimum memory usage per Pod is 64Mi, but '
            "request is 32Mi, cpu max limit to request ratio per Container is 2, but provided "
            "ratio is 4.000000]",
            "limit-range",
            "LimitRange",
            True,
        ),
        (NO_SA, "service-account", "ServiceAccount", True),
        (
            'Error creating: admission webhook "deny.example.com" denied the request: no root',
            "webhook",
            'admission webhook "deny.example.com"',
            True,
        ),
        (
            "Error creating: pods \"p\" is forbidden: ValidatingAdmissionPolicy 'no-latest' with "
            "binding 'b' denied request: images must be pinned",
            "admission-policy",
            "ValidatingAdmissionPolicy no-latest",
            True,
        ),
        (
            'Error creating: Pod "p" is invalid: spec.containers[0].image: Required value',
            "invalid",
            "validation",
            True,
        ),
        (
            'Error creating: pods "p" is forbidden: pod rejected: RuntimeClass "gvisor" not found',
            "admission",
            "admission",
            True,
        ),
    ],
)
def test_refusals_are_read_from_the_servers_words(
    message: str, kind: str, plugin: str, final: bool
) -> None:
    refusal = read_refusal(message)
    assert refusal is not None
    assert (refusal.kind, refusal.plugin, refusal.final) == (kind, plugin, final)


@pytest.mark.parametrize(
    "message",
    [
        'Error creating: Internal error occurred: failed calling webhook "x.example.com": '
        "context deadline exceeded",
        'Error creating: pods "p" is forbidden: status unknown for quota: q, resources: pods',
        'Error creating: pods "p" is forbidden: unable to create new content in namespace ns '
        "because it is being terminated",
        'Error creating: pods "p" is forbidden: unable to create pods at this time because '
        "there was an error enforcing limit ranges",
        'Error creating: pods "p" is forbidden: User "system:serviceaccount:kube-system:'
        'job-controller" cannot create resource "pods" in API group "" in the namespace "ns"',
        "Error creating: Timeout: request did not complete within requested timeout",
        "Error creating: the server was unable to return a response in the time allotted",
        # The JobSet pod webhook holds an exclusive placement's followers for their leader
        # (upstream v0.12.0's words): found under load, where the leader schedules late.
        'Error creating: admission webhook "vpod.kb.io" denied the request: leader pod not yet '
        "scheduled, not creating follower pod. this is an expected, transient error",
        'Error creating: admission webhook "vpod.kb.io" denied the request: expected 1 leader '
        "pod (js-w-0-0), but got 0. this is an expected, transient error",
        'Error creating: admission webhook "vpod.kb.io" denied the request: follower pod node '
        "selector not set",
        'Error creating: admission webhook "vpod.kb.io" denied the request: follower pod node '
        "selector for topology domain not found. missing selector: topology.kubernetes.io/zone",
    ],
)
def test_the_clusters_own_trouble_is_never_a_refusal(message: str) -> None:
    assert read_refusal(message) is None


# ------------------------------------------------------------------------------- the Jobs


def job(
    name: str = "js-w-0",
    *,
    uid: str = "j-1",
    active: int = 0,
    parallelism: int = 1,
    completions: int | None = 1,
    succeeded: int = 0,
    attempt: int = 0,
    suspend: bool = False,
    ended: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "labels": {L.JOBSET_NAME: "js", L.RESTART_ATTEMPT: str(attempt)},
    }
    if deleting:
        meta["deletionTimestamp"] = T0
    spec: dict[str, Any] = {"parallelism": parallelism, "suspend": suspend}
    if completions is not None:
        spec["completions"] = completions
    status: dict[str, Any] = {"active": active, "succeeded": succeeded}
    if ended:
        status["conditions"] = [{"type": ended, "status": "True"}]
    return {"metadata": meta, "spec": spec, "status": status}


def pod(job_name: str = "js-w-0", *, created: float, uid: str = "j-1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job_name}-0-abcde",
            "creationTimestamp": at(created),
            "labels": {L.JOBSET_NAME: "js"},
            "ownerReferences": [{"kind": "Job", "name": job_name, "uid": uid}],
        },
        "status": {"phase": "Running"},
    }


def refused(
    message: str = PSA,
    first: float = 0,
    last: float | None = None,
    *,
    job_name: str = "js-w-0",
    uid: str = "j-1",
    count: int = 1,
    name: str = "",
    reason: str = FAILED_CREATE,
) -> dict[str, Any]:
    job = {"kind": "Job", "name": job_name, "uid": uid, "namespace": "ns"}
    end = first if last is None else last
    found = warning(job, reason, message, first=first, last=end, count=count)
    return {**found, "metadata": {"name": name or f"{job_name}.{first}", "namespace": "ns"}}


def test_a_refusal_that_waiting_cannot_lift_fails_the_run_at_once() -> None:
    for message in (PSA, QUOTA_NEVER, NO_SA):
        check = check_pod_creates([job()], [], [refused(message)], now=NOW + 0.2)
        assert [r.job for r in check.failed] == ["js-w-0"], message
        assert check.recheck_at is None


def test_a_quota_the_pod_fits_fails_the_run_after_the_grace_period() -> None:
    events = [refused(QUOTA_USED, 0)]
    check = check_pod_creates([job()], [], events, now=NOW + 0.5)
    # counted from the end of the Event's whole second, or this waiter's first sight if earlier
    assert check.failed == () and check.recheck_at == NOW + 0.5 + QUOTA_GRACE
    check = check_pod_creates([job()], [], events, now=NOW + 5, seen=check.seen)
    assert check.failed == () and check.recheck_at == NOW + 0.5 + QUOTA_GRACE
    late = check_pod_creates([job()], [], events, now=NOW + 5)  # a waiter that came late
    assert late.recheck_at == NOW + 1 + QUOTA_GRACE
    done = check_pod_creates([job()], [], events, now=NOW + 0.5 + QUOTA_GRACE, seen=check.seen)
    assert [r.job for r in done.failed] == ["js-w-0"]


def test_the_refusal_is_over_once_a_pod_of_the_job_was_created_after_it() -> None:
    events = [refused(QUOTA_USED, 0, 3, count=3)]
    assert check_pod_creates([job()], [pod(created=3)], events, now=NOW + 30).refusals == ()
    assert check_pod_creates([job()], [pod(created=4)], events, now=NOW + 30).refusals == ()
    # a pod created before the refusal does not lift it (a Job of two pods, one of them refused)
    two = job(parallelism=2, completions=2, active=1)
    check = check_pod_creates([two], [pod(created=-5)], events, now=NOW + 30)
    assert [r.job for r in check.failed] == ["js-w-0"] and check.failed[0].count == 3
    # refused again after its pod: the clock starts at the new refusal
    again = [*events, refused(QUOTA_USED, 20, name="later")]
    check = check_pod_creates([two], [pod(created=10)], again, now=NOW + 22)
    assert check.failed == () and check.refusals[0].since == NOW + 21


def test_a_job_that_has_its_pods_or_is_done_or_suspended_is_not_refused() -> None:
    events = [refused(PSA)]
    for quiet in (
        job(active=1),
        job(completions=2, parallelism=2, succeeded=1, active=1),
        job(succeeded=1),
        job(completions=None, parallelism=2, succeeded=1),
        job(suspend=True),
        job(ended="Failed"),
        job(ended="Complete"),
        job(deleting=True),
    ):
        check = check_pod_creates([quiet], [], events, now=NOW + 1, attempt=0)
        assert check.refusals == (), quiet
    # a Job of an earlier attempt (the JobSet restarted) does not count; the current one does
    assert not check_pod_creates([job(attempt=0)], [], events, now=NOW + 1, attempt=1).refusals
    assert check_pod_creates([job(attempt=1)], [], events, now=NOW + 1, attempt=1).failed


def test_events_of_another_job_or_an_earlier_namesake_do_not_count() -> None:
    assert not check_pod_creates([job()], [], [refused(uid="old")], now=NOW + 1).refusals
    assert not check_pod_creates([job()], [], [refused(job_name="x")], now=NOW + 1).refusals
    transient = refused('Error creating: Internal error occurred: failed calling webhook "w"')
    assert not check_pod_creates([job()], [], [transient], now=NOW + 1).refusals
    other_reason = refused(PSA, reason="FailedCreatePodSandBox")
    assert not check_pod_creates([job()], [], [other_reason], now=NOW + 1).refusals


def test_the_newest_refusal_decides_the_rule() -> None:
    # a quota refusal that became a Pod Security one (the namespace was labelled meanwhile)
    events = [refused(QUOTA_USED, 0, name="a"), refused(PSA, 2, name="b")]
    check = check_pod_creates([job()], [], events, now=NOW + 3)
    assert check.failed and check.failed[0].refusal.kind == "pod-security"


def test_the_message_names_the_job_who_refused_and_the_servers_words() -> None:
    jobs = [job(f"js-w-{i}", uid=f"j-{i}") for i in range(5)]
    events = [refused(PSA, i, job_name=f"js-w-{i}", uid=f"j-{i}", count=2) for i in range(5)]
    check = check_pod_creates(jobs, [], events, now=NOW + 10)
    text = describe_refused(check, now=NOW + 10)
    assert text.startswith(
        'job js-w-0 cannot create its pods: PodSecurity "restricted:latest" refuses them: pods '
        '"js-w-0-0-mp8wb" is forbidden: violates PodSecurity "restricted:latest": '
        "allowPrivilegeEscalation != false"
    ), text
    assert "(refused 2 times; waiting cannot lift it)" in text
    assert text.endswith(
        '; 4 more Jobs cannot create pods: js-w-1 (PodSecurity "restricted:latest"), js-w-2 '
        '(PodSecurity "restricted:latest"), js-w-3 (PodSecurity "restricted:latest") and 1 more'
    ), text
    assert "Error creating" not in text
    grace = check_pod_creates([job()], [], [refused(QUOTA_USED)], now=NOW + 12)
    assert "(refused once over 11s, grace 10s)" in describe_refused(grace, now=NOW + 12)


def test_nothing_is_refused_without_a_failed_create() -> None:
    assert check_pod_creates([job()], [], [], now=NOW).refusals == ()


# ------------------------------------------------------------------------------- the judge


def _observation(jobs: list[Any], events: list[Any], *, suspend: bool = False) -> Any:
    from jobset_core.observe import Observation

    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "replicatedJobs": [{"name": "w", "replicas": 1, "template": {}}],
            "suspend": suspend,
        },
        "status": {"restarts": 0},
    }
    return Observation(
        ("ns", "js"), jobset=jobset, jobs=tuple(jobs), events=tuple(events), synced=True
    )


@pytest.mark.parametrize("backend", ["controller", "native"])
def test_the_judge_fails_the_run_with_its_own_error(backend: str) -> None:
    from jobset_core.errors import JobSetFailed, PodsCannotStart, PodsRefused
    from jobset_core.lifecycle import Handle, Judge, WaitRules, error_for
    from jobset_core.outcome import Phase
    from jobset_core.policy.pod_start import PodStartRules

    observation = _observation([job()], [refused(PSA)])
    if backend == "native":
        import json

        from jobset_core.observe import Observation

        anchor = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "js", "namespace": "ns", "uid": "u-1",
                         "labels": {L.ANCHOR_LABEL: L.ANCHOR_VALUE, L.JOBSET_NAME: "js"}},
            "data": {"jobset.json": json.dumps(observation.jobset), "status.json": "{}"},
        }  # fmt: skip
        observation = Observation(
            ("ns", "js"), anchor=anchor, jobs=observation.jobs, events=observation.events,
            synced=True,
        )  # fmt: skip
    # the pod start rules off: a refusal is judged all the same
    rules = WaitRules(pod_start=PodStartRules(grace=None))
    judge = Judge(Handle("js", "ns", "u-1", backend), rules)  # type: ignore[arg-type]
    assert judge.step(observation, None).verdict is None  # no time, no such judgement
    verdict = judge.step(observation, NOW + 1).verdict
    assert verdict is not None and verdict.kind == "failed" and verdict.pods_cannot_start
    assert verdict.reason == PODS_REFUSED
    assert verdict.outcome is not None and verdict.outcome.phase is Phase.FAILED
    assert verdict.outcome.failed_job == "js-w-0"
    assert verdict.message.startswith(
        "JobSet ns/js failed: PodsRefused: job js-w-0 cannot create its pods: PodSecurity "
        '"restricted:latest" refuses them: pods "js-w-0-0-mp8wb" is forbidden: violates'
    ), verdict.message
    assert verdict.message.endswith("(failed child Job: js-w-0)")
    error = error_for(verdict)
    assert isinstance(error, PodsRefused)
    assert isinstance(error, PodsCannotStart) and isinstance(error, JobSetFailed)  # never retried
    assert judge.start_failure is None


def test_the_judge_tells_a_quota_wait_once_and_fails_it_when_the_grace_ends() -> None:
    from jobset_core.lifecycle import Handle, Judge

    judge = Judge(Handle("js", "ns", "u-1", "controller"))
    observation = _observation([job()], [refused(QUOTA_USED)])
    first = judge.step(observation, NOW + 0.5)
    assert first.verdict is None and first.recheck_at == NOW + 0.5 + QUOTA_GRACE
    (notice,) = first.notices
    assert notice.kind == "cannot-start" and notice.reason == FAILED_CREATE
    assert "exceeded quota: q" in notice.message
    assert notice.message.endswith("the run fails in 10s unless its pods are created")
    assert judge.step(observation, NOW + 3).notices == ()
    verdict = judge.step(observation, NOW + 0.5 + QUOTA_GRACE).verdict
    assert verdict is not None and verdict.reason == PODS_REFUSED
    assert "ResourceQuota q refuses them" in verdict.message


def test_the_judge_leaves_a_suspended_run_alone() -> None:
    from jobset_core.lifecycle import Handle, Judge

    observation = _observation([job()], [refused(PSA)], suspend=True)
    assert Judge(Handle("js", "ns", "u-1", "controller")).step(observation, NOW + 1).verdict is None
