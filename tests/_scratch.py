"""Folders the tests make outside pytest's own (the Airflow homes, which must exist before
Airflow is imported): inside ``$JOBSET_TEST_SCRATCH`` when ``make test`` sets it (it searches
them for credentials, then removes them with its logs), else in the system's temporary
folder, removed when the process that made them exits. Either way none is left behind."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["scratch_dir"]


def scratch_dir(prefix: str) -> Path:
    """A new empty folder named ``<prefix><random>``."""
    root = os.environ.get("JOBSET_TEST_SCRATCH")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
