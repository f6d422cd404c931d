#!/usr/bin/env bash
# `make test`: lint, build the devcluster (cached), start it, run both environments' suites,
# the docs site build, the release (wheel, sdist, install) and the Airflow matrix (every older
# Airflow 3 minor), and stop the cluster again whatever happened. Exit status: non-zero if
# anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
step() { echo; echo "=== $* ==="; }

step "lint (ruff, mypy --strict, import-linter)"
make --no-print-directory lint || status=1

step "devcluster: build (cached) and start"
if ! make --no-print-directory cluster-up; then
  echo "devcluster failed to start: tests that need it cannot run" >&2
  make --no-print-directory cluster-down || true
  exit 1
fi
trap 'step "devcluster: stop"; make --no-print-directory cluster-down' EXIT
# Every log the suite writes is searched for credentials before the cluster (and the record
# of the tokens it issued) goes away: pytest's output, its temporary folders, the Airflow
# homes of the end-to-end tests, the devcluster's component logs.
logs=$(mktemp -d -t jobset-test-logs-XXXXXX)

run_pytest() {
  local side=$1; shift
  step "pytest, $side side: $*"
  ".venv/$side/bin/python" -m pytest -p no:cacheprovider --basetemp="$logs/tmp-$side" "$@" \
    2>&1 | tee -a "$logs/pytest-$side.log"
  local rc=${PIPESTATUS[0]}
  # 5 = no tests collected: an empty side is a failure of this script, not a pass.
  [ $rc -eq 0 ] || status=1
}

# The real node's tests run containers (tests/cluster); with DEVCLUSTER_REAL_NODE=0 there is no
# real node, so they are deselected rather than failed.
airflow_select=()
kfp_select=(-m "kfp or not cluster")
case "${DEVCLUSTER_REAL_NODE:-1}" in
  0|false|no|off)
    airflow_select=(-m "not realnode"); kfp_select=(-m "(kfp or not cluster) and not realnode")
    echo "DEVCLUSTER_REAL_NODE=${DEVCLUSTER_REAL_NODE}: real-node tests deselected" ;;
esac
# The core's cluster tests run once (both sides share the core's one client); its pure
# tests run on both sides, since validation reads the batch/v1 schema of each side's client.
# tests/bench: the benchmarks' pure parts and their smoke profile (`make bench`'s code, tiny
# sizes, on a devcluster of its own; no thresholds).
run_pytest airflow "${airflow_select[@]}" tests/core tests/cluster tests/airflow tests/docs tests/bench
run_pytest kfp "${kfp_select[@]}" tests/kfp tests/core tests/docs

step "no credentials in any log of the suite"
airflow_homes=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'jobset-*airflow*' -newer "$logs" 2>/dev/null)
# shellcheck disable=SC2086
python3 tests/cluster/logscan.py --state-dir "${DEVCLUSTER_STATE_DIR:-.devcluster}" \
  "$logs" "${DEVCLUSTER_STATE_DIR:-.devcluster}/logs" $airflow_homes || status=1

step "docs site (mkdocs build --strict)"
make --no-print-directory docs || status=1

step "release: build, install the wheel from Airflow's constraints, the launcher's contents"
scripts/venv.sh docs || status=1
run_pytest docs tests/release

step "benchmarks' charts (docs environment: matplotlib)"
run_pytest docs tests/bench

step "Airflow matrix (older minors)"
scripts/matrix.sh || status=1

step "result"
if [ $status -eq 0 ]; then echo "make test: all green"; else echo "make test: FAILED"; fi
exit $status
