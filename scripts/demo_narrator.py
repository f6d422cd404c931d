"""The narrator of ``make demo`` (run by ``scripts/demo.sh`` in the Airflow environment).

It runs the ``scheduled_retraining`` example DAG with ``dag.test()`` while it watches the
cluster, then tells what happened: the training's steps in each restart attempt (from the pods'
own logs, followed live, since a restart deletes the pods of the attempt), the JobSet, its child
Jobs, where every pod ran, the task's tries and the final state. Exit status 0 when the DAG run
succeeded.

Importing this module does nothing; :func:`main` does it all (``KUBECONFIG`` and the Airflow
environment variables are set by ``demo.sh``).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any

DAG_ID = "scheduled_retraining"
SELECTOR = f"airflow-jobset/dag-id={DAG_ID}"
CHILD_SELECTOR = "jobset.sigs.k8s.io/jobset-name"
ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
STEP = re.compile(r" step (\d+)/(\d+) ")


class Recorder:
    """The last state of every JobSet, child Job and pod of the demo, and every pod's log."""

    def __init__(self) -> None:
        from kubernetes import client, config

        config.load_kube_config()
        self.core, self.batch = client.CoreV1Api(), client.BatchV1Api()
        self.custom = client.CustomObjectsApi()
        self.seen: dict[str, dict[str, Any]] = {
            "jobsets": {},
            "jobs": {},
            "pods": {},
            "workloads": {},
        }
        self.logs: dict[str, list[str]] = {}  # pod uid -> lines
        self.stop = threading.Event()

    def follow_log(self, namespace: str, name: str, uid: str) -> None:
        """The pod's log, from its start to its end (retried while the container waits)."""
        lines = self.logs.setdefault(uid, [])
        while not self.stop.is_set():
            try:
                resp = self.core.read_namespaced_pod_log(
                    name, namespace, follow=True, _preload_content=False
                )
                for raw in resp.stream():
                    lines.extend(raw.decode(errors="replace").splitlines())
                return
            except Exception:  # not started yet (400) or gone (404)
                try:
                    pod = self.core.read_namespaced_pod(name, namespace)
                except Exception:
                    return
                if pod.metadata.uid != uid or pod.status.phase in ("Succeeded", "Failed"):
                    return
                time.sleep(0.5)

    def follow(self, kind: str, list_fn: Any, label_selector: str, **kwargs: Any) -> None:
        """Keep the last state of every object (a DELETED event carries the final one)."""
        from kubernetes import watch

        while not self.stop.is_set():
            try:
                for event in watch.Watch().stream(
                    list_fn, label_selector=label_selector, timeout_seconds=5, **kwargs
                ):
                    self._seen(kind, event["object"])
                    if self.stop.is_set():
                        return
            except Exception:  # the API may hiccup; keep following
                time.sleep(0.5)

    def _seen(self, kind: str, obj: Any) -> None:
        uid = obj["metadata"]["uid"] if isinstance(obj, dict) else obj.metadata.uid
        if kind == "pods" and uid not in self.seen[kind]:
            threading.Thread(
                target=self.follow_log,
                args=(obj.metadata.namespace, obj.metadata.name, uid),
                daemon=True,
            ).start()
        self.seen[kind][uid] = obj

    def start(self) -> None:
        jobsets = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "plural": "jobsets"}
        watchers = [
            ("jobsets", self.custom.list_cluster_custom_object, SELECTOR, jobsets),
            ("jobs", self.batch.list_job_for_all_namespaces, CHILD_SELECTOR, {}),
            ("pods", self.core.list_pod_for_all_namespaces, CHILD_SELECTOR, {}),
        ]
        if os.environ.get("JOBSET_EXAMPLES_QUEUE"):  # Kueue's Workloads of every job
            workloads = {"group": "kueue.x-k8s.io", "version": "v1beta2", "plural": "workloads"}
            fn = self.custom.list_cluster_custom_object
            watchers.append(("workloads", fn, "kueue.x-k8s.io/job-uid", workloads))
        for kind, fn, selector, kwargs in watchers:
            threading.Thread(
                target=self.follow, args=(kind, fn, selector), kwargs=kwargs, daemon=True
            ).start()
        time.sleep(1)

    def finish(self) -> None:
        """Stop watching; keep only the Jobs and pods of the demo's JobSets."""
        time.sleep(2)
        self.stop.set()
        names = {js["metadata"]["name"] for js in self.seen["jobsets"].values()}
        for kind in ("jobs", "pods"):
            self.seen[kind] = {
                uid: obj
                for uid, obj in self.seen[kind].items()
                if (obj.metadata.labels or {}).get(CHILD_SELECTOR) in names
            }


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


def attempt_of(obj: Any) -> int:
    return int((obj.metadata.labels or {}).get(ATTEMPT_LABEL, "0"))


def pod_index(obj: Any) -> int:
    annotations = obj.metadata.annotations or {}
    return int(annotations.get("batch.kubernetes.io/job-completion-index", "0"))


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
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    print("\n== task tries")
    ids = {"dag_id": run.dag_id, "run_id": run.run_id}
    rows, metrics = [], None
    with create_session() as session:
        for task_id in ("prepare", "train", "evaluate"):
            history = session.query(TaskInstanceHistory).filter_by(**ids, task_id=task_id)
            for h in history.order_by(TaskInstanceHistory.try_number):
                rows.append([task_id, h.try_number, h.state, ""])
            ti = session.query(TaskInstance).filter_by(**ids, task_id=task_id).one()
            xcom = session.query(XComModel).filter_by(**ids, task_id=task_id, key="return_value")
            value = xcom.one_or_none()
            shown = json.dumps(value.value) if value else ""
            rows.append([task_id, ti.try_number, ti.state, shown])
            if task_id == "train" and value is not None:
                metrics = value.value
    table(["task", "try", "state", "return value"], rows)
    return metrics


def main() -> int:
    rec = Recorder()
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
