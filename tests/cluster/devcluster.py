#!/usr/bin/env python3
"""devcluster: a real, Docker-free Kubernetes control plane with the upstream
JobSet controller, for tests and the demo.

Standard library only (runs with the system python3, no venv). Needs the Go
toolchain (for `build`) and the `openssl` CLI (for `up`).

    python3 tests/cluster/devcluster.py build    # build/cached binaries (cold: 8-30 min)
    python3 tests/cluster/devcluster.py up       # start the cluster in .devcluster/
    python3 tests/cluster/devcluster.py status   # health of every component
    python3 tests/cluster/devcluster.py down     # stop every process that `up` started

The launcher itself is the package ``tests/cluster/localcluster/``; see
tests/cluster/README.md.
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.cluster.localcluster.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
