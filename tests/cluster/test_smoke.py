"""Smoke tests of the devcluster: the upstream JobSet controller on a real control plane.

Pod behaviour comes from the devcluster pod annotations (tests/cluster/README.md).
"""

from __future__ import annotations

import copy
import time
from datetime import datetime
from typing import Any

import pytest

from tests.cluster.bodies import in_turn, jobset, replicated_job

pytestmark = pytest.mark.cluster

EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
ZONE = "topology.kubernetes.io/zone"


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == ctype and c["status"] == "True":
            return dict(c)
    return None


def test_two_replicated_jobs_complete(devcluster, cluster_namespace):
    body = jobset(
        "two",
        replicated_job("leader", annotations={"devcluster/run-seconds": "1"}),
        replicated_job("workers", replicas=2, parallelism=2),
    )
    devcluster.create_jobset(cluster_namespace, body)
    js = devcluster.wait_jobset_terminal(cluster_namespace, "two")
    assert js["status"]["terminalState"] == "Completed"
    assert condition(js, "Completed")
    assert js["status"].get("restarts", 0) == 0
    succeeded = {r["name"]: r["succeeded"] for r in js["status"]["replicatedJobsStatus"]}
    assert succeeded == {"leader": 1, "workers": 2}
    jobs = devcluster.batch.list_namespaced_job(cluster_namespace).items
    assert sorted(j.metadata.name for j in jobs) == [
        "two-leader-0",
        "two-workers-0",
        "two-workers-1",
    ]
    assert all(j.status.succeeded == (j.spec.parallelism or 1) for j in jobs)


def test_restarts_once_then_completes(devcluster, cluster_namespace):
    body = jobset(
        "retry",
        replicated_job("w", replicas=2, annotations={"devcluster/fail-until-attempt": "1"}),
        failurePolicy={"maxRestarts": 2},
    )
    devcluster.create_jobset(cluster_namespace, body)
    js = devcluster.wait_jobset_terminal(cluster_namespace, "retry")
    assert js["status"]["terminalState"] == "Completed", js["status"]
    assert js["status"]["restarts"] == 1
    pods = devcluster.core.list_namespaced_pod(
        cluster_namespace, label_selector="jobset.sigs.k8s.io/jobset-name=retry"
    ).items
    attempts = {p.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] for p in pods}
    assert "1" in attempts
    for p in pods:
        if p.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] == "1":
            assert p.status.phase == "Succeeded"


def test_always_failing_reaches_max_restarts(devcluster, cluster_namespace):
    body = jobset(
        "doomed",
        replicated_job(
            "w",
            annotations={"devcluster/exit-code": "3", "devcluster/termination-message": "boom"},
        ),
        failurePolicy={"maxRestarts": 1},
    )
    devcluster.create_jobset(cluster_namespace, body)
    js = devcluster.wait_jobset_terminal(cluster_namespace, "doomed")
    assert js["status"]["terminalState"] == "Failed"
    failed = condition(js, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts", js["status"]
    assert js["status"]["restarts"] == 1
    # the child Job failed for real: pod exit code -> backoffLimit -> BackoffLimitExceeded
    job = devcluster.batch.read_namespaced_job("doomed-w-0", cluster_namespace)
    reasons = {c.reason for c in job.status.conditions or [] if c.type == "Failed"}
    assert reasons == {"BackoffLimitExceeded"}
    pods = devcluster.core.list_namespaced_pod(
        cluster_namespace, label_selector="job-name=doomed-w-0"
    ).items
    terminated = [cs.state.terminated for p in pods for cs in p.status.container_statuses or []]
    assert terminated and all(t.exit_code == 3 and t.reason == "Error" for t in terminated)
    assert all(t.message == "boom" for t in terminated)


def test_exclusive_topology_puts_each_job_in_its_own_zone(
    devcluster, exclusive_placement, cluster_namespace
):
    body = jobset(
        "excl",
        in_turn(
            replicated_job(
                "w", replicas=2, parallelism=3, annotations={"devcluster/never-finish": "true"}
            )
        ),
    )
    body["metadata"]["annotations"] = {EXCLUSIVE_TOPOLOGY: ZONE}
    devcluster.create_jobset(cluster_namespace, body)

    def placed() -> list[Any] | None:
        pods = devcluster.core.list_namespaced_pod(
            cluster_namespace, label_selector="jobset.sigs.k8s.io/jobset-name=excl"
        ).items
        running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
        return running if len(running) == 6 else None

    # Each Job's first pod needs a zone without any other JobSet's pod: on a busy suite the
    # eight nodes' two zones may empty only now and then (a cold run waited over 120 s), the
    # turn's two zones hold no other test's pods (in_turn).
    pods = devcluster.wait_for(placed, timeout=360, desc="6 exclusive pods Running")
    labels = devcluster.node_labels()
    zones_by_job: dict[str, set[str]] = {}
    for p in pods:
        job = p.metadata.labels["job-name"]
        zones_by_job.setdefault(job, set()).add(labels[p.spec.node_name][ZONE])
    assert sorted(zones_by_job) == ["excl-w-0", "excl-w-1"]
    assert all(len(z) == 1 for z in zones_by_job.values()), zones_by_job
    assert zones_by_job["excl-w-0"] != zones_by_job["excl-w-1"], zones_by_job
    devcluster.delete_jobset(cluster_namespace, "excl")


def test_invalid_jobset_rejected_by_upstream_webhook(devcluster, cluster_namespace):
    from kubernetes.client.rest import ApiException

    valid = jobset("probe", replicated_job("w"))
    # the mutating webhook defaults the JobSet (successPolicy is not defaulted by the CRD)
    defaulted = devcluster.create_jobset(cluster_namespace, copy.deepcopy(valid), dry_run=True)
    assert defaulted["spec"]["successPolicy"]["operator"] == "All"

    invalid = jobset(
        "invalid",
        replicated_job("w"),
        successPolicy={"operator": "All", "targetReplicatedJobs": ["does-not-exist"]},
    )
    with pytest.raises(ApiException) as err:
        devcluster.create_jobset(cluster_namespace, invalid, dry_run=True)
    assert err.value.status == 422
    assert "does not appear in .spec.ReplicatedJobs" in str(err.value.body)
    # dry run: nothing was stored
    items = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", cluster_namespace, "jobsets"
    )["items"]
    assert items == []


def test_pod_logs_termination_message_and_run_seconds(devcluster, cluster_namespace):
    body = jobset(
        "logs",
        replicated_job(
            "w",
            annotations={
                "devcluster/run-seconds": "3",
                "devcluster/log": "hello from devcluster\nsecond line",
                "devcluster/termination-message": "all done",
            },
        ),
    )
    devcluster.create_jobset(cluster_namespace, body)
    js = devcluster.wait_jobset_terminal(cluster_namespace, "logs")
    assert js["status"]["terminalState"] == "Completed"
    (pod,) = devcluster.core.list_namespaced_pod(
        cluster_namespace, label_selector="jobset.sigs.k8s.io/jobset-name=logs"
    ).items
    (cs,) = pod.status.container_statuses
    term = cs.state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    assert term.message == "all done"
    assert (term.finished_at - term.started_at).total_seconds() >= 2.5
    # raw bytes: kubernetes 36.0.x returns the repr of bytes from read_namespaced_pod_log
    # (kubernetes-client/python#2596, fixed in 37); _preload_content=False works on 30-37
    raw = devcluster.core.read_namespaced_pod_log(
        pod.metadata.name, cluster_namespace, _preload_content=False
    )
    assert raw.data.decode() == "hello from devcluster\nsecond line\n"
    tail = devcluster.core.read_namespaced_pod_log(
        pod.metadata.name,
        cluster_namespace,
        container="main",
        tail_lines=1,
        timestamps=True,
        _preload_content=False,
    ).data.decode()
    stamp, _, line = tail.rstrip("\n").partition(" ")
    assert line == "second line"
    datetime.fromisoformat(stamp[:19])


def test_plain_job_fails_with_backoff_limit_exceeded(devcluster, cluster_namespace):
    from kubernetes import client

    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="plain"),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(annotations={"devcluster/exit-code": "7"}),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="registry.invalid/x")],
                ),
            ),
        ),
    )
    devcluster.batch.create_namespaced_job(cluster_namespace, job)

    def failed() -> Any:
        j = devcluster.batch.read_namespaced_job("plain", cluster_namespace)
        conds = [c for c in j.status.conditions or [] if c.type == "Failed" and c.status == "True"]
        return conds[0] if conds else None

    cond = devcluster.wait_for(failed, timeout=60, desc="Job plain Failed")
    assert cond.reason == "BackoffLimitExceeded"


def test_never_finish_stays_running(devcluster, cluster_namespace):
    body = jobset("forever", replicated_job("w", annotations={"devcluster/never-finish": "true"}))
    devcluster.create_jobset(cluster_namespace, body)

    def running() -> Any:
        pods = devcluster.core.list_namespaced_pod(
            cluster_namespace, label_selector="jobset.sigs.k8s.io/jobset-name=forever"
        ).items
        return pods if pods and all(p.status.phase == "Running" for p in pods) else None

    devcluster.wait_for(running, timeout=60, desc="pod Running")
    time.sleep(3)  # default run-seconds is 1: it would have finished by now
    assert running()
    assert not (devcluster.get_jobset(cluster_namespace, "forever").get("status") or {}).get(
        "terminalState"
    )


def test_pod_failure_policy_sees_exit_code(devcluster, cluster_namespace):
    """Job podFailurePolicy rules on exit codes work with the scripted container states."""
    from kubernetes import client

    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="pfp"),
        spec=client.V1JobSpec(
            backoff_limit=5,
            pod_failure_policy=client.V1PodFailurePolicy(
                rules=[
                    client.V1PodFailurePolicyRule(
                        action="FailJob",
                        on_exit_codes=client.V1PodFailurePolicyOnExitCodesRequirement(
                            container_name="main", operator="In", values=[42]
                        ),
                    )
                ]
            ),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(annotations={"devcluster/exit-code": "42"}),
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="registry.invalid/x")],
                ),
            ),
        ),
    )
    devcluster.batch.create_namespaced_job(cluster_namespace, job)

    def failed() -> Any:
        j = devcluster.batch.read_namespaced_job("pfp", cluster_namespace)
        conds = [c for c in j.status.conditions or [] if c.type == "Failed" and c.status == "True"]
        return conds[0] if conds else None

    cond = devcluster.wait_for(failed, timeout=60, desc="Job pfp Failed")
    assert cond.reason == "PodFailurePolicy"
    assert devcluster.batch.read_namespaced_job("pfp", cluster_namespace).status.failed == 1
