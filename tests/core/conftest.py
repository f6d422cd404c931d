"""Shared helpers of the core tests.

Upstream examples: every JobSet document that upstream ships as an example is found at test time
inside downloaded JobSet Go modules (``go mod download -json sigs.k8s.io/jobset@<version>``
prints the module's ``Dir``); nothing upstream is copied into this repo. The sources are
:data:`EXAMPLE_SOURCES`:

* ``v0.12.0``, the version we target: only ``config/samples`` is in its module zip. The
  examples moved to ``site/``, a Go module of its own that the module proxy does not serve.
* ``v0.8.2``, the newest module version that still carries ``site/static/examples``: v0.9.0
  and v0.9.1 are not in the checksum database (they download only with ``GONOSUMDB``) and carry
  no examples anyway, nor do v0.10 and later; v0.8.0/v0.8.1 hold the same files, older
  versions a subset. These examples are older than v0.12.0 and still valid for it (the
  devcluster's v0.12.0 webhook accepts them all).

Documents are deduplicated by content (newest source first), so an example that did not change
runs once, under the newest version. Tests take one document each through the
``upstream_example`` argument (parametrized here, at collection) or the whole search through the
``upstream_examples`` fixture. When the search fails or finds nothing, every test that takes
``upstream_example`` gets one more case that fails with the reason: the set is never silently
empty.

Set ``JOBSET_UPSTREAM_DIR`` to a checkout of kubernetes-sigs/jobset to search that tree instead
(all of :data:`EXAMPLE_DIRS`, as version ``checkout``), with no download at all.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

JOBSET_MODULE_PATH = "sigs.k8s.io/jobset"
JOBSET_VERSION = "v0.12.0"
JOBSET_MODULE = f"{JOBSET_MODULE_PATH}@{JOBSET_VERSION}"
#: Where upstream keeps its examples (``examples/`` at the root is a symlink to the first).
EXAMPLE_DIRS = ("site/static/examples", "config/samples")
_SUFFIXES = (".yaml", ".yml", ".json")
_JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
_CHECKOUT = "checkout"
SEARCH_FAILED_ID = "upstream-examples-search-failed"


@dataclass(frozen=True)
class ExampleSource:
    """A module version and the directories of it that must hold examples."""

    version: str
    dirs: tuple[str, ...]


#: Newest first: a document found in several sources keeps the id of the first.
EXAMPLE_SOURCES = (
    ExampleSource(JOBSET_VERSION, ("config/samples",)),
    ExampleSource("v0.8.2", ("site/static/examples",)),
)


@dataclass(frozen=True)
class UpstreamExample:
    """One JobSet document of an upstream example file."""

    version: str
    relpath: str
    index: int
    document: dict[str, Any]
    path: Path

    @property
    def id(self) -> str:
        """Readable test id: version and path (``site/static/examples/`` left out), ``#n``
        after the first document of a file, e.g. ``v0.8.2/simple/paralleljobs.yaml``."""
        short = self.relpath.removeprefix(f"{EXAMPLE_DIRS[0]}/")
        return f"{self.version}/{short}" + (f"#{self.index}" if self.index else "")


@dataclass(frozen=True)
class UpstreamExamples:
    """The result of the search: where it looked, what it found, and what went wrong."""

    root: Path | None
    roots: dict[str, Path] = field(default_factory=dict)
    searched: tuple[str, ...] = ()
    examples: tuple[UpstreamExample, ...] = ()
    skipped: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


def _go() -> str | None:
    fallback = "/usr/local/go/bin/go"  # where the devcluster build expects Go
    return shutil.which("go") or (fallback if os.access(fallback, os.X_OK) else None)


@cache
def locate_jobset_module(version: str = JOBSET_VERSION) -> tuple[Path | None, str | None]:
    """The directory of the downloaded JobSet module ``version`` (downloading it if needed),
    or an error. ``JOBSET_UPSTREAM_DIR`` replaces the module of :data:`JOBSET_VERSION`."""
    override = os.environ.get("JOBSET_UPSTREAM_DIR")
    if override and version == JOBSET_VERSION:
        return Path(override), None
    module = f"{JOBSET_MODULE_PATH}@{version}"
    go = _go()
    if go is None:
        return None, "the go tool is not installed (looked on PATH and in /usr/local/go/bin)"
    try:
        proc = subprocess.run(
            [go, "mod", "download", "-json", module],
            cwd=tempfile.gettempdir(),  # outside any go.mod
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"go mod download {module} failed: {err}"
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None, f"go mod download {module}: {proc.stderr.strip() or proc.stdout}"
    if info.get("Error") or not info.get("Dir"):
        return None, f"go mod download {module}: {info.get('Error', 'no Dir')}"
    return Path(info["Dir"]), None


def _content_key(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, default=str)


def find_upstream_examples(
    trees: Iterable[tuple[str, Path, tuple[str, ...]]],
) -> UpstreamExamples:
    """Every top-level JobSet document under the given directories of each tree.

    Args:
        trees: ``(version, root, dirs)`` per source, newest first; each of ``dirs`` must exist.

    Documents of other kinds (an Argo Workflow, a Kueue queue, ...) are skipped, and so is a
    JobSet that is only embedded in another manifest (it is not a document of its own). A
    document equal to one found before (key order aside) is left out and listed in
    ``duplicates``.
    """
    roots: dict[str, Path] = {}
    searched: list[str] = []
    examples: list[UpstreamExample] = []
    skipped: list[str] = []
    duplicates: list[str] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    for version, root, dirs in trees:
        roots[version] = root
        for directory in dirs:
            if not (root / directory).is_dir():
                errors.append(f"{version}: no {directory} in {root}")
                continue
            searched.append(f"{version}/{directory}")
            for path in sorted((root / directory).rglob("*")):
                if not path.is_file() or path.suffix not in _SUFFIXES:
                    continue
                relpath = path.relative_to(root).as_posix()
                try:
                    documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
                except (OSError, yaml.YAMLError) as err:
                    errors.append(f"{version}/{relpath}: {err}")
                    continue
                for index, document in enumerate(documents):
                    if not isinstance(document, dict) or document.get("kind") != "JobSet":
                        continue
                    example = UpstreamExample(version, relpath, index, document, path)
                    if document.get("apiVersion") != _JOBSET_API_VERSION:
                        skipped.append(f"{example.id}: apiVersion {document.get('apiVersion')}")
                        continue
                    key = _content_key(document)
                    if key in seen:
                        duplicates.append(f"{example.id}: same as {seen[key]}")
                        continue
                    seen[key] = example.id
                    examples.append(example)
    main = roots.get(JOBSET_VERSION) or roots.get(_CHECKOUT)
    return UpstreamExamples(
        main,
        roots,
        tuple(searched),
        tuple(examples),
        tuple(skipped),
        tuple(duplicates),
        tuple(errors),
    )


@cache
def search_upstream_examples() -> UpstreamExamples:
    """The search over :data:`EXAMPLE_SOURCES` (or ``JOBSET_UPSTREAM_DIR``), done once."""
    override = os.environ.get("JOBSET_UPSTREAM_DIR")
    if override:
        checkout = Path(override)
        dirs = tuple(d for d in EXAMPLE_DIRS if (checkout / d).is_dir()) or EXAMPLE_DIRS
        return find_upstream_examples([(_CHECKOUT, checkout, dirs)])
    trees: list[tuple[str, Path, tuple[str, ...]]] = []
    errors: list[str] = []
    for source in EXAMPLE_SOURCES:
        root, error = locate_jobset_module(source.version)
        if root is None:
            errors.append(error or f"{source.version}: module not found")
        else:
            trees.append((source.version, root, source.dirs))
    found = find_upstream_examples(trees)
    return dataclasses.replace(found, errors=(*errors, *found.errors))


@pytest.fixture(scope="session")
def upstream_examples() -> UpstreamExamples:
    """The whole search for upstream example JobSets (see :func:`find_upstream_examples`)."""
    return search_upstream_examples()


@dataclass(frozen=True)
class _SearchFailed:
    reasons: tuple[str, ...]


@pytest.fixture
def upstream_example(request: pytest.FixtureRequest) -> UpstreamExample:
    """One upstream example JobSet (parametrized by :func:`pytest_generate_tests`)."""
    param = request.param
    if isinstance(param, _SearchFailed):
        pytest.fail("upstream examples: " + "; ".join(param.reasons), pytrace=False)
    assert isinstance(param, UpstreamExample)
    return param


def example_params(search: UpstreamExamples) -> list[Any]:
    """One parameter per example of ``search``, plus one that fails with the reasons when the
    search went wrong or found nothing."""
    params: list[Any] = [pytest.param(e, id=e.id) for e in search.examples]
    reasons = search.errors or (() if search.examples else ("no example JobSet found",))
    if reasons:
        params.append(pytest.param(_SearchFailed(reasons), id=SEARCH_FAILED_ID))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``upstream_example`` over every upstream example JobSet document."""
    if "upstream_example" in metafunc.fixturenames:
        metafunc.parametrize(
            "upstream_example", example_params(search_upstream_examples()), indirect=True
        )


# -- runs on the devcluster, each backend ---------------------------------------------------


@pytest.fixture(params=["controller", "native"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn (a module's own ``backend`` fixture takes precedence)."""
    return str(request.param)


@pytest.fixture
async def run(devcluster: Any) -> AsyncIterator[Any]:
    """The lifecycle on the devcluster, in a session of its own (a module's own ``run``
    fixture takes precedence)."""
    from jobset_core.lifecycle import ClientSettings, session

    async with session(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))) as lifecycle:
        yield lifecycle
