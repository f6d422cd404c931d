"""A fresh Python interpreter for the tests that measure what a new process does (what it
imports, what it reads from the file cache): the test's own interpreter, from the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def fresh_python(
    code: str, *args: str, cache_home: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code args...`` in the checkout; with ``cache_home``, its
    ``$XDG_CACHE_HOME`` (the core's file cache) is that folder."""
    env = dict(os.environ)
    if cache_home is not None:
        env["XDG_CACHE_HOME"] = str(cache_home)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=check,
        cwd=ROOT,
    )
