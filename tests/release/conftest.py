"""The release is built once per session: every release test installs the same files."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.release._build import ROOT, _run


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: the sdist, then the wheel built from the sdist.

    Built from a copy of the files git knows (tracked, or new and not ignored), as a fresh
    clone with this work tree's changes has them: setuptools adds every file its last file
    list named (the work tree's ``*.egg-info/SOURCES.txt``) to the next sdist, so a build in
    the work tree could pass with a file the project no longer ships.
    """
    tree = tmp_path_factory.mktemp("tree")
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is listed too
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)])
    return out
