"""The typed view of a pod (:class:`jobset_core.pods.PodView`): what it reads of API-shaped
pods, and that malformed ones (missing, ``None`` or wrong-typed fields) read as absent instead
of raising."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core import pods as podread
from jobset_core.pods import ContainerStatus, PodCondition, PodView, Termination

FULL: dict[str, Any] = {
    "metadata": {
        "name": "js-w-0-1-abc",
        "namespace": "ns",
        "uid": "u-1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {
            L.REPLICATED_JOB_NAME: "w",
            L.JOB_INDEX: "0",
            L.RESTART_ATTEMPT: "2",
        },
        "annotations": {L.JOB_COMPLETION_INDEX: "1"},
        "ownerReferences": [
            {"kind": "ReplicaSet", "name": "no"},
            {"kind": "Job", "name": "js-w-0"},
        ],
    },
    "spec": {"containers": [{"name": "main"}, {"name": "side"}]},
    "status": {
        "phase": "Running",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes",
                "lastTransitionTime": "2026-01-01T00:00:01Z",
            }
        ],
        "initContainerStatuses": [{"name": "init", "state": {"terminated": {"exitCode": 0}}}],
        "containerStatuses": [
            {
                "name": "side",
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                "lastState": {"terminated": {"exitCode": 3, "reason": "Error", "message": "x"}},
            },
            {"name": "main", "state": {"running": {}}},
        ],
    },
}


def test_a_full_pod() -> None:
    view = PodView.of(FULL)
    assert (view.name, view.namespace, view.uid, view.ident) == ("js-w-0-1-abc", "ns", "u-1", "u-1")
    assert (view.replicated_job, view.job_index, view.completion_index) == ("w", 0, 1)
    assert view.restart_attempt == 2
    assert view.created == "2026-01-01T00:00:00Z"
    assert (view.phase, view.deleting, view.finished, view.failed) == (
        "Running",
        False,
        False,
        False,
    )
    assert view.owner_job == "js-w-0"
    assert view.containers == ("main", "side")
    assert [(s.name, s.init) for s in view.statuses] == [
        ("init", True),
        ("side", False),
        ("main", False),
    ]
    assert view.status_of("main") == ContainerStatus("main", running=True)
    assert view.status_of("init") is None  # only regular containers
    assert view.status_of("side") == ContainerStatus(
        "side",
        restarts=4,
        waiting_reason="CrashLoopBackOff",
        waiting_message="back-off",
        last_terminated=Termination(3, "Error", "x"),
    )
    assert view.unschedulable == PodCondition(
        "PodScheduled", "False", "Unschedulable", "0/3 nodes", "2026-01-01T00:00:01Z"
    )
    assert view.raw is FULL


MALFORMED: list[Any] = [
    {},
    {"metadata": None, "spec": None, "status": None},
    {"metadata": "x", "spec": [], "status": 3},
    {"metadata": {"labels": None, "annotations": None, "ownerReferences": None}},
    {"metadata": {"labels": ["a"], "annotations": "b", "ownerReferences": "c"}},
    {"metadata": {"labels": {L.JOB_INDEX: "one", L.RESTART_ATTEMPT: None}}},
    {"metadata": {"annotations": {L.JOB_COMPLETION_INDEX: ["1"]}}},
    {"spec": {"containers": None}},
    {"spec": {"containers": ["main", None, 3]}},
    {"status": {"containerStatuses": None, "initContainerStatuses": "x", "conditions": 1}},
    {"status": {"containerStatuses": [None, "x", {"state": None, "lastState": 3}]}},
    {"status": {"containerStatuses": [{"state": {"terminated": None, "waiting": "x"}}]}},
    {"status": {"containerStatuses": [{"restartCount": "3", "state": {"terminated": {}}}]}},
    {"status": {"conditions": [None, {"type": None, "lastTransitionTime": 5}]}},
    None,
    [],
]


@pytest.mark.parametrize("pod", MALFORMED, ids=lambda p: repr(p)[:40])
def test_malformed_pods_read_as_absent(pod: Any) -> None:
    view = PodView.of(pod)
    assert view.job_index is None and view.completion_index is None
    assert view.restart_attempt is None and view.owner_job is None
    assert view.unschedulable is None and not view.failed
    assert all(s.restarts == 0 for s in view.statuses)
    # Every public reading takes it too.
    assert podread.termination_message(pod or {}) is None
    assert podread.failed_pods([pod or {}]) == []
    assert podread.failed_containers(pod or {}) == []
    assert podread.choose_log_pod([pod or {}], podread.PodRef("w")) is None
    assert podread.pod_container(pod or {}) in (None, "")


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        pytest.param({L.JOB_INDEX: "3"}, {}, 3, id="label"),
        pytest.param({}, {L.JOB_INDEX: "4"}, 4, id="annotation"),
        pytest.param({L.JOB_INDEX: "3"}, {L.JOB_INDEX: "4"}, 3, id="label-first"),
        pytest.param({L.JOB_INDEX: "x"}, {L.JOB_INDEX: "4"}, None, id="bad-label"),
        pytest.param({L.JOB_INDEX: ""}, {}, None, id="empty"),
        pytest.param({}, {}, None, id="none"),
    ],
)
def test_indexes_read_from_a_label_else_the_annotation(
    labels: dict[str, str], annotations: dict[str, str], expected: int | None
) -> None:
    pod = {"metadata": {"labels": labels, "annotations": annotations}}
    assert PodView.of(pod).job_index == expected


@pytest.mark.parametrize(
    ("state", "started", "running", "failed"),
    [
        pytest.param({}, False, False, False, id="no-state"),
        pytest.param(
            {"waiting": {"reason": "ContainerCreating"}}, False, False, False, id="waiting"
        ),
        pytest.param({"running": {}}, True, True, False, id="running"),
        pytest.param({"terminated": {"exitCode": 0}}, True, False, False, id="succeeded"),
        pytest.param({"terminated": {"exitCode": 137}}, True, False, True, id="failed"),
        pytest.param({"terminated": {}}, True, False, False, id="no-exit-code"),
        pytest.param({"terminated": None}, True, False, False, id="terminated-none"),
    ],
)
def test_container_states(
    state: dict[str, Any], started: bool, running: bool, failed: bool
) -> None:
    status = ContainerStatus.of({"name": "c", "state": state})
    assert (status.started, status.running, status.failed) == (started, running, failed)


@pytest.mark.parametrize(
    ("conditions", "unschedulable"),
    [
        pytest.param([], False, id="none"),
        pytest.param([{"type": "PodScheduled", "status": "True"}], False, id="scheduled"),
        pytest.param(
            [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
            False,
            id="gated",
        ),
        pytest.param(
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            True,
            id="unschedulable",
        ),
        pytest.param(
            [{"type": "Ready", "status": "False", "reason": "Unschedulable"}], False, id="other"
        ),
    ],
)
def test_unschedulable(conditions: list[dict[str, Any]], unschedulable: bool) -> None:
    view = PodView.of({"status": {"conditions": conditions}})
    assert (view.unschedulable is not None) is unschedulable


def crash_loop(last_exit: int) -> dict[str, Any]:
    """A container waiting in ``CrashLoopBackOff`` after a run that exited ``last_exit``."""
    return {
        "name": "a",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": last_exit}},
    }


@pytest.mark.parametrize(
    ("statuses", "phase", "expected"),
    [
        pytest.param(
            [{"name": "a", "state": {"terminated": {"exitCode": 1}}}], "", [("a", False)], id="exit"
        ),
        pytest.param([crash_loop(2)], "Running", [("a", True)], id="crash-loop"),
        pytest.param([crash_loop(0)], "Running", [], id="crash-loop-after-success"),
        pytest.param([], "Failed", [("main", False)], id="failed-pod"),
        pytest.param([], "Running", [], id="running"),
    ],
)
def test_failed_containers(
    statuses: list[dict[str, Any]], phase: str, expected: list[tuple[str, bool]]
) -> None:
    pod = {
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": phase, "containerStatuses": statuses},
    }
    assert podread.failed_containers(pod) == expected


def test_metadata_and_labels_of_any_object() -> None:
    assert podread.metadata({"metadata": {"name": "x"}}) == {"name": "x"}
    assert podread.metadata({"metadata": None}) == {}
    assert podread.object_labels({"metadata": {"labels": {"a": "b"}}}) == {"a": "b"}
    assert podread.object_labels({"metadata": {"labels": ["a"]}}) == {}
