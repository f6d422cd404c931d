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

# DEMO_QUEUE: train through Kueue. On the devcluster, DEMO_QUEUE=1 makes a LocalQueue "demo"
# of the devcluster's ClusterQueue in the namespace (removed again at the end); on another
# cluster, DEMO_QUEUE names a LocalQueue of yours.
made_queue=""
case "${DEMO_QUEUE:-}" in
  ""|0|false|no|off) ;;
  *)
    queue=$DEMO_QUEUE
    if [ "$started_cluster" = 1 ] || [ -n "${JOBSET_EXAMPLES_REAL_NODE:-}" ]; then
      queue=demo
      "$py" - <<'PY'
from kubernetes import client, config

config.load_kube_config()
body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "demo"}, "spec": {"clusterQueue": "devcluster-cq"}}
try:
    client.CustomObjectsApi().create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "default", "localqueues", body)
except client.ApiException as error:
    if error.status != 409:
        raise
PY
      made_queue=demo
    fi
    export JOBSET_EXAMPLES_QUEUE=$queue
    say "training through the Kueue LocalQueue $queue" ;;
esac

home=$(mktemp -d -t jobset-demo-airflow-XXXXXX)
cleanup() {
  rm -rf "$home"
  if [ -n "$made_queue" ]; then
    "$py" -c 'from kubernetes import client, config; config.load_kube_config(); client.CustomObjectsApi().delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", "demo")' || true
  fi
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
"$py" scripts/demo_narrator.py
