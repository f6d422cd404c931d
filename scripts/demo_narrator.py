"""The narrator of ``make demo`` (run by ``scripts/demo.sh`` in the Airflow environment).

It runs the ``scheduled_retraining`` example DAG with ``dag.test()`` while it watches the
cluster, then tells what happened: the training's steps in each restart attempt (from the pods'
own logs, followed live, since a restart deletes the pods of the attempt), the JobSet, its child
Jobs, where every pod ran, the task's tries and the final state. Exit status 0 when the DAG run
succeeded. The watcher (``tests/airflow/_recorder.py``) and the reading of the tries
(``tests/airflow/_run_dag.py``) are shared with the test that runs the same DAG in ``make test``
(``tests/airflow/test_cluster_example_retraining.py``).

Importing this module does nothing; :func:`main` does it all (``KUBECONFIG`` and the Airflow
environment variables are set by ``demo.sh``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The watcher and the run's tries are shared with the test that runs this DAG in `make test`.
from tests.airflow._recorder import ATTEMPT_LABEL, Recorder, attempt_of, pod_index  # noqa: E402
from tests.airflow._run_dag import tasks_of  # noqa: E402

DAG_ID = "scheduled_retraining"
STEP = re.compile(r" step (\d+)/(\d+) ")


def table(headers: list[str], rows: list[list[Any]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*headers))
    print(line.format(*["-" * w for w in widths]))
    for row in rows:
        print(line.format(*[str(x) for x in row]))


def worth_showing(line: str) -> bool:
    """Every line but the step lines, of which every 5th and the last."""
    m = STEP.search(line)
    return not m or int(m.group(1)) % 5 == 0 or m.group(1) == m.group(2)


def condensed(lines: list[str]) -> list[str]:
    """The lines worth showing; a traceback shrinks to its last line."""
    out, in_tb = [], False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and (line.startswith(" ") or not line.strip()):
            continue
        shown = line
        if in_tb:
            shown, in_tb = "(traceback) " + line, False
        if worth_showing(shown):
            out.append(shown)
    return out


def show_training(rec: Recorder) -> None:
    print("\n== training, as the pods logged it (steps shown every 5, the rest in full)")
    by_attempt: dict[int, list[Any]] = {}
    for pod in rec.seen["pods"].values():
        by_attempt.setdefault(attempt_of(pod), []).append(pod)
    for attempt in sorted(by_attempt):
        print(f"-- restart attempt {attempt}")
        for pod in sorted(by_attempt[attempt], key=pod_index):
            lines = rec.logs.get(pod.metadata.uid, [])
            print(f"   pod {pod.metadata.name} (process {pod_index(pod)}), {len(lines)} log lines:")
            for line in condensed(lines)[-40:]:
                print(f"     {line}")


def show_jobset(rec: Recorder) -> None:
    print("\n== the JobSet")
    for js in rec.seen["jobsets"].values():
        status = js.get("status", {})
        conds = [c["type"] for c in status.get("conditions", []) if c.get("status") == "True"]
        meta = js["metadata"]
        print(f"{meta['namespace']}/{meta['name']}  uid={meta['uid']}")
        print(
            f"  terminal state: {status.get('terminalState') or '-'}   "
            f"restarts: {status.get('restarts', 0)}   conditions: {', '.join(conds) or '-'}"
        )
        for rj in js["spec"]["replicatedJobs"]:
            print(f"  replicated job {rj['name']}: replicas={rj.get('replicas', 1)}")


def show_queue(rec: Recorder) -> None:
    """What Kueue recorded of the demo's JobSets: the queue, when it admitted them, where."""
    uids = {js["metadata"]["uid"] for js in rec.seen["jobsets"].values()}
    mine = [
        w
        for w in rec.seen["workloads"].values()
        if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") in uids
    ]
    if not mine:
        return
    print("\n== the queue (Kueue's Workload)")
    for workload in mine:
        status = workload.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        admitted = conditions.get("Admitted") or {}
        cq = (status.get("admission") or {}).get("clusterQueue", "?")
        print(
            f"{workload['metadata']['name']}: LocalQueue {workload['spec'].get('queueName')} -> "
            f"ClusterQueue {cq}, admitted at {admitted.get('lastTransitionTime', '?')}"
        )
        for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
            print(f"  pod set {assignment['name']}: flavors {assignment.get('flavors')}")
        for name in ("QuotaReserved", "Admitted", "Evicted", "Finished"):
            if name in conditions:
                c = conditions[name]
                print(f"  {name}={c['status']} {c.get('reason', '')}: {c.get('message', '')}")


def show_jobs(rec: Recorder) -> None:
    print("\n== child Jobs (one row per restart attempt)")
    rows = []
    jobs = rec.seen["jobs"].values()
    for job in sorted(jobs, key=lambda j: (j.metadata.creation_timestamp, j.metadata.name)):
        st = job.status
        done = (
            c.type
            for c in (st.conditions or [])
            if c.status == "True" and c.type in ("Complete", "Failed")
        )
        attempt = (job.metadata.labels or {}).get(ATTEMPT_LABEL, "0")
        rows.append(
            [job.metadata.name, attempt, st.succeeded or 0, st.failed or 0, next(done, "Running")]
        )
    table(["job", "attempt", "succeeded", "failed", "state"], rows)


def show_placement(rec: Recorder) -> None:
    print("\n== placement (pod -> node -> zone / slice)")
    nodes = {n.metadata.name: n.metadata.labels for n in rec.core.list_node().items}
    rows = []
    pods = rec.seen["pods"].values()
    for pod in sorted(pods, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name)):
        node = pod.spec.node_name or "-"
        nl = nodes.get(node, {})
        zone = nl.get("topology.kubernetes.io/zone", "-")
        slice_ = nl.get("devcluster/slice", nl.get("cloud.google.com/gke-nodepool", "-"))
        attempt = (pod.metadata.labels or {}).get(ATTEMPT_LABEL, "0")
        rows.append([pod.metadata.name, attempt, node, zone, slice_, pod.status.phase])
    table(["pod", "attempt", "node", "zone", "slice", "phase"], rows)


def show_tries(run: Any) -> Any:
    """The tries of every task; return the train task's return value (its metrics)."""
    print("\n== task tries")
    tasks = tasks_of(run.dag_id, run.run_id)
    rows = []
    for task_id in ("prepare", "train", "evaluate"):
        task = tasks[task_id]
        rows += [[task_id, number, state, ""] for number, state in task["history"]]
        value = task["xcom"].get("return_value")
        shown = json.dumps(value) if value is not None else ""
        rows.append([task_id, task["try_number"], task["state"], shown])
    table(["task", "try", "state", "return value"], rows)
    return tasks["train"]["xcom"].get("return_value")


def main() -> int:
    rec = Recorder(DAG_ID, workloads=bool(os.environ.get("JOBSET_EXAMPLES_QUEUE")))
    rec.start()
    from airflow.dag_processing.dagbag import DagBag

    folder = os.environ["AIRFLOW__CORE__DAGS_FOLDER"]
    bag = DagBag(dag_folder=os.path.join(folder, f"{DAG_ID}.py"))
    assert not bag.import_errors, bag.import_errors
    started = time.monotonic()
    run = bag.dags[DAG_ID].test()
    elapsed = time.monotonic() - started
    rec.finish()
    show_training(rec)
    show_jobset(rec)
    show_queue(rec)
    show_jobs(rec)
    show_placement(rec)
    m = show_tries(run)
    if isinstance(m, dict):
        print(
            f"\n== result: final loss {m.get('final_loss')} after {m.get('steps')} steps; "
            f"restart attempt {m.get('restart_attempt')} resumed from the checkpoint of step "
            f"{m.get('resumed_from_step')}"
        )
    print(f"\n== final state: DAG run {run.run_id} is {run.state} (took {elapsed:.0f}s)")
    return 0 if str(run.state) == "success" else 1


if __name__ == "__main__":
    raise SystemExit(main())
