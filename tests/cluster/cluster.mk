# Devcluster targets (included by the root Makefile). See tests/cluster/README.md.
# The launcher is stdlib-only Python, so these targets need no venv.
DEVCLUSTER_PY ?= python3
DEVCLUSTER := $(DEVCLUSTER_PY) $(dir $(lastword $(MAKEFILE_LIST)))devcluster.py

.PHONY: cluster-build cluster-up cluster-down cluster-status

cluster-build: ## build (or reuse the cached) etcd, kube-*, kwok and JobSet binaries
	@$(DEVCLUSTER) build

cluster-up: ## start a fresh local control plane + JobSet in .devcluster/ (builds if needed)
	@$(DEVCLUSTER) up

cluster-down: ## stop every process cluster-up started
	@$(DEVCLUSTER) down

cluster-status: ## health of every devcluster component
	@$(DEVCLUSTER) status
