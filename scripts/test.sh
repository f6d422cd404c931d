#!/usr/bin/env bash
# `make test`: lint, build the devcluster (cached), start it, run both environments' suites,
# the docs site build, the release (wheel, sdist, install) and the Airflow matrix (every older
# Airflow 3 minor), and stop the cluster again whatever happened. Exit status: non-zero if
# anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
began=$(date +%s)
# Each step says how far into the run it starts (the cold budget is read from these lines).
step() {
  local t=$(( $(date +%s) - began ))
  echo; printf '=== [+%dm%02ds] %s ===\n' $((t / 60)) $((t % 60)) "$*"
}

step "lint (ruff, mypy --strict, import-linter)"
make --no-print-directory lint || status=1

step "devcluster: build (cached) and start"
if ! make --no-print-directory cluster-up; then
  echo "devcluster failed to start: tests that need it cannot run" >&2
  make --no-print-directory cluster-down || true
  exit 1
fi
# The second cluster, without JobSet (no CRD, controller or webhooks; no real node, no Kueue):
# the native backend's suite runs there too (tests marked `nojobset`, and tests/cluster/
# test_nojobset.py). It starts in the background, beside the first pass (~15-60 s); the tests
# that need it wait for it (`up` holds its state's lock), every other test goes on.
export DEVCLUSTER_NOJOBSET_STATE_DIR=${DEVCLUSTER_NOJOBSET_STATE_DIR:-${DEVCLUSTER_STATE_DIR:-.devcluster}-nojobset}
nojobset_env=(DEVCLUSTER_STATE_DIR="$DEVCLUSTER_NOJOBSET_STATE_DIR" DEVCLUSTER_JOBSET=0
  DEVCLUSTER_REAL_NODE="${DEVCLUSTER_NOJOBSET_REAL_NODE:-0}")
nojobset_up() {
  local t0; t0=$(date +%s)
  env -u KUBECONFIG "${nojobset_env[@]}" python3 tests/cluster/devcluster.py up --owner-pid $$ \
    > "$logs/nojobset-up.log" 2>&1 && echo "[test.sh] cluster without JobSet up in $(( $(date +%s) - t0 ))s"
}
nojobset_down() {
  env -u KUBECONFIG "${nojobset_env[@]}" python3 tests/cluster/devcluster.py down > /dev/null 2>&1
}
trap 'step "devcluster: stop"; nojobset_down; make --no-print-directory cluster-down' EXIT
# Every log the suite writes is searched for credentials before the cluster (and the record
# of the tokens it issued) goes away: pytest's output, its temporary folders, the Airflow
# homes of the end-to-end tests, the devcluster's component logs.
logs=$(mktemp -d -t jobset-test-logs-XXXXXX)
step "devcluster without JobSet: started, beside the steps below"
nojobset_up &

passes=0
run_pytest() {
  local side=$1; shift
  passes=$((passes + 1))  # a folder per pass: pytest empties its --basetemp when it starts
  step "pytest, $side side: $*"
  ".venv/$side/bin/python" -m pytest -p no:cacheprovider --durations=15 \
    --basetemp="$logs/tmp-$side-$passes" "$@" \
    2>&1 | tee -a "$logs/pytest-$side.log"
  local rc=${PIPESTATUS[0]}
  # 5 = no tests collected: an empty side is a failure of this script, not a pass.
  [ $rc -eq 0 ] || status=1
}

# The real node's tests run containers (tests/cluster); with DEVCLUSTER_REAL_NODE=0 there is no
# real node, so they are deselected rather than failed.
#
# The Airflow side runs in two passes: most of its tests wait on the cluster rather than
# compute, so they run in TEST_WORKERS processes at once (pytest-xdist; a file's tests stay on
# one worker, each test has its own namespace); the tests marked `alone` (they restart the
# cluster's components, time the ways against each other, or measure the event loop) run
# after, one at a time, on a quiet cluster.
kfp_select=(-m "kfp or core or not cluster")
not_alone=(-m "not alone"); only_alone=(-m alone)
case "${DEVCLUSTER_REAL_NODE:-1}" in
  0|false|no|off)
    kfp_select=(-m "(${kfp_select[1]}) and not realnode")
    not_alone=(-m "${not_alone[1]} and not realnode"); only_alone=(-m "${only_alone[1]} and not realnode")
    echo "DEVCLUSTER_REAL_NODE=${DEVCLUSTER_REAL_NODE}: real-node tests deselected" ;;
esac
# Likewise the Kueue tests without Kueue (DEVCLUSTER_KUEUE=0, or DEVCLUSTER_JOBSET=0).
case "${DEVCLUSTER_KUEUE:-1}${DEVCLUSTER_JOBSET:-1}" in
  *0*|*false*|*no*|*off*)
    kfp_select=(-m "(${kfp_select[1]}) and not kueue")
    not_alone=(-m "${not_alone[1]} and not kueue"); only_alone=(-m "${only_alone[1]} and not kueue")
    echo "Kueue off: Kueue tests deselected" ;;
esac
# The core's tests, pure and cluster, run on both sides, so both ends of the client range meet a
# real API server: the KFP side is locked at the lowest kubernetes_asyncio the core accepts
# (requirements/kfp-floor.in) beside kfp's kubernetes<31, the Airflow side at the newest. (The
# second copy of the core's 509 cluster tests costs ~7 min of a cold run, mostly the API
# server's and etcd's CPU; the Go wrappers' shared build cache paid for it.)
# tests/bench first: its smoke profile (~200 s in one file) was collected last, and a cold run's
# pass ended with ~2.5 min of one or two busy workers (workers take files in collection order).
airflow_tests=(tests/bench tests/core tests/cluster tests/airflow tests/docs)
# The release (a wheel and an sdist built, installed from PyPI into fresh environments: mostly
# downloads and unpacking; and the core's tests at both ends of every dependency range, on
# Pythons 3.10, 3.12 and 3.13) and the benchmarks' charts run in the docs environment beside
# the Airflow side's parallel pass, whose workers leave about a third of the CPU idle (they wait
# on the cluster); their output is shown once they are done, before the alone pass.
step "release and the benchmarks' charts (docs environment): started, beside the steps below"
scripts/venv.sh docs || status=1  # here, before the docs site needs it too
(
  rc=0
  for suite in tests/release tests/bench; do
    echo "=== pytest, docs side: $suite ==="
    .venv/docs/bin/python -m pytest -p no:cacheprovider --durations=15 \
      --basetemp="$logs/tmp-docs-$(basename "$suite")" "$suite" || rc=1
  done
  exit $rc
) > "$logs/pytest-docs.log" 2>&1 &
docs_side_pid=$!
run_pytest airflow -n "${TEST_WORKERS:-3}" --dist loadfile "${not_alone[@]}" "${airflow_tests[@]}"
# Done before the tests that need the cluster (and the machine) to themselves.
step "release: build, the wheel at both ends of every range and from Airflow's constraints, the launcher's contents; charts"
wait "$docs_side_pid" || status=1
cat "$logs/pytest-docs.log"
run_pytest airflow "${only_alone[@]}" "${airflow_tests[@]}"

# The Airflow matrix (every older Airflow 3 minor's unit tests, and on the lowest minor a cluster
# subset that waits more than it computes) runs beside the rest; its output is shown once it
# is done.
step "Airflow matrix (older minors): started, beside the steps below"
MATRIX_CLUSTER=lowest scripts/matrix.sh > "$logs/matrix.log" 2>&1 &
matrix_pid=$!


# The KFP side waits on the cluster as much as the Airflow side's first pass: TEST_WORKERS
# processes too (a file's tests stay on one worker).
run_pytest kfp -n "${TEST_WORKERS:-3}" --dist loadfile "${kfp_select[@]}" tests/kfp tests/core tests/docs

step "docs site (mkdocs build --strict)"
make --no-print-directory docs || status=1

step "Airflow matrix (older minors)"
wait "$matrix_pid" || status=1
cat "$logs/matrix.log"

# Last, once every test has written what it writes.
step "no credentials in any log of the suite"
airflow_homes=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'jobset-*airflow*' -newer "$logs" 2>/dev/null)
# shellcheck disable=SC2086
python3 tests/cluster/logscan.py --state-dir "${DEVCLUSTER_STATE_DIR:-.devcluster}" \
  "$logs" "${DEVCLUSTER_STATE_DIR:-.devcluster}/logs" $airflow_homes || status=1
# ... nor any secret of the cluster without JobSet (its own CA, keys and tokens).
if [ -d "$DEVCLUSTER_NOJOBSET_STATE_DIR/logs" ]; then
  python3 tests/cluster/logscan.py --state-dir "$DEVCLUSTER_NOJOBSET_STATE_DIR" \
    "$logs" "$DEVCLUSTER_NOJOBSET_STATE_DIR/logs" || status=1
fi

step "result"
if [ $status -eq 0 ]; then echo "make test: all green"; else echo "make test: FAILED"; fi
exit $status
