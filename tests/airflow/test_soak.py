"""The small, fixed-seed soak of ``make test``: every kind of task of the mix at once through
real Airflow processes, each fault once (the kube-apiserver and the JobSet controller
restarted, the triggerer and a worker SIGKILLed, watches cut with 410, a burst of 429, a
queued task's JobSet preempted by Kueue), tokens that expire, the least-privilege identities;
every count the issue forbids is zero, and no log holds a credential. ``make soak`` is the
full one (soak/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soak.mix import MIX, SMALL_FAULTS, plan
from soak.run import failures, render, run_soak, summarise

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.kueue,
    pytest.mark.airflow,
    pytest.mark.alone,
    pytest.mark.timeout(900),
]

SEED = 14
WINDOW = 100.0  # seconds the JobSets' pods run within


def test_the_small_soak_counts_nothing_it_must_not(devcluster: Any, tmp_path: Path) -> None:
    the_plan = plan(SEED, tasks=len(MIX), window=WINDOW, faults=SMALL_FAULTS)
    soak = run_soak(the_plan, devcluster)  # its progress lines: pytest -s
    summary = summarise(soak)
    (tmp_path / "soak.json").write_text(json.dumps(summary, indent=2))
    table = render(summary)
    print(table)
    assert not failures(summary), table
    assert summary["deserved_state"] == len(MIX)
    assert {f["name"] for f in summary["faults"]} == set(SMALL_FAULTS)
    assert summary["proxy"]["throttled"] > 0 and summary["proxy"]["cut_gone"] > 0, table
    # The queued tasks: one waited for the other's quota, one was preempted (and still
    # succeeded, its JobSet never restarted: failures() says so otherwise).
    queue = summary["queue"]
    assert queue["tasks"] == 2 and queue["slots"] == 1, table
    assert queue["preemptions_seen"] == queue["preemptions_planned"] == 1, table
    (victim,) = queue["preempted"]
    row = next(r for r in summary["by_task"] if r["task_id"] == victim)
    assert row["state"] == "success" and row["jobsets_created"] == 1, table
