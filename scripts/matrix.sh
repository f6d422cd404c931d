#!/usr/bin/env bash
# The Airflow matrix: every older Airflow 3 minor the package accepts has a lock file
# (requirements/airflow-3.N.txt, from scripts/lock.sh); for each, build its environment
# (scripts/venv.sh, cached by hash) and run the Airflow adapter's unit tests and the cluster
# subset marked airflow_matrix (controller backend, worker and deferrable mode: success, a
# restart as a retry, a SIGKILLed worker reattaching, a kill that deletes). The newest minor is
# the main airflow side, which runs everything. Up to MATRIX_JOBS minors (default: one per
# core) run at the same time against the one devcluster (each test has its own namespace);
# more than that only slows every one down past its timeouts on a small machine. Each
# minor's output is shown at the end, in order.
#
# MATRIX_CLUSTER=lowest runs the cluster subset on the lowest minor only (the unit tests still
# run on every minor): what `make test` does, since the ends of a declared range are what it
# must prove (the newest minor is the main airflow side) and the minors between them cost the
# cold run minutes for no end of the range. `make test-matrix` runs every minor fully.
#
# MATRIX_PART=unit runs only the unit tests, MATRIX_PART=cluster only the cluster subset (on the
# minors that get one): `make test` runs the lowest minor's cluster subset beside its first
# pass (it waits on the cluster more than it computes), then the unit tests, niced, beside it.
#
# Used by scripts/test.sh and `make test-matrix`. Exit status: non-zero if any minor failed.
set -uo pipefail
cd "$(dirname "$0")/.."
locks=(requirements/airflow-3.*.txt)
[ -e "${locks[0]}" ] || { echo "no matrix lock files in requirements/" >&2; exit 1; }

started_cluster=0
if [ -z "${DEVCLUSTER_KUBECONFIG:-}" ] && ! python3 tests/cluster/devcluster.py status >/dev/null 2>&1; then
  make --no-print-directory cluster-up || exit 1
  started_cluster=1
fi
logs=$(mktemp -d -t jobset-matrix-XXXXXX)
cleanup() {
  rm -rf "$logs"
  if [ "$started_cluster" = 1 ]; then make --no-print-directory cluster-down || true; fi
}
trap cleanup EXIT

sides=()
for lock in "${locks[@]}"; do
  side=$(basename "$lock" .txt)
  sides+=("$side")
  start=$(date +%s)
  scripts/venv.sh "$side" || exit 1   # one at a time: they share uv's cache
  echo "[matrix] .venv/$side: $(( $(date +%s) - start ))s"
done

jobs_max=${MATRIX_JOBS:-$(nproc)}
lowest=$(printf '%s\n' "${sides[@]}" | sort -V | head -n 1)
part=${MATRIX_PART:-all}
case "$part" in all|unit|cluster) ;; *) echo "MATRIX_PART=$part: all, unit or cluster" >&2; exit 2 ;; esac
pids=(); ran=()
for side in "${sides[@]}"; do
  cluster=1; unit=1
  [ "${MATRIX_CLUSTER:-all}" = lowest ] && [ "$side" != "$lowest" ] && cluster=0
  [ "$part" = unit ] && cluster=0
  [ "$part" = cluster ] && unit=0
  [ "$unit$cluster" = 00 ] && continue
  ran+=("$side")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  (
    py=.venv/$side/bin/python
    rc=0
    said=()
    if [ "$unit" = 1 ]; then
      start=$(date +%s)
      "$py" -m pytest -p no:cacheprovider -q -m "not cluster" tests/airflow || rc=1
      said+=("unit $(( $(date +%s) - start ))s")
    fi
    if [ "$cluster" = 1 ]; then
      start=$(date +%s)
      "$py" -m pytest -p no:cacheprovider -q -m "airflow_matrix and cluster" -k controller \
        tests/airflow || rc=1
      said+=("cluster subset $(( $(date +%s) - start ))s")
    elif [ "$part" = all ]; then
      said+=("(cluster subset: lowest minor only, MATRIX_CLUSTER=lowest)")
    fi
    echo "[matrix] $side: ${said[*]}"
    echo "$rc" > "$logs/$side.rc"
  ) > "$logs/$side.log" 2>&1 &
  pids+=($!)
done

status=0
wait "${pids[@]}" 2>/dev/null
for side in "${ran[@]}"; do
  # A minor that wrote no exit code did not finish: that is a failure too.
  [ "$(cat "$logs/$side.rc" 2>/dev/null)" = 0 ] || status=1
  echo; echo "=== Airflow matrix: $side ==="
  cat "$logs/$side.log"
done
exit $status
