"""Shared helpers of the core tests.

Upstream examples: every JobSet document that the upstream repository ships as an example is
found at test time inside the downloaded JobSet Go module (``go mod download -json
sigs.k8s.io/jobset@v0.12.0`` prints its ``Dir``); nothing upstream is copied into this repo.
Tests take one document each through the ``upstream_example`` argument (parametrized here, at
collection) or the whole search through the ``upstream_examples`` fixture.

Set ``JOBSET_UPSTREAM_DIR`` to a checkout of kubernetes-sigs/jobset to search that tree instead
(the module zip leaves out ``site/``, which is a Go module of its own; see ``EXAMPLE_DIRS``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

JOBSET_MODULE = "sigs.k8s.io/jobset@v0.12.0"
#: Where upstream keeps its examples (``examples/`` at the root is a symlink to the first).
EXAMPLE_DIRS = ("site/static/examples", "config/samples")
_SUFFIXES = (".yaml", ".yml", ".json")
_JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"


@dataclass(frozen=True)
class UpstreamExample:
    """One JobSet document of an upstream example file."""

    relpath: str
    index: int
    document: dict[str, Any]

    @property
    def id(self) -> str:
        """Readable test id: the file's path in the module, plus ``#n`` after the first document."""
        return self.relpath if self.index == 0 else f"{self.relpath}#{self.index}"


@dataclass(frozen=True)
class UpstreamExamples:
    """The result of the search: where it looked, what it found, and what went wrong."""

    root: Path | None
    searched: tuple[str, ...] = ()
    examples: tuple[UpstreamExample, ...] = ()
    skipped: tuple[str, ...] = ()
    errors: tuple[str, ...] = field(default=())


def _go() -> str | None:
    fallback = "/usr/local/go/bin/go"  # where the devcluster build expects Go
    return shutil.which("go") or (fallback if os.access(fallback, os.X_OK) else None)


def locate_jobset_module() -> tuple[Path | None, str | None]:
    """The directory of the downloaded JobSet module (downloading it if needed), or an error."""
    override = os.environ.get("JOBSET_UPSTREAM_DIR")
    if override:
        return Path(override), None
    go = _go()
    if go is None:
        return None, "the go tool is not installed (looked on PATH and in /usr/local/go/bin)"
    try:
        proc = subprocess.run(
            [go, "mod", "download", "-json", JOBSET_MODULE],
            cwd=tempfile.gettempdir(),  # outside any go.mod
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"go mod download {JOBSET_MODULE} failed: {err}"
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None, f"go mod download {JOBSET_MODULE}: {proc.stderr.strip() or proc.stdout}"
    if info.get("Error") or not info.get("Dir"):
        return None, f"go mod download {JOBSET_MODULE}: {info.get('Error', 'no Dir')}"
    return Path(info["Dir"]), None


def find_upstream_examples(root: Path) -> UpstreamExamples:
    """Every top-level JobSet document under :data:`EXAMPLE_DIRS` of ``root``.

    Documents of other kinds (an Argo Workflow, a Kueue queue, ...) are skipped, and so is a
    JobSet that is only embedded in another manifest (it is not a document of its own).
    """
    examples: list[UpstreamExample] = []
    skipped: list[str] = []
    errors: list[str] = []
    searched = tuple(d for d in EXAMPLE_DIRS if (root / d).is_dir())
    for directory in searched:
        for path in sorted((root / directory).rglob("*")):
            if not path.is_file() or path.suffix not in _SUFFIXES:
                continue
            relpath = path.relative_to(root).as_posix()
            try:
                documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
            except (OSError, yaml.YAMLError) as err:
                errors.append(f"{relpath}: {err}")
                continue
            for index, document in enumerate(documents):
                if not isinstance(document, dict) or document.get("kind") != "JobSet":
                    continue
                if document.get("apiVersion") != _JOBSET_API_VERSION:
                    skipped.append(f"{relpath}#{index}: apiVersion {document.get('apiVersion')}")
                    continue
                examples.append(UpstreamExample(relpath, index, document))
    return UpstreamExamples(root, searched, tuple(examples), tuple(skipped), tuple(errors))


@cache
def _search() -> UpstreamExamples:
    root, error = locate_jobset_module()
    if root is None:
        return UpstreamExamples(None, errors=(error or "module not found",))
    return find_upstream_examples(root)


@pytest.fixture(scope="session")
def upstream_examples() -> UpstreamExamples:
    """The whole search for upstream example JobSets (see :func:`find_upstream_examples`)."""
    return _search()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``upstream_example`` over every upstream example JobSet document."""
    if "upstream_example" in metafunc.fixturenames:
        found = _search().examples
        metafunc.parametrize("upstream_example", found, ids=[e.id for e in found])
