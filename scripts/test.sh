#!/usr/bin/env bash
# `make test`: lint, build the devcluster (cached), start it, run both environments' suites,
# and stop the cluster again whatever happened. Exit status: non-zero if anything failed.
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

run_pytest() {
  local side=$1; shift
  step "pytest, $side side: $*"
  ".venv/$side/bin/python" -m pytest -p no:cacheprovider "$@"
  local rc=$?
  # 5 = no tests collected: an empty side is a failure of this script, not a pass.
  [ $rc -eq 0 ] || status=1
}

# The real node's tests run containers (tests/cluster); with DEVCLUSTER_REAL_NODE=0 there is no
# real node, so they are deselected rather than failed.
select=()
case "${DEVCLUSTER_REAL_NODE:-1}" in
  0|false|no|off) select=(-m "not realnode"); echo "DEVCLUSTER_REAL_NODE=${DEVCLUSTER_REAL_NODE}: real-node tests deselected" ;;
esac
run_pytest airflow "${select[@]}" tests/core tests/cluster tests/airflow
run_pytest kfp "${select[@]}" tests/core tests/kfp

step "result"
if [ $status -eq 0 ]; then echo "make test: all green"; else echo "make test: FAILED"; fi
exit $status
