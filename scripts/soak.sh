#!/usr/bin/env bash
# `make soak`: the fault soak (soak/) on the local devcluster: reuses a running one, else
# starts one without the real node (DEVCLUSTER_REAL_NODE=0) and stops it again at the end.
# SOAK_MINUTES, SOAK_SEED and SOAK_TASKS are passed on (see soak/__main__.py).
set -uo pipefail
cd "$(dirname "$0")/.."
if python3 tests/cluster/devcluster.py status >/dev/null 2>&1; then
  echo "devcluster: already running, reusing it"
else
  DEVCLUSTER_REAL_NODE=${DEVCLUSTER_REAL_NODE:-0} make --no-print-directory cluster-up || exit 1
  trap 'make --no-print-directory cluster-down' EXIT
fi
.venv/airflow/bin/python -m soak
