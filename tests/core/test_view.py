"""The picture of a run (jobset_core.lifecycle.view): pure table tests."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.lifecycle.view import build_view, decided_by, failed_job_of, redact

HEAD = {"metadata": {"name": "js", "namespace": "ns", "uid": "u1", "creationTimestamp": "T00"}}
SPEC = {
    "replicatedJobs": [{"name": "w", "replicas": 2}, {"name": "ps", "replicas": 1}],
    "failurePolicy": {"maxRestarts": 2},
}


def pod(
    rj: str,
    job: int,
    index: int = 0,
    *,
    phase: str = "Running",
    attempt: int = 0,
    node: str = "n1",
    ready: bool = True,
    state: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    started: str = "T05",
    name: str | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"name": "c", "restartCount": 0, "state": state or {"running": {}}}
    if last:
        status["lastState"] = last
    return {
        "metadata": {
            "name": name or f"js-{rj}-{job}-{index}-a{attempt}",
            "creationTimestamp": "T01",
            "labels": {
                "jobset.sigs.k8s.io/replicatedjob-name": rj,
                "jobset.sigs.k8s.io/job-index": str(job),
                "jobset.sigs.k8s.io/restart-attempt": str(attempt),
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {
            "phase": phase,
            "startTime": started,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [status],
        },
    }


def view(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "backend": "controller",
        "head": HEAD,
        "spec": SPEC,
        "status": {},
        "pods": [],
    }
    args.update(changes)
    return build_view(**args)


def cells(picture: dict[str, Any]) -> dict[tuple[str, int], list[str]]:
    return {
        (rj["name"], job["index"]): [p["name"] for p in job["pods"]]
        for rj in picture["grid"]
        for job in rj["jobs"]
    }


def test_every_replica_has_a_cell_and_each_pod_lands_in_its_own() -> None:
    pods = [pod("w", 1, name="b"), pod("w", 0, name="a"), pod("ps", 0, name="c")]
    assert cells(view(pods=pods)) == {("w", 0): ["a"], ("w", 1): ["b"], ("ps", 0): ["c"]}
    empty = cells(view())
    assert empty == {("w", 0): [], ("w", 1): [], ("ps", 0): []}


def test_pods_of_no_known_replicated_job_are_shown_apart() -> None:
    stray = pod("gone", 0, name="x")
    del stray["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
    grid = view(pods=[stray, pod("old", 3, name="y")])["grid"]
    assert grid[-1]["name"] == "(other pods)"
    assert [p["name"] for p in grid[-1]["jobs"][0]["pods"]] == ["x", "y"]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"phase": "Running", "ready": True, "exitCode": None, "reason": ""}),
        ({"phase": "Pending", "ready": False, "state": {"waiting": {"reason": "ErrImagePull"}}},
         {"phase": "Pending", "ready": False, "reason": "ErrImagePull"}),
        ({"phase": "Failed", "ready": False,
          "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": "oom"}}},
         {"exitCode": 137, "reason": "OOMKilled", "terminationMessage": "oom"}),
        ({"phase": "Running", "state": {"running": {}},
          "last": {"terminated": {"exitCode": 1, "reason": "Error"}}},
         {"exitCode": 1, "reason": "Error"}),
        ({"attempt": 2}, {"attempt": 2}),
    ],
)  # fmt: skip
def test_a_pod_cell_says_phase_readiness_exit_code_reason_and_attempt(
    kwargs: dict[str, Any], expected: dict[str, Any]
) -> None:
    (cell,) = view(pods=[pod("w", 0, **kwargs)])["grid"][0]["jobs"][0]["pods"]
    assert {k: cell[k] for k in expected} == expected


def test_zone_comes_from_the_node_and_the_log_tail_is_cut_and_redacted() -> None:
    p = pod("w", 0, node="n7", name="p")
    logs = {"p": "\n".join(f"line {i}" for i in range(100)) + "\nAuthorization: Bearer abcdefgh123"}
    picture = view(pods=[p], zones={"n7": "zone-b"}, logs=logs, log_lines=3)
    (cell,) = picture["grid"][0]["jobs"][0]["pods"]
    assert cell["node"] == "n7" and cell["zone"] == "zone-b"
    assert cell["log"] == "line 98\nline 99\nAuthorization: Bearer <redacted>"
    assert view(pods=[p])["grid"][0]["jobs"][0]["pods"][0]["log"] is None


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain line", "plain line"),
        ("Bearer eyJhbGciOi.eyJzdWIi.sig", "Bearer <redacted>"),
        ("token=abc123 next", "token=<redacted> next"),
        ("DB_PASSWORD: 'hunter 2'", "DB_PASSWORD: <redacted>"),
        ("aws_secret_access_key=AKIA/x+y", "aws_secret_access_key=<redacted>"),
        ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.c2ln end", "jwt <redacted> end"),
    ],
)
def test_redact(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_only_policies_and_replica_counts_leave_the_spec() -> None:
    spec = {
        **SPEC,
        "replicatedJobs": [
            {
                "name": "w",
                "replicas": 1,
                "template": {"spec": {"template": {"spec": {"containers": [{
                    "name": "c",
                    "env": [{"name": "PW", "value": "hunter2"}, {"name": "T", "valueFrom": {
                        "secretKeyRef": {"name": "s", "key": "k"}}}],
                }]}}}},
            }
        ],
    }  # fmt: skip
    shown = str(view(spec=spec, pods=[pod("w", 0)]))
    assert "hunter2" not in shown and "secretKeyRef" not in shown and "env" not in shown


def test_timeline_restarts_from_events_and_conditions_and_the_terminal_decision() -> None:
    events = [
        {
            "reason": "RestartJobSetFailurePolicyAction",
            "message": "applying RestartJobSet failure policy action (first failed job: js-w-1)",
            "lastTimestamp": "T10",
            "involvedObject": {"kind": "JobSet", "name": "js"},
        },
        {"reason": "FailedCreate", "message": "quota token=abc", "lastTimestamp": "T02",
         "involvedObject": {"kind": "Job", "name": "js-w-0"}},
    ]  # fmt: skip
    status = {
        "restarts": 3,
        "conditions": [
            {
                "type": "RestartingJobSet",
                "status": "False",
                "reason": "DefaultFailurePolicy",
                "message": "restarting (first failed job: js-ps-0)",
                "lastTransitionTime": "T20",
            },
            {
                "type": "Failed",
                "status": "True",
                "reason": "ReachedMaxRestarts",
                "message": "jobset failed due to reaching max number of restarts "
                "(first failed job: js-w-0)",
                "lastTransitionTime": "T30",
            },
        ],
    }
    picture = view(status=status, events=events, pods=[pod("w", 0, started="T05")])
    line = [(e["kind"], e["time"], e.get("failedJob")) for e in picture["timeline"]]
    assert line == [
        ("submitted", "T00", None),
        ("warning", "T02", None),
        ("started", "T05", None),
        ("restart", "T10", "js-w-1"),
        ("restart", "T20", "js-ps-0"),
        ("failed", "T30", "js-w-0"),
        ("restart", "", None),  # the third restart: nothing says why any more
    ]
    assert picture["timeline"][5]["decidedBy"] == "failurePolicy.maxRestarts (2)"
    assert picture["timeline"][1]["text"] == "Job FailedCreate: quota token=<redacted>"
    assert picture["jobset"]["state"] == "Failed" and picture["jobset"]["restarts"] == 3


@pytest.mark.parametrize(
    ("reason", "policy", "said"),
    [
        ("AllJobsCompleted", {}, "successPolicy"),
        ("ReachedMaxRestarts", {"maxRestarts": 4}, "failurePolicy.maxRestarts (4)"),
        (
            "FailJobSetFailurePolicyAction",
            {"rules": [{"name": "oom", "action": "FailJobSet"}, {"action": "RestartJobSet"}]},
            "failurePolicy rule with action FailJobSet (oom)",
        ),
        ("FailedJobs", {}, "failurePolicy (a child Job failed and no restart was allowed)"),
        ("", {}, "unknown"),
    ],
)
def test_decided_by(reason: str, policy: dict[str, Any], said: str) -> None:
    assert decided_by(reason, policy) == said


@pytest.mark.parametrize(
    ("message", "job"),
    [("x (first failed job: js-w-0)", "js-w-0"), ("no job here", None), ("", None)],
)
def test_failed_job_of(message: str, job: str | None) -> None:
    assert failed_job_of(message) == job


@pytest.mark.parametrize(
    ("success", "succeeded", "met"),
    [
        (None, {"w": 2, "ps": 1}, True),
        (None, {"w": 1, "ps": 1}, False),
        ({"operator": "Any", "targetReplicatedJobs": ["ps"]}, {"w": 0, "ps": 1}, True),
        ({"operator": "Any"}, {"w": 0, "ps": 0}, False),
        ({"operator": "All", "targetReplicatedJobs": ["w"]}, {"w": 2, "ps": 0}, True),
    ],
)
def test_success_policy_is_shown_with_the_counts_it_is_judged_on(
    success: dict[str, Any] | None, succeeded: dict[str, int], met: bool
) -> None:
    spec = {**SPEC, **({"successPolicy": success} if success else {})}
    status = {
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "replicatedJobsStatus": [{"name": n, "succeeded": c} for n, c in succeeded.items()],
    }
    policies = view(spec=spec, status=status)["policies"]
    assert policies["success"]["met"] is met
    assert policies["success"]["asWritten"] == (success or {"operator": "All"})
    targets = policies["success"]["targets"]
    assert policies["success"]["succeeded"] == {t: succeeded[t] for t in targets}
    assert policies["failure"] == {
        "asWritten": {"maxRestarts": 2},
        "maxRestarts": 2,
        "restarts": 1,
        "restartsCountTowardsMax": 1,
    }


@pytest.mark.parametrize(
    ("status", "pods", "state"),
    [
        ({}, [], "Pending"),
        ({}, [pod("w", 0)], "Running"),
        ({"conditions": [{"type": "Suspended", "status": "True"}]}, [], "Suspended"),
        ({"conditions": [{"type": "Completed", "status": "True"}]}, [], "Completed"),
    ],
)
def test_state(status: dict[str, Any], pods: list[Any], state: str) -> None:
    assert view(status=status, pods=pods)["jobset"]["state"] == state


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"backend": "kueue"}, "backend must be 'controller' or 'native', not 'kueue'"),
        ({"log_lines": 0}, "log_lines must be at least 1, not 0"),
    ],
)
def test_bad_arguments_say_what_is_wrong(changes: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("(", r"\(")):
        view(**changes)


def test_slice_is_the_node_value_of_each_replicated_jobs_exclusive_key() -> None:
    submitted = {
        "metadata": {"annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "pool"}},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "template": {}},
                {
                    "name": "ps",
                    "template": {
                        "metadata": {
                            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
                        }
                    },
                },
            ]
        },
    }
    nodes = {
        "n1": {"topology.kubernetes.io/zone": "z1", "pool": "p1", "rack": "r1"},
        "n2": {"pool": "p2"},
    }
    picture = view(
        pods=[pod("w", 0, node="n1"), pod("w", 1, node="n2"), pod("ps", 0, node="n1")],
        submitted=submitted,
        node_labels=nodes,
    )
    shown = {
        p["name"]: (p["zone"], p["slice"])
        for rj in picture["grid"]
        for job in rj["jobs"]
        for p in job["pods"]
    }
    assert shown == {
        "js-w-0-0-a0": ("z1", "p1"),
        "js-w-1-0-a0": ("", "p2"),
        "js-ps-0-0-a0": ("z1", "r1"),
    }
    assert picture["jobset"]["sliceKeys"] == {"w": "pool", "ps": "rack"}
    # No exclusive placement asked for: no slice, whatever the nodes say.
    plain = view(pods=[pod("w", 0, node="n1")], node_labels=nodes)
    assert plain["grid"][0]["jobs"][0]["pods"][0]["slice"] == ""


def test_timeline_shows_the_queue_from_kueues_workload() -> None:
    workload = {
        "metadata": {"creationTimestamp": "T01"},
        "spec": {"queueName": "lq"},
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": "T09"},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "message": "The workload is admitted", "lastTransitionTime": "T10"},
                {"type": "Evicted", "status": "False", "reason": "Preempted",
                 "lastTransitionTime": "T08"},
                {"type": "Preempted", "status": "True", "reason": "InClusterQueue",
                 "message": "Preempted to accommodate a workload (UID: x)",
                 "lastTransitionTime": "T06"},
                {"type": "PodsReady", "status": "True", "lastTransitionTime": "T11"},
            ],
            "schedulingStats": {"evictions": [{"reason": "Preempted", "count": 1,
                                               "underlyingCause": "InClusterQueue"}]},
        },
    }  # fmt: skip
    picture = view(workload=workload)
    kinds = [(e["kind"], e["time"]) for e in picture["timeline"]]
    assert kinds == [
        ("submitted", "T00"),
        ("queued", "T01"),
        ("preempted", "T06"),
        ("reserved", "T09"),
        ("admitted", "T10"),
        ("evictions", ""),
    ]
    said = {e["kind"]: e["text"] for e in picture["timeline"]}
    assert said["queued"] == "queued in LocalQueue lq"
    assert said["admitted"] == "Admitted: admitted by ClusterQueue cq: The workload is admitted"
    assert said["evictions"] == "evicted 1x: Preempted (InClusterQueue)"
    waiting = {**workload, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": "couldn't assign flavors to pod set w: insufficient unused quota",
         "lastTransitionTime": "T02"}]}}  # fmt: skip
    entries = view(workload=waiting)["timeline"]
    assert entries[-1]["kind"] == "queued" and entries[-1]["text"].startswith("Pending: couldn't")
    assert [e["kind"] for e in view()["timeline"]] == ["submitted"]  # no queue: nothing of one


def test_the_submitted_jobset_is_shown_redacted_with_its_jobs_and_service() -> None:
    container = {
        "name": "c",
        "image": "trainer:1",
        "args": ["--token=abc123456789", "--epochs=3"],
        "env": [
            {"name": "MASTER_PORT", "value": "29500"},
            {"name": "WANDB_API_KEY", "value": "plain-secret"},
            {"name": "DB_PASSWORD_FILE", "value": "/run/pw"},
            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
    }
    submitted = {
        "metadata": {"name": "js", "namespace": "ns", "uid": "u1", "managedFields": [{}]},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "template": {"spec": {"template": {"spec": {
                    "containers": [container]}}}}}
            ]
        },
    }  # fmt: skip
    job = {
        "metadata": {
            "name": "js-w-0",
            "labels": {
                "jobset.sigs.k8s.io/replicatedjob-name": "w",
                "jobset.sigs.k8s.io/job-index": "0",
                "jobset.sigs.k8s.io/restart-attempt": "1",
            },
        },
        "status": {
            "failed": 1,
            "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}
            ],
        },
    }  # fmt: skip
    service = {
        "metadata": {"name": "js"},
        "spec": {"clusterIP": "None", "selector": {"jobset.sigs.k8s.io/jobset-name": "js"}},
    }
    objects = view(submitted=submitted, jobs=[job], service=service, service_name="js")["objects"]
    shown = objects["submitted"]
    assert set(shown["metadata"]) == {"name", "namespace"}  # no uid, no managedFields
    env = {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in shown["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ][0]["env"]
    }
    assert env == dict.fromkeys(
        ("MASTER_PORT", "WANDB_API_KEY", "DB_PASSWORD_FILE", "FROM_SECRET"), "<not shown>"
    )
    args = shown["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][
        0
    ]["args"]
    assert args == ["--token=<redacted>", "--epochs=3"]
    for hidden in ("plain-secret", "abc123456789", "secretKeyRef", "/run/pw"):
        assert hidden not in repr(objects)
    assert objects["jobs"] == [
        {
            "name": "js-w-0", "replicatedJob": "w", "index": "0", "attempt": "1",
            "state": "Failed",
            "reason": "BackoffLimitExceeded: Job has reached the specified backoff limit",
            "active": 0, "ready": 0, "succeeded": 0, "failed": 1,
        }
    ]  # fmt: skip
    assert objects["service"] == {
        "name": "js",
        "exists": True,
        "clusterIP": "None",
        "selector": {"jobset.sigs.k8s.io/jobset-name": "js"},
        "publishNotReadyAddresses": False,
    }
    missing = view(service_name="js")["objects"]["service"]
    assert missing == {"name": "js", "exists": False}
    assert view()["objects"] == {"submitted": None, "jobs": [], "service": None}
