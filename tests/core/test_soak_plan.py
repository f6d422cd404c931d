"""The soak's plan is pure: one seed, one plan; every kind of the mix as often as the others;
faults inside the runs and apart."""

from __future__ import annotations

import itertools

import pytest

from soak.mix import FAULT_SPACING, FAULTS, MIX, SMALL_FAULTS, dag_source, plan


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
    the_plan = plan(2, tasks=12, window=100, faults=SMALL_FAULTS)
    source = dag_source(the_plan, dag_id="soak", namespace="ns", timeout=300)
    compile(source, "soak_dag.py", "exec")
    assert all(f'"task_id": "{t.task_id}"' in source for t in the_plan.tasks)
