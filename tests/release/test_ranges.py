"""Every range ``pyproject.toml`` declares for the core is tested at both of its ends, on every
Python the package claims.

- **The floor** (``requirements/core-floor.txt``, ``scripts/lock.sh core-floor``): the lowest
  version of each runtime dependency, the lower bounds themselves, on the lowest Python.
- **The ceiling** (``requirements/core-ceiling.txt``): the newest versions the ranges admit, on
  the newest Pythons.

Each end is a bare environment with the built wheel (not the work tree) and its lock, where
``jobsetctl validate`` runs and the core's tests (those that need no cluster) pass. On the
cluster, the KFP side is locked at the same floor (``requirements/kfp-floor.in``) and the
Airflow side at the ceiling of the asynchronous client, so the core's cluster tests meet a real
API server at both ends (``scripts/test.sh``); the official ``kubernetes`` client, capped below
the ceiling there by the cncf provider, serves only the offline schema check, which the
ceiling's pure tests prove.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.release._build import (
    ENDS,
    MACHINE_PYTHON,
    ROOT,
    TESTED_PYTHONS,
    VERSION,
    End,
    _run,
    _wheel,
)

pytestmark = [pytest.mark.release]

#: The core's runtime dependencies: every one has a tested floor and ceiling.
RUNTIME = ("h2", "kubernetes", "kubernetes-asyncio", "pydantic", "pyyaml")


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement).lower()


def _declared() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    return {_name(r.name): r for r in requirements}


def _pins(path: Path) -> dict[str, Version]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", path.read_text(), re.MULTILINE)
    return {_name(name): Version(version) for name, version in found}


def _lower_bound(requirement: Requirement) -> Version:
    (floor,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return floor


def test_the_runtime_dependencies_are_the_ones_with_tested_ends() -> None:
    assert sorted(_declared()) == sorted(RUNTIME)


@pytest.mark.parametrize("lock", ["core-floor.txt", "kfp-floor.in", "kfp.txt"])
def test_the_floors_are_the_lower_bounds(lock: str) -> None:
    pins = _pins(ROOT / "requirements" / lock)
    assert {name: pins[name] for name in RUNTIME} == {
        name: _lower_bound(requirement) for name, requirement in _declared().items()
    }


def _direct_pins(lock: Path) -> dict[str, Version]:
    """What a lock installs because pyproject.toml asks for it (uv's ``# via`` note)."""
    found = re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)\n((?:    #.*\n)*)", lock.read_text(), re.M)
    return {
        _name(m[1]): Version(m[2])
        for m in found
        if "airflow-provider-jobset (pyproject.toml)" in m[3]
    }


def _every_declared_range() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    return [(group, Requirement(r)) for group, reqs in groups.items() for r in reqs]


def test_every_declared_range_is_locked_at_its_ends() -> None:
    """Every lower bound of pyproject.toml, extras included, is a version some environment of
    the suite installs (or the build tools' floor, which builds the release below), and every
    cap's last series is installed: a bound nothing runs is narrowed to what runs."""
    locks = [_direct_pins(p) for p in sorted((ROOT / "requirements").glob("*.txt"))]
    built_with = set(_build_floors())  # test_the_oldest_build_tools_make_the_same_release
    wrong = []
    for group, requirement in _every_declared_range():
        name = _name(requirement.name)
        locked = sorted(pins[name] for pins in locks if name in pins)
        assert locked, f"{group}: {requirement} is in no lock"
        for spec in requirement.specifier:
            bound = Version(spec.version)
            floor_tested = locked[0] == bound or f"{name}=={spec.version}" in built_with
            if spec.operator == ">=" and not floor_tested:
                wrong.append(f"{group}: {requirement}: the oldest locked is {locked[0]}")
            if spec.operator == "<" and locked[-1].major != bound.major - 1:
                wrong.append(f"{group}: {requirement}: the newest locked is {locked[-1]}")
    assert not wrong, "\n".join(wrong)


def _build_floors() -> list[str]:
    """The oldest build tools pyproject.toml admits: the build backend's and the release's."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = [
        *config["build-system"]["requires"],
        *config["project"]["optional-dependencies"]["release"],
    ]
    floors = {}
    for requirement in map(Requirement, declared):
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        assert floors.setdefault(_name(requirement.name), floor) == floor, requirement
    return sorted(f"{name}=={floor}" for name, floor in floors.items())


@pytest.mark.timeout(300)
def test_the_oldest_build_tools_make_the_same_release(dist: Path, tmp_path: Path) -> None:
    uv, uv_env = _uv()
    env = {**_clean_environ(), **uv_env}
    venv = tmp_path / "venv"
    py = str(venv / "bin" / "python")
    _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], env=env)
    _run([uv, "pip", "install", "-q", "--python", py, *_build_floors()], env=env)
    tree = tmp_path / "tree"
    _copy_tree(tree, keep_packages=True)
    out = tmp_path / "dist"
    _run([py, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)], env=env)
    ours, theirs = _wheel(dist), _wheel(out)
    assert theirs.name == ours.name
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(theirs) as b:
        assert sorted(b.namelist()) == sorted(a.namelist())
        metadata = f"airflow_provider_jobset-{VERSION}.dist-info/METADATA"
        assert b.read(metadata) == a.read(metadata)


def test_the_ceiling_reaches_every_upper_bound() -> None:
    """The newest admitted release series of each capped range (``<38`` means 37.x) is locked;
    raising a cap without re-locking the ceiling fails here."""
    pins = _pins(ROOT / "requirements/core-ceiling.txt")
    for name, requirement in _declared().items():
        assert pins[name] in requirement.specifier, (name, pins[name])
        caps = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
        for cap in caps:
            assert pins[name].major == cap.major - 1, f"{name}: locked {pins[name]}, cap <{cap}"


def test_the_airflow_side_runs_the_cluster_tests_at_the_ceiling() -> None:
    """Except ``kubernetes``: the cncf provider caps it below ours there (see the module)."""
    airflow, ceiling = (
        _pins(ROOT / "requirements/airflow.txt"),
        _pins(ROOT / "requirements/core-ceiling.txt"),
    )
    assert {n: airflow[n] for n in RUNTIME if n != "kubernetes"} == {
        n: ceiling[n] for n in RUNTIME if n != "kubernetes"
    }


def test_the_classifiers_claim_exactly_the_tested_pythons() -> None:
    classifiers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["classifiers"]
    claimed = {
        c.rpartition(" :: ")[2]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: \d+\.\d+", c)
    }
    assert claimed == TESTED_PYTHONS
    # The environments not listed in requirements/pythons.txt are built with python3, as is
    # this one.
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == MACHINE_PYTHON
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == f">={min(ENDS, key=lambda e: Version(e.python)).python}"
    assert sorted(claimed, key=Version) == sorted({e.python for e in ENDS}, key=Version)


def _interpreter(version: str) -> str:
    """The machine's Python ``version``, found as scripts/venv.sh finds one."""
    found = subprocess.run(
        ["bash", str(ROOT / "scripts/venv.sh"), "python", version],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(found.stderr.strip(), pytrace=False)
    return found.stdout.strip()


def _uv() -> tuple[str, dict[str, str]]:
    """scripts/venv.sh's uv and its download cache (shared with the suite's environments)."""
    uv = _run(["bash", str(ROOT / "scripts/venv.sh"), "uv"]).stdout.strip()
    return uv, {"UV_CACHE_DIR": str(Path(uv).parents[2] / "uv-cache")}


def _copy_tree(into: Path, *, keep_packages: bool) -> Path:
    """The files git knows, as a fresh clone has them; without the packages, tests import
    them from the installed wheel."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    packages = (
        () if keep_packages else ("jobset_core/", "airflow_provider_jobset/", "kfp_components/")
    )
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file() and not name.startswith(packages):
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(source.read_bytes())
    return into


@pytest.mark.timeout(900)
@pytest.mark.parametrize("end", ENDS, ids=[e.id for e in ENDS])
def test_the_wheel_works_at_this_end_of_every_range(end: End, dist: Path, tmp_path: Path) -> None:
    uv, uv_env = _uv()
    env = {**_clean_environ(), **uv_env}
    venv = tmp_path / "venv"
    py = str(venv / "bin" / "python")
    _run([uv, "venv", "-q", "--python", _interpreter(end.python), str(venv)], env=env)
    lock = ROOT / "requirements" / f"{end.lock}.txt"
    _run([uv, "pip", "install", "-q", "--python", py, "-r", str(lock)], env=env)
    _run([uv, "pip", "install", "-q", "--python", py, "--no-deps", str(_wheel(dist))], env=env)
    _run([uv, "pip", "check", "--python", py], env=env)

    tree = _copy_tree(tmp_path / "tree", keep_packages=False)
    report = (
        "import importlib.metadata as m, json, sys, jobset_core; print(json.dumps({"
        "'python': '%d.%d' % sys.version_info[:2], 'core': jobset_core.__file__, "
        f"'versions': {{n: m.version(n) for n in {list(RUNTIME)!r}}}}}))"
    )
    seen = json.loads(_run([py, "-c", report], cwd=tree, env=env).stdout)
    assert seen["python"] == end.python
    assert seen["core"].startswith(str(venv)), f"imported from {seen['core']}, not the wheel"
    pins = _pins(lock)
    assert {n: Version(v) for n, v in seen["versions"].items()} == {n: pins[n] for n in RUNTIME}

    # The command a user runs first: good files pass, and a bad one names its fields (the
    # schema check behind it is what the newest official client once broke).
    jobsetctl = str(venv / "bin" / "jobsetctl")
    examples = sorted(str(p) for p in (tree / "examples/jobsets").glob("*.yaml"))
    _run([jobsetctl, "validate", *examples], cwd=tree, env=env)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    refused = subprocess.run(
        [jobsetctl, "validate", str(bad)], capture_output=True, text=True, check=False, env=env
    )
    assert refused.returncode == 1, refused
    assert refused.stdout.splitlines() == [f"{bad}: {line}" for line in BAD_SAYS], refused.stdout

    tests = _run(
        [
            py,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-m",
            "not cluster and not realnode",
            "tests/core",
        ],
        cwd=tree,
        env=env,
        timeout=800,
    )
    summary = tests.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, \d+ deselected in .*", summary), tests.stdout[-3000:]


BAD = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: bad}
spec:
  replicatedJobs:
  - name: w
    replicas: -1
    template:
      spec:
        parallelism: many
        completions: 1
        template:
          spec:
            containers: [{name: c, image: busybox}]
"""
BAD_SAYS = [
    "spec.replicatedJobs[0].replicas: Input should be greater than or equal to 0",
    "spec.replicatedJobs[0].template.spec.parallelism: must be of type integer; got string",
]


def _clean_environ() -> dict[str, str]:
    """The test process's environment without its own virtual environment or Python paths."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_CACHE_DIR"}
    }
