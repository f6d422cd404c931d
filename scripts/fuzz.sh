#!/usr/bin/env bash
# `make fuzz`: the long profile of the differential fuzz test, in both environments, against the
# devcluster (started here if it is not running, stopped again only then).
# JOBSET_FUZZ_EXAMPLES (default 5000) sets the examples per environment; failures are kept in
# .hypothesis/ and replayed first on the next run.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
started=0
if ! python3 tests/cluster/devcluster.py status >/dev/null 2>&1; then
  make --no-print-directory cluster-up || exit 1
  started=1
fi
trap '[ $started -eq 1 ] && make --no-print-directory cluster-down' EXIT
for side in airflow kfp; do
  echo "=== fuzz, $side side: ${JOBSET_FUZZ_EXAMPLES:-5000} examples ==="
  JOBSET_FUZZ_PROFILE=long ".venv/$side/bin/python" -m pytest -p no:cacheprovider -q \
    --hypothesis-show-statistics tests/core/test_fuzz_differential.py || status=1
done
exit $status
