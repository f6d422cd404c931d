"""``make soak``: one soak on the running devcluster, its table printed and saved as JSON.

Knobs (environment): ``SOAK_MINUTES`` (default 10: the whole run, Airflow's start included,
fits in it; longer runs get longer JobSets and proportionally more faults), ``SOAK_SEED``
(default: a fresh one, printed; the same seed repeats the same plan), ``SOAK_TASKS``
(default 32, at least 30 for a full soak; at least one of each kind, the queued ones
included, for the preemption), ``SOAK_RESULTS`` (default ``soak/results``).
Exit status 1 when a count the issue forbids is not zero.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

from soak.mix import FAULTS, plan
from soak.run import failures, render, run_soak, summarise
from tests.cluster.pytest_devcluster import DevCluster

#: What the DAG run's window leaves of SOAK_MINUTES (Airflow's start, the grace, the checks).
OVERHEAD_SECONDS = 330


def main() -> int:
    minutes = float(os.environ.get("SOAK_MINUTES", "10"))
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1, 10**6))
    tasks = int(os.environ.get("SOAK_TASKS", "32"))
    results = Path(os.environ.get("SOAK_RESULTS", "soak/results"))
    state = Path(os.environ.get("DEVCLUSTER_STATE_DIR", ".devcluster")).resolve()
    window = max(120.0, minutes * 60 - OVERHEAD_SECONDS)
    scale = max(1, int(minutes // 10))
    faults = {k: v if k == "preempt" else v * scale for k, v in FAULTS.items()}  # one preemption
    the_plan = plan(seed, tasks=tasks, window=window, faults=faults)
    print(f"soak: seed {seed}, {tasks} tasks, window {window:.0f}s (SOAK_SEED={seed} repeats it)")
    dc = DevCluster(kubeconfig=state / "kubeconfig", state_dir=state)
    started = time.time()
    soak = run_soak(the_plan, dc)
    summary = summarise(soak)
    summary["wall_seconds"] = round(time.time() - started, 1)
    summary["plan"] = the_plan.as_dict()
    results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = results / f"soak-{stamp}-seed{seed}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print()
    print(render(summary))
    print(f"\nresults: {out}")
    failed = failures(summary)
    if failed and soak.airflow_home:
        # The Airflow home is a scratch folder, removed when this process exits: a failed
        # soak's task and trigger logs are what tells why, so they are kept beside the results
        # (searched for credentials above; soak/results is not in git).
        kept = out.with_name(out.stem + "-logs")
        shutil.copytree(Path(soak.airflow_home) / "logs", kept, dirs_exist_ok=True)
        print(f"the Airflow logs of the failed soak: {kept}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
