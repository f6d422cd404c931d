# The two commands of the README are the contract: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
ROOT := $(abspath .)
AIRFLOW_PY := $(ROOT)/.venv/airflow/bin/python
KFP_PY := $(ROOT)/.venv/kfp/bin/python

include tests/cluster/cluster.mk

.PHONY: help venvs lint test test-unit fuzz bench demo soak clean

help:
	@echo "make test       lint + all tests (both environments) against the local control plane"
	@echo "make demo       bring up the devcluster (building it if needed) and run the main job"
	@echo "                (DEMO_QUEUE=1: through Kueue; on your cluster, DEMO_QUEUE=<LocalQueue>)"
	@echo "make test-unit  fast tests that need no cluster"
	@echo "make lint       ruff, mypy --strict on jobset_core, import-linter contracts"
	@echo "make docs       build the documentation site into site/ (mkdocs --strict)"
	@echo "make test-matrix  the Airflow adapter on every older Airflow 3 minor (devcluster)"
	@echo "make fuzz       long differential fuzzing against the API server (JOBSET_FUZZ_EXAMPLES)"
	@echo "make bench      the benchmarks against the cncf.kubernetes provider (docs/benchmarks.md)"
	@echo "make soak       30+ JobSet tasks through real Airflow while components are killed (SOAK_MINUTES, SOAK_SEED)"
	@echo "make cluster-up / cluster-down / cluster-status"

venvs:
	@scripts/venv.sh airflow
	@scripts/venv.sh kfp

lint: venvs
	@status=0; \
	for step in ".venv/airflow/bin/ruff check ." ".venv/airflow/bin/ruff format --check ." \
	    ".venv/airflow/bin/mypy jobset_core airflow_provider_jobset benchmarks" \
	    ".venv/kfp/bin/mypy jobset_core kfp_components" \
	    ".venv/airflow/bin/lint-imports --no-cache"; do \
	  echo "+ $$step"; $$step || status=1; \
	done; exit $$status

test: venvs
	@scripts/test.sh

test-unit: venvs
	$(AIRFLOW_PY) -m pytest -m "not cluster and not realnode" -q tests
	$(KFP_PY) -m pytest -m "not cluster and not realnode" -q tests/core tests/kfp

fuzz: venvs
	@scripts/fuzz.sh

# The benchmarks (benchmarks/, docs/benchmarks.md): on a devcluster of their own (with an
# API-server audit log), or on the cluster of KUBECONFIG. BENCH_ARGS: e.g. --only scale,
# --set layouts=1,10, --profile smoke. The docs environment renders the page and the charts.
BENCH_ARGS ?=
BENCH_RESULTS := benchmarks/results/latest.json
bench: venvs
	@scripts/venv.sh docs
	$(AIRFLOW_PY) -m benchmarks run --out $(BENCH_RESULTS) $(BENCH_ARGS)
	.venv/docs/bin/python -m benchmarks report $(BENCH_RESULTS) --page docs/benchmarks.md \
	  --charts benchmarks/results

demo: venvs
	@scripts/demo.sh

soak: venvs
	@scripts/soak.sh

.PHONY: docs test-matrix

# -q would hide the warnings that --strict counts: keep the log level.
docs:
	@scripts/venv.sh docs
	@NO_MKDOCS_2_WARNING=1 .venv/docs/bin/mkdocs build --strict --site-dir site

test-matrix:
	@scripts/matrix.sh

# The release into dist/: the sdist, then the wheel built from it, with the docs environment's
# locked build tools (no build isolation: nothing is resolved at build time). The wheel's
# timestamps are the last commit's, so one commit always gives the same wheel.
.PHONY: dist
dist:
	@scripts/venv.sh docs
	rm -rf dist
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 315532800) \
	  .venv/docs/bin/python -m build --no-isolation --outdir dist .

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache
