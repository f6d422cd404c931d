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
# The folders tests make outside pytest's (Airflow homes) go in here too: searched, then
# removed with the logs (tests/_scratch.py).
export JOBSET_TEST_SCRATCH="$logs/scratch"
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
# The KFP side in two parts, one after the other beside the Airflow side's first pass (below):
# its cluster tests, the core's and the KFP components', then its pure tests but the core's.
# The core's pure tests at this floor run in tests/release/test_ranges.py (floor-py3.11: the
# built wheel in a bare environment with requirements/core-floor.txt, the same lower bounds on
# the same Python), beside the first pass too; a third copy here took ~1,800 of the KFP side's
# ~2,000 tests.
kfp_select=(-m "not cluster and not core")
kfp_core_select=(-m "(core or kfp) and cluster")
not_alone=(-m "not alone"); only_alone=(-m alone)
case "${DEVCLUSTER_REAL_NODE:-1}" in
  0|false|no|off)
    kfp_select=(-m "(${kfp_select[1]}) and not realnode")
    kfp_core_select=(-m "${kfp_core_select[1]} and not realnode")
    not_alone=(-m "${not_alone[1]} and not realnode"); only_alone=(-m "${only_alone[1]} and not realnode")
    echo "DEVCLUSTER_REAL_NODE=${DEVCLUSTER_REAL_NODE}: real-node tests deselected" ;;
esac
# Likewise the Kueue tests without Kueue (DEVCLUSTER_KUEUE=0, or DEVCLUSTER_JOBSET=0).
case "${DEVCLUSTER_KUEUE:-1}${DEVCLUSTER_JOBSET:-1}" in
  *0*|*false*|*no*|*off*)
    kfp_select=(-m "(${kfp_select[1]}) and not kueue")
    kfp_core_select=(-m "${kfp_core_select[1]} and not kueue")
    not_alone=(-m "${not_alone[1]} and not kueue"); only_alone=(-m "${only_alone[1]} and not kueue")
    echo "Kueue off: Kueue tests deselected" ;;
esac
# The core's cluster tests run on both sides, so both ends of the client range meet a real API
# server: the KFP side is locked at the lowest kubernetes_asyncio the core accepts
# (requirements/kfp-floor.in) beside kfp's kubernetes<31, the Airflow side at the newest. (The
# second copy of the core's ~510 cluster tests took ~7 min of a cold run after the alone pass,
# mostly the API server's and etcd's CPU; it now runs beside the Airflow side's first pass.)
# tests/bench first: its smoke profile (~200 s in one file) was collected last, and a cold run's
# pass ended with ~2.5 min of one or two busy workers (workers take files in collection order).
airflow_tests=(tests/bench tests/core tests/cluster tests/airflow tests/docs)
# The release (a wheel and an sdist built, installed from PyPI into fresh environments: mostly
# downloads and unpacking; and the core's tests at both ends of every dependency range, on
# Pythons 3.10, 3.12 and 3.13) and the benchmarks' charts run in the docs environment beside
# the Airflow side's parallel pass, whose workers leave about a third of the CPU idle (they wait
# on the cluster); their output is shown once they are done, before the alone pass.
step "release and the benchmarks' charts (docs environment): started, beside the steps below"
(
  # The docs environment first (~50 s cold: downloads and unpacking; the docs site needs it
  # later, after this is waited for).
  scripts/venv.sh docs || exit 1
  rc=0
  for suite in tests/release tests/bench; do
    echo "=== pytest, docs side: $suite ==="
    .venv/docs/bin/python -m pytest -p no:cacheprovider --durations=15 \
      --basetemp="$logs/tmp-docs-$(basename "$suite")" "$suite" || rc=1
  done
  # Then the site, from the charts just drawn (~20 s; it ran after the alone pass, on the
  # cold run's critical path).
  echo "=== docs site (mkdocs build --strict) ==="
  make --no-print-directory docs || rc=1
  exit $rc
) > "$logs/pytest-docs.log" 2>&1 &
docs_side_pid=$!
# The Airflow matrix's environments (one per older minor, ~2 min cold: downloads and unpacking)
# are built here too, beside the pass below; then the lowest minor's cluster subset runs
# (~3.5 min, mostly waiting on the cluster), then every older minor's unit tests (~3 min of
# CPU, niced: the pass below keeps the CPU it asks for; after the alone pass they were the
# cold run's last minute).
step "Airflow matrix: environments, the lowest minor's cluster subset, the older minors' unit tests: started, beside the steps below"
(
  rc=0
  MATRIX_CLUSTER=lowest MATRIX_PART=cluster scripts/matrix.sh || rc=1
  MATRIX_PART=unit nice -n 10 scripts/matrix.sh || rc=1
  exit $rc
) > "$logs/matrix.log" 2>&1 &
matrix_pid=$!
# The KFP side runs beside the Airflow side's first pass too: its cluster tests (the core's at
# the lowest client, and the KFP components' in real pods: they wait on the cluster, and that
# pass leaves about a third of the CPU idle), then its pure tests, niced. Its output is shown
# once it is done, before the alone pass.
step "pytest, kfp side: the cluster tests (the core's, the components'), then the pure ones: started, beside the steps below"
(
  rc=0
  .venv/kfp/bin/python -m pytest -p no:cacheprovider --durations=15 -n 2 --dist loadfile \
    --basetemp="$logs/tmp-kfp-core" "${kfp_core_select[@]}" tests/kfp tests/core || rc=1
  # 5 = no tests collected: an empty side is a failure of this script, not a pass.
  nice -n 10 .venv/kfp/bin/python -m pytest -p no:cacheprovider --durations=15 -n 2 \
    --dist loadfile --basetemp="$logs/tmp-kfp-pure" "${kfp_select[@]}" tests/kfp tests/docs \
    || rc=1
  exit $rc
) > "$logs/pytest-kfp.log" 2>&1 &
kfp_pid=$!
run_pytest airflow -n "${TEST_WORKERS:-3}" --dist loadfile "${not_alone[@]}" "${airflow_tests[@]}"
# Done before the tests that need the cluster (and the machine) to themselves.
step "pytest, kfp side: the cluster tests, then the pure ones (run beside the pass above)"
wait "$kfp_pid" || status=1
cat "$logs/pytest-kfp.log"
step "release: build, the wheel at both ends of every range and from Airflow's constraints, the launcher's contents; charts; the docs site"
wait "$docs_side_pid" || status=1
cat "$logs/pytest-docs.log"
step "Airflow matrix (older minors)"
wait "$matrix_pid" || status=1
cat "$logs/matrix.log"
run_pytest airflow "${only_alone[@]}" "${airflow_tests[@]}"

# Last, once every test has written what it writes.
step "no credentials in any log of the suite"
python3 tests/cluster/logscan.py --state-dir "${DEVCLUSTER_STATE_DIR:-.devcluster}" \
  "$logs" "${DEVCLUSTER_STATE_DIR:-.devcluster}/logs" || status=1
# ... nor any secret of the cluster without JobSet (its own CA, keys and tokens).
if [ -d "$DEVCLUSTER_NOJOBSET_STATE_DIR/logs" ]; then
  python3 tests/cluster/logscan.py --state-dir "$DEVCLUSTER_NOJOBSET_STATE_DIR" \
    "$logs" "$DEVCLUSTER_NOJOBSET_STATE_DIR/logs" || status=1
fi

step "result"
if [ $status -eq 0 ]; then
  rm -rf "$logs"
  echo "make test: all green"
else
  echo "make test: FAILED (its logs and the tests' Airflow homes are kept in $logs)"
fi
exit $status
