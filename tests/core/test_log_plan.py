"""What a log follower follows, its bounds and its cursor (pure table tests)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.lifecycle._log_plan import (
    LogBudget,
    LogCursor,
    LogLine,
    LogOptions,
    LogTarget,
    check_selector,
    fingerprint,
    select_streams,
)
from jobset_core.models import JobSet

RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
ENDED = {"terminated": {"exitCode": 0}}
WAITING = {"waiting": {"reason": "ContainerCreating"}}


def _jobset(coordinator: dict[str, Any] | None = None) -> JobSet:
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {"name": name, "replicas": 2, "template": {"spec": {"template": {"spec": {}}}}}
            for name in ("driver", "workers")
        ]
    }
    if coordinator:
        spec["coordinator"] = coordinator
    return JobSet.model_validate({"metadata": {"name": "js"}, "spec": spec})


def pod(
    rjob: str,
    job: int,
    index: int,
    *,
    attempt: int = 0,
    containers: dict[str, dict[str, Any]] | None = None,
    restarts: int = 0,
    deleting: bool = False,
) -> dict[str, Any]:
    containers = containers if containers is not None else {"main": RUNNING}
    name = f"js-{rjob}-{job}-{index}-a{attempt}"
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": {
            L.REPLICATED_JOB_NAME: rjob,
            L.JOB_INDEX: str(job),
            L.RESTART_ATTEMPT: str(attempt),
            L.JOB_COMPLETION_INDEX: str(index),
        },
        "annotations": {L.JOB_COMPLETION_INDEX: str(index)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": n} for n in containers]},
        "status": {
            "containerStatuses": [
                {"name": n, "state": s, "restartCount": restarts} for n, s in containers.items()
            ]
        },
    }


PODS = [pod(r, j, i) for r in ("workers", "driver") for j in (0, 1) for i in (0, 1)]


def _pods(selection: Any) -> list[str]:
    return [s.pod for s in selection.streams]


@pytest.mark.parametrize(
    ("options", "jobset", "expected"),
    [
        pytest.param(LogOptions(), _jobset(), ["js-driver-0-0-a0"], id="coordinator-default"),
        pytest.param(
            LogOptions(),
            _jobset({"replicatedJob": "workers", "jobIndex": 1, "podIndex": 1}),
            ["js-workers-1-1-a0"],
            id="coordinator-of-the-spec",
        ),
        pytest.param(
            LogOptions(target=LogTarget("workers", 1, 0)),
            _jobset(),
            ["js-workers-1-0-a0"],
            id="coordinator-target",
        ),
        pytest.param(
            LogOptions(pods="leaders"),
            _jobset(),
            ["js-driver-0-0-a0", "js-workers-0-0-a0"],
            id="leaders-in-spec-order",
        ),
        pytest.param(
            LogOptions(pods="all", max_pods=3),
            _jobset(),
            ["js-driver-0-0-a0", "js-driver-0-1-a0", "js-driver-1-0-a0"],
            id="all-bounded-in-order",
        ),
    ],
)
def test_which_pods(options: LogOptions, jobset: JobSet, expected: list[str]) -> None:
    assert _pods(select_streams(PODS, jobset, options)) == expected


def test_the_pod_bound_says_how_many_were_left_out() -> None:
    selection = select_streams(PODS, _jobset(), LogOptions(pods="all", max_pods=3))
    assert (selection.pods, selection.left_out) == (3, 5)


def test_a_selector_keeps_the_matching_pods() -> None:
    options = LogOptions(pods=f"{L.REPLICATED_JOB_NAME}=workers")
    matching = {"js-workers-1-0-a0", "js-workers-0-1-a0"}
    assert _pods(select_streams(PODS, _jobset(), options, matching)) == [
        "js-workers-0-1-a0",
        "js-workers-1-0-a0",
    ]
    assert _pods(select_streams(PODS, _jobset(), options, None)) == []


def test_only_the_latest_attempt_and_not_pods_being_deleted() -> None:
    pods = [
        pod("driver", 0, 0, attempt=0, deleting=True),
        pod("driver", 0, 0, attempt=1),
        pod("workers", 0, 0, attempt=0),  # an old attempt's pod, not deleted yet
        pod("workers", 0, 0, attempt=1, containers={"main": WAITING}),
    ]
    all_pods = select_streams(pods, _jobset(), LogOptions(pods="all"))
    assert _pods(all_pods) == ["js-driver-0-0-a1"]  # the waiting one has no log yet
    assert (all_pods.pods, all_pods.unstarted) == (2, 1)  # ... and is counted as such
    assert _pods(select_streams(pods, _jobset(), LogOptions())) == ["js-driver-0-0-a1"]


def test_containers_all_or_one_and_the_prefix() -> None:
    both = pod("driver", 0, 0, containers={"main": RUNNING, "side": ENDED, "late": WAITING})
    selection = select_streams([both], _jobset(), LogOptions())
    assert [(s.container, s.several, s.running) for s in selection.streams] == [
        ("main", True, True),
        ("side", True, False),
    ]
    assert selection.unstarted == 1  # "late"
    one = select_streams([both], _jobset(), LogOptions(container="side"))
    assert [(s.container, s.several) for s in one.streams] == [("side", False)]
    assert one.unstarted == 0  # the one asked for has started
    assert LogLine("p", "side", "x", several=True).shown() == "[p/side] x"
    assert LogLine("p", "main", "x").shown() == "[p] x"
    assert LogLine("", None, "<note>", notice=True).shown() == "<note>"


def test_a_restarted_container_is_a_new_log() -> None:
    first = select_streams([pod("driver", 0, 0)], _jobset(), LogOptions()).streams[0]
    again = select_streams([pod("driver", 0, 0, restarts=1)], _jobset(), LogOptions()).streams[0]
    assert first.key != again.key and first.pod == again.pod


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"pods": "some"}, "neither one of"),
        ({"pods": "a=b,,"}, "neither one of"),
        ({"container": "Bad_Name"}, "container name"),
        ({"max_pods": 0}, "max log pods"),
        ({"max_bytes_per_second": 0}, "per second"),
        ({"max_bytes": -1}, "max log bytes"),
    ],
)
def test_bad_options(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        LogOptions(**kwargs)


@pytest.mark.parametrize(
    "selector", ["app=x", "app!=x", "app in (a,b), tier", "!canary", "a.b/c==d"]
)
def test_selectors_the_api_server_takes(selector: str) -> None:
    assert check_selector(selector) == selector


def test_options_survive_a_trigger_serialisation() -> None:
    options = LogOptions(
        pods="all",
        container="main",
        target=LogTarget("w", 1, 2),
        max_pods=3,
        max_bytes_per_second=None,
        max_bytes=10,
        resume=True,
    )
    assert LogOptions.from_dict(options.to_dict()) == options
    assert LogOptions.from_dict(LogOptions().to_dict()) == LogOptions()


def test_the_rate_leaves_lines_out_and_counts_them() -> None:
    budget = LogBudget(rate=100, total=None)
    assert [budget.take(40, 0.0) for _ in range(3)] == ["show", "show", "drop"]
    assert budget.drop_note(0.0) is None  # the first drop is noted a little later
    assert budget.take(40, 0.5) == "show"  # half a second: 50 bytes more
    note = budget.drop_note(20.0)
    assert note is not None and "1 lines (40 bytes) left out" in note and "100 bytes/s" in note
    assert budget.drop_note(20.0, force=True) is None  # nothing new


def test_the_total_ends_with_a_truncated_line() -> None:
    budget = LogBudget(rate=None, total=100)
    assert [budget.take(40, 0.0) for _ in range(3)] == ["show", "show", "over"]
    assert budget.exhausted
    assert "logs truncated: 100 bytes shown" in budget.over_note()


def test_the_cursor_round_trips_and_forgets_the_oldest() -> None:
    cursor = LogCursor()
    cursor.advance("a", 3, "three")
    cursor.spent = 42
    again = LogCursor.from_text(cursor.to_text())
    assert again.read("a") == (3, fingerprint("three")) and again.spent == 42
    assert again.read("b") == (0, "")
    for bad in (None, "", "{", '{"v": 2}', '{"v": 1, "streams": {"a": [1]}, "spent": -1}'):
        parsed = LogCursor.from_text(bad)
        assert parsed.streams == {} and parsed.spent == 0
    for index in range(300):
        cursor.advance(f"s{index}", 1, "x")
    assert len(cursor.streams) == 256 and "a" not in cursor.streams
