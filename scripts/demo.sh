#!/usr/bin/env bash
# `make demo`: run the scheduled-retraining example DAG end to end on a Kubernetes cluster and
# show what happened: the training's steps in each restart attempt (from the pods' own logs),
# where it resumed, the final loss, the JobSet, its child Jobs, where every pod ran, the
# task's tries and the final state.
#
# Without KUBECONFIG the local devcluster is used: started (and built first when needed, with
# progress) unless one is already running, and stopped again at the end if this script started
# it. The training runs for real on its real node (JAX, 2 pods, checkpoints in the node's
# shared folder). With KUBECONFIG set, the demo runs on that cluster: the JobSet controller
# should be installed there (else the operator falls back to the native backend), the image
# devcluster.local/python-jax:1 must be on its nodes, and JOBSET_EXAMPLES_SHARED_DIR (+
# JOBSET_EXAMPLES_SHARED_PVC) must name storage that this machine and the pods share (see
# examples/dags/scheduled_retraining.py and tests/cluster/README.md).
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
  # the training runs on the real node; prepare writes the data where its pods see it
  shared=$(python3 tests/cluster/devcluster.py status --json | python3 -c '
import json, sys
node = json.load(sys.stdin).get("real_node")
print(node["dir"] + "/shared" if node else "")')
  if [ -z "$shared" ]; then
    echo "the demo trains on the devcluster's real node, which is off (DEVCLUSTER_REAL_NODE=0?)" >&2
    exit 1
  fi
  export JOBSET_EXAMPLES_REAL_NODE=1 JOBSET_EXAMPLES_SHARED_DIR=$shared
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

say "running DAG scheduled_retraining (prepare -> train: JAX on a JobSet of 2 pods -> evaluate) with dag.test()"
"$py" - <<'PY'
import json
import re
import threading
import time

from kubernetes import client, config, watch

config.load_kube_config()
core, batch, custom = client.CoreV1Api(), client.BatchV1Api(), client.CustomObjectsApi()
selector = "airflow-jobset/dag-id=scheduled_retraining"
child_selector = "jobset.sigs.k8s.io/jobset-name"
seen = {"jobsets": {}, "jobs": {}, "pods": {}}
logs = {}  # pod uid -> lines, followed live (a restart deletes the pods of the attempt)
stop = threading.Event()


def follow_log(namespace, name, uid):
    """The pod's log, from its start to its end (retried while the container is waiting)."""
    lines = logs.setdefault(uid, [])
    while not stop.is_set():
        try:
            resp = core.read_namespaced_pod_log(
                name, namespace, follow=True, _preload_content=False
            )
            for raw in resp.stream():
                lines.extend(raw.decode(errors="replace").splitlines())
            return
        except Exception:  # not started yet (400) or gone (404)
            try:
                pod = core.read_namespaced_pod(name, namespace)
            except Exception:
                return
            if pod.metadata.uid != uid or pod.status.phase in ("Succeeded", "Failed"):
                return
            time.sleep(0.5)


def follow(kind, list_fn, label_selector, **kwargs):
    """Keep the last state of every object (a DELETED event carries the final one)."""
    while not stop.is_set():
        try:
            for event in watch.Watch().stream(
                list_fn, label_selector=label_selector, timeout_seconds=5, **kwargs
            ):
                obj = event["object"]
                uid = obj["metadata"]["uid"] if isinstance(obj, dict) else obj.metadata.uid
                if kind == "pods" and uid not in seen[kind]:
                    threading.Thread(
                        target=follow_log,
                        args=(obj.metadata.namespace, obj.metadata.name, uid),
                        daemon=True,
                    ).start()
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


STEP = re.compile(r" step (\d+)/(\d+) ")


def worth_showing(line):
    """Every line but the step lines, of which every 5th and the last."""
    m = STEP.search(line)
    return not m or int(m.group(1)) % 5 == 0 or m.group(1) == m.group(2)


def condensed(lines):
    """The lines worth showing; a traceback shrinks to its last line."""
    out, in_tb = [], False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            in_tb = True
            continue
        if in_tb and (line.startswith(" ") or not line.strip()):
            continue
        if in_tb:
            line, in_tb = "(traceback) " + line, False
        if worth_showing(line):
            out.append(line)
    return out


def attempt_of(obj):
    return int((obj.metadata.labels or {}).get("jobset.sigs.k8s.io/restart-attempt", "0"))


def pod_index(obj):
    return int((obj.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index", "0"))


print("\n== training, as the pods logged it (steps shown every 5, the rest in full)")
by_attempt = {}
for pod in seen["pods"].values():
    by_attempt.setdefault(attempt_of(pod), []).append(pod)
for attempt in sorted(by_attempt):
    print(f"-- restart attempt {attempt}")
    for pod in sorted(by_attempt[attempt], key=pod_index):
        lines = logs.get(pod.metadata.uid, [])
        print(f"   pod {pod.metadata.name} (process {pod_index(pod)}), {len(lines)} log lines:")
        for line in condensed(lines)[-40:]:
            print(f"     {line}")

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

with create_session() as session:
    metrics = session.query(XComModel).filter_by(
        dag_id=run.dag_id, run_id=run.run_id, task_id="train", key="return_value"
    ).one_or_none()
if metrics is not None and isinstance(metrics.value, dict):
    m = metrics.value
    print(
        f"\n== result: final loss {m.get('final_loss')} after {m.get('steps')} steps; "
        f"restart attempt {m.get('restart_attempt')} resumed from the checkpoint of step "
        f"{m.get('resumed_from_step')}"
    )
print(f"\n== final state: DAG run {run.run_id} is {run.state} (took {elapsed:.0f}s)")
raise SystemExit(0 if str(run.state) == "success" else 1)
PY
