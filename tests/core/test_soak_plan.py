"""The soak's plan is pure: one seed, one plan; every kind of the mix as often as the others;
faults inside the runs and apart; queued tasks over a ClusterQueue smaller than their load,
and one preemption while the queue is full."""

from __future__ import annotations

import itertools

import pytest

from soak.mix import (
    FAULT_SPACING,
    FAULTS,
    HIGH_PRIORITY,
    JOBSET_CPU,
    LOCAL_QUEUE,
    LOW_PRIORITY,
    MIX,
    PREEMPT_MARGIN,
    PREEMPTER,
    SMALL_FAULTS,
    dag_source,
    plan,
    preempter_jobset,
)


def test_a_seed_names_one_plan() -> None:
    assert plan(7, tasks=32, window=270) == plan(7, tasks=32, window=270)
    assert plan(7, tasks=32, window=270) != plan(8, tasks=32, window=270)


@pytest.mark.parametrize("tasks", [len(MIX), 30, 32, 100])
def test_every_kind_as_often_as_the_others(tasks: int) -> None:
    counts: dict[str, int] = {}
    for task in plan(3, tasks=tasks, window=270).tasks:
        counts[task.kind] = counts.get(task.kind, 0) + 1
    assert len(counts) == len(MIX)
    assert max(counts.values()) - min(counts.values()) <= 1


@pytest.mark.parametrize("faults", [FAULTS, SMALL_FAULTS])
def test_faults_strike_inside_the_runs_and_apart(faults: dict) -> None:  # type: ignore[type-arg]
    window = 270.0
    the_plan = plan(5, tasks=32, window=window, faults=faults)
    moments = [f.at for f in the_plan.faults]
    assert sorted(moments) == moments and len(moments) == sum(faults.values())
    assert all(0.15 * window <= m <= 0.75 * window for m in moments)
    assert all(b - a >= FAULT_SPACING - 0.11 for a, b in itertools.pairwise(moments))
    assert {f.name for f in the_plan.faults} == set(faults)
    shortest = min(t.run_seconds for t in the_plan.tasks)
    assert shortest > 0.15 * window * 0.45  # every JobSet still runs when the faults begin


def test_too_many_faults_for_the_window_is_an_error() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        plan(1, tasks=4, window=20, faults=FAULTS)


def test_the_dag_has_one_task_per_planned_task() -> None:
    the_plan = plan(2, tasks=len(MIX) + 2, window=100, faults=SMALL_FAULTS)
    source = dag_source(the_plan, dag_id="soak", namespace="ns", timeout=300)
    compile(source, "soak_dag.py", "exec")
    assert all(f'"task_id": "{t.task_id}"' in source for t in the_plan.tasks)


def test_the_queued_kinds_run_through_the_queue_on_the_controller_only() -> None:
    queued = [(mode, backend) for mode, backend, b in MIX if b.queued]
    assert sorted(queued) == [("deferred", "controller"), ("worker", "controller")]
    the_plan = plan(4, tasks=len(MIX), window=100, faults=SMALL_FAULTS)
    source = dag_source(the_plan, dag_id="soak", namespace="ns", timeout=300)
    for task in the_plan.tasks:
        options = task.options()
        pods = [
            r["template"]["spec"]["template"]["spec"]["containers"][0]
            for r in task.jobset("{}")["spec"]["replicatedJobs"]
        ]
        if task.behaviour.queued:
            assert options["queue"] == LOCAL_QUEUE and options["priority_class"] == LOW_PRIORITY
            assert all(p["resources"]["requests"]["cpu"] == "1" for p in pods)  # Kueue counts them
        else:
            assert "queue" not in options and all("resources" not in p for p in pods)
    assert source.count(f'"queue": "{LOCAL_QUEUE}"') == 2


@pytest.mark.parametrize("tasks", [len(MIX), 32, 2 * len(MIX) + 3, 100])
def test_the_queue_holds_half_the_queued_jobsets(tasks: int) -> None:
    the_plan = plan(9, tasks=tasks, window=270)
    queued = len(the_plan.queued)
    assert queued >= 2
    assert the_plan.queue_slots == (queued + 1) // 2  # two waves: the others wait
    assert the_plan.queue_cpu == the_plan.queue_slots * JOBSET_CPU < queued * JOBSET_CPU


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("faults", "window"), [(SMALL_FAULTS, 100.0), (FAULTS, 270.0)])
def test_the_preemption_strikes_first_while_every_queued_jobset_runs(
    seed: int,
    faults: dict,  # type: ignore[type-arg]
    window: float,
) -> None:
    the_plan = plan(seed, tasks=len(MIX), window=window, faults=faults)
    first = the_plan.faults[0]
    assert first.name == "preempt" and the_plan.preemptions == 1
    assert [f.name for f in the_plan.faults].count("preempt") == 1
    # the first wave holds all the quota until the preemption has struck, with room to spare
    assert all(t.run_seconds >= first.at + PREEMPT_MARGIN for t in the_plan.queued)
    longest = max(0.85 * window * 0.5, first.at + PREEMPT_MARGIN)  # and no longer than needed
    assert all(t.run_seconds <= longest + 0.1 for t in the_plan.queued)


def test_the_preempter_needs_one_slot_at_high_priority() -> None:
    body = preempter_jobset()
    labels = body["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == LOCAL_QUEUE
    assert labels["kueue.x-k8s.io/priority-class"] == HIGH_PRIORITY != LOW_PRIORITY
    assert labels[PREEMPTER] == "true" and "airflow-jobset/task-id" not in labels
    cpus = sum(
        int(
            r["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
                "cpu"
            ]
        )
        for r in body["spec"]["replicatedJobs"]
    )
    assert cpus == JOBSET_CPU  # one queued JobSet's quota: Kueue evicts exactly one
    assert body["spec"]["ttlSecondsAfterFinished"] > 0  # the JobSet controller removes it


def test_a_preemption_needs_queued_tasks_and_happens_once() -> None:
    with pytest.raises(ValueError, match="needs queued tasks"):
        plan(1, tasks=8, window=270, faults={"preempt": 1})
    with pytest.raises(ValueError, match="one preemption per soak"):
        plan(1, tasks=len(MIX), window=270, faults={"preempt": 2})
    assert plan(1, tasks=8, window=270, faults={"worker-kill": 1}).preemptions == 0
