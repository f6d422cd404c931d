#!/usr/bin/env bash
# `make demo`: run the scheduled-retraining example DAG end to end on a Kubernetes cluster and
# show what happened: the JobSet, its child Jobs, where every pod ran (node -> zone/slice),
# the restarts, the task's tries and the final state.
#
# Without KUBECONFIG the local devcluster is used: started (and built first when needed, with
# progress) unless one is already running, and stopped again at the end if this script started
# it. With KUBECONFIG set, the demo runs on that cluster (the JobSet controller must be
# installed there, or the operator falls back to the native backend).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=$root/.venv/airflow/bin/python
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

started_cluster=0
if [ -z "${KUBECONFIG:-}" ]; then
  if python3 tests/cluster/devcluster.py status >/dev/null 2>&1; then
    say "devcluster: already running, reusing it"
  else
    say "devcluster: starting (building the binaries first if needed; a cold build takes minutes)"
    make --no-print-directory cluster-up
    started_cluster=1
  fi
  export KUBECONFIG=${DEVCLUSTER_STATE_DIR:-$root/.devcluster}/kubeconfig
  export JOBSET_EXAMPLES_DEVCLUSTER=1   # the example's pods are simulated on the fake nodes
else
  say "using the cluster of KUBECONFIG=$KUBECONFIG"
fi

home=$(mktemp -d -t jobset-demo-airflow-XXXXXX)
cleanup() {
  rm -rf "$home"
  if [ "$started_cluster" = 1 ]; then
    say "devcluster: stopping the cluster this demo started"
    make --no-print-directory cluster-down || true
  fi
}
trap cleanup EXIT

export AIRFLOW_HOME=$home
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_FOLDER=$root/examples/dags
export AIRFLOW__LOGGING__LOGGING_LEVEL=${AIRFLOW__LOGGING__LOGGING_LEVEL:-WARNING}
export AIRFLOW_CONN_KUBERNETES_DEFAULT="{\"conn_type\": \"kubernetes\", \"extra\": {\"kube_config_path\": \"${KUBECONFIG%%:*}\"}}"

say "Airflow $("$py" -c 'import airflow; print(airflow.__version__)'): preparing a throw-away metadata database"
"$py" -m airflow db migrate >"$home/db-migrate.log" 2>&1 || { cat "$home/db-migrate.log"; exit 1; }

say "running DAG scheduled_retraining (prepare -> train on a JobSet -> evaluate) with dag.test()"
"$py" - <<'PY'
import json
import threading
import time

from kubernetes import client, config, watch

config.load_kube_config()
core, batch, custom = client.CoreV1Api(), client.BatchV1Api(), client.CustomObjectsApi()
selector = "airflow-jobset/dag-id=scheduled_retraining"
child_selector = "jobset.sigs.k8s.io/jobset-name"
seen = {"jobsets": {}, "jobs": {}, "pods": {}}
stop = threading.Event()


def follow(kind, list_fn, label_selector, **kwargs):
    """Keep the last state of every object (a DELETED event carries the final one)."""
    while not stop.is_set():
        try:
            for event in watch.Watch().stream(
                list_fn, label_selector=label_selector, timeout_seconds=5, **kwargs
            ):
                obj = event["object"]
                uid = obj["metadata"]["uid"] if isinstance(obj, dict) else obj.metadata.uid
                seen[kind][uid] = obj
                if stop.is_set():
                    return
        except Exception:  # the API may hiccup; keep following
            time.sleep(0.5)


watchers = [
    threading.Thread(
        target=follow,
        args=("jobsets", custom.list_cluster_custom_object, selector),
        kwargs={"group": "jobset.x-k8s.io", "version": "v1alpha2", "plural": "jobsets"},
        daemon=True,
    ),
    threading.Thread(
        target=follow, args=("jobs", batch.list_job_for_all_namespaces, child_selector), daemon=True
    ),
    threading.Thread(
        target=follow, args=("pods", core.list_pod_for_all_namespaces, child_selector), daemon=True
    ),
]
for thread in watchers:
    thread.start()
time.sleep(1)

from airflow.dag_processing.dagbag import DagBag  # noqa: E402
from airflow.models.taskinstance import TaskInstance  # noqa: E402
from airflow.models.taskinstancehistory import TaskInstanceHistory  # noqa: E402
from airflow.models.xcom import XComModel  # noqa: E402
from airflow.utils.session import create_session  # noqa: E402

import os  # noqa: E402

bag = DagBag(dag_folder=os.path.join(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], "scheduled_retraining.py"))
assert not bag.import_errors, bag.import_errors
started = time.monotonic()
run = bag.dags["scheduled_retraining"].test()
elapsed = time.monotonic() - started
time.sleep(2)
stop.set()

names = {js["metadata"]["name"] for js in seen["jobsets"].values()}
for kind in ("jobs", "pods"):
    seen[kind] = {
        uid: obj for uid, obj in seen[kind].items()
        if (obj.metadata.labels or {}).get(child_selector) in names
    }
nodes = {n.metadata.name: n.metadata.labels for n in core.list_node().items}


def table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*headers))
    print(line.format(*["-" * w for w in widths]))
    for row in rows:
        print(line.format(*[str(x) for x in row]))


print("\n== the JobSet")
for js in seen["jobsets"].values():
    status = js.get("status", {})
    conds = [c["type"] for c in status.get("conditions", []) if c.get("status") == "True"]
    print(f"{js['metadata']['namespace']}/{js['metadata']['name']}  uid={js['metadata']['uid']}")
    print(f"  terminal state: {status.get('terminalState') or '-'}   restarts: {status.get('restarts', 0)}"
          f"   conditions: {', '.join(conds) or '-'}")
    for rj in js["spec"]["replicatedJobs"]:
        print(f"  replicated job {rj['name']}: replicas={rj.get('replicas', 1)}")

print("\n== child Jobs (one row per restart attempt)")
rows = []
for job in sorted(seen["jobs"].values(), key=lambda j: (j.metadata.creation_timestamp, j.metadata.name)):
    labels = job.metadata.labels or {}
    st = job.status
    state = next((c.type for c in (st.conditions or []) if c.status == "True" and c.type in ("Complete", "Failed")), "Running")
    rows.append([job.metadata.name, labels.get("jobset.sigs.k8s.io/restart-attempt", "0"),
                 st.succeeded or 0, st.failed or 0, state])
table(["job", "attempt", "succeeded", "failed", "state"], rows)

print("\n== placement (pod -> node -> zone / slice)")
rows = []
for pod in sorted(seen["pods"].values(), key=lambda p: (p.metadata.creation_timestamp, p.metadata.name)):
    labels = pod.metadata.labels or {}
    node = pod.spec.node_name or "-"
    nl = nodes.get(node, {})
    rows.append([pod.metadata.name, labels.get("jobset.sigs.k8s.io/restart-attempt", "0"), node,
                 nl.get("topology.kubernetes.io/zone", "-"), nl.get("devcluster/slice", nl.get("cloud.google.com/gke-nodepool", "-")),
                 pod.status.phase])
table(["pod", "attempt", "node", "zone", "slice", "phase"], rows)

print("\n== task tries")
with create_session() as session:
    rows = []
    for task_id in ("prepare", "train", "evaluate"):
        for h in session.query(TaskInstanceHistory).filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id).order_by(TaskInstanceHistory.try_number):
            rows.append([task_id, h.try_number, h.state, ""])
        ti = session.query(TaskInstance).filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id).one()
        value = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key="return_value").one_or_none()
        rows.append([task_id, ti.try_number, ti.state, json.dumps(value.value) if value else ""])
    table(["task", "try", "state", "return value"], rows)

print(f"\n== final state: DAG run {run.run_id} is {run.state} (took {elapsed:.0f}s)")
raise SystemExit(0 if str(run.state) == "success" else 1)
PY
