# Devcluster targets (included by the root Makefile). See tests/cluster/README.md.
# The launcher is stdlib-only Python, so these targets need no venv.
DEVCLUSTER_PY ?= python3
DEVCLUSTER := $(DEVCLUSTER_PY) $(dir $(lastword $(MAKEFILE_LIST)))devcluster.py

.PHONY: cluster-build cluster-up cluster-down cluster-status cluster-setup cluster-image-lock

cluster-build: ## build (or reuse the cached) etcd, kube-*, kwok and JobSet binaries
	@$(DEVCLUSTER) build

cluster-up: ## start a fresh local control plane + JobSet in .devcluster/ (builds if needed)
	@$(DEVCLUSTER) up

cluster-down: ## stop every process cluster-up started
	@$(DEVCLUSTER) down

cluster-setup: ## install the Debian packages of the real node (runc, CNI plugins, rootfs tools)
	@$(DEVCLUSTER) setup

cluster-status: ## health of every devcluster component
	@$(DEVCLUSTER) status

cluster-image-lock: ## regenerate tests/cluster/images/python.txt (the Python image's PyPI lock)
	@uv=$$(scripts/venv.sh uv) && grep -E '^[A-Za-z0-9_.-]+==' requirements/kfp.txt > .devcluster-kfp-constraints.txt && \
	  UV_CACHE_DIR=$${XDG_CACHE_HOME:-$$HOME/.cache}/airflow-provider-jobset/uv-cache $$uv pip compile -q \
	    tests/cluster/images/python.in -c .devcluster-kfp-constraints.txt --python-version 3.11 \
	    --python-platform x86_64-manylinux_2_28 --generate-hashes --no-emit-package scipy \
	    --custom-compile-command "make cluster-image-lock" -o tests/cluster/images/python.txt; \
	  status=$$?; rm -f .devcluster-kfp-constraints.txt; exit $$status
