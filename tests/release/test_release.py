"""The release a user installs: ``python -m build`` makes a wheel and an sdist; the wheel goes
(not editable) into a fresh environment built from Airflow's constraints for the locked Airflow
version and runs a DAG on the devcluster; the KFP launcher image's contents, which cannot be
built here (no container builder), are installed into a plain directory the way
``kfp_components/Dockerfile`` installs them, and its entry point runs a JobSet.

Runs in the ``docs`` environment (it has ``build`` and the setuptools the build uses, so the
build needs no download). The installs use pip from PyPI, like a user; pip's cache makes a
second run cheap.

Airflow publishes its constraints file per release only on a site the build machines cannot
reach; ``requirements/constraints/`` holds one rebuilt from PyPI the same way
(``scripts/lock.sh constraints``). ``JOBSET_AIRFLOW_CONSTRAINTS`` (a path or URL) uses
Airflow's own file instead.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tarfile
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.airflow._run_dag import report
from tests.release._build import ROOT, TESTED_PYTHONS, VERSION, _locked, _run, _sdist, _wheel

pytestmark = [pytest.mark.release]

HERE = Path(__file__).resolve().parent
PYTHON = os.environ.get("PYTHON", "python3")
#: What installing the package must never move away from Airflow's constraints. (Others may:
#: the package needs common-compat >= 1.21, newer than 3.3.2's constraints pin.)
NEVER_MOVES = ("apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk")


def test_build_makes_a_wheel_and_an_sdist_of_the_one_version(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == [
        f"airflow_provider_jobset-{VERSION}-py3-none-any.whl",
        f"airflow_provider_jobset-{VERSION}.tar.gz",
    ]
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        files = set(wheel.namelist())
        info = f"airflow_provider_jobset-{VERSION}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    for needed in (
        "jobset_core/py.typed",
        "airflow_provider_jobset/py.typed",
        "kfp_components/py.typed",
        "kfp_components/launch_jobset.yaml",
        "kfp_components/cleanup_jobsets.yaml",
        "kfp_components/rbac/jobset-launcher-controller.yaml",
        "kfp_components/rbac/jobset-launcher-native.yaml",
        "airflow_provider_jobset/rbac/jobset-airflow-worker-controller.yaml",
        "airflow_provider_jobset/rbac/jobset-airflow-worker-native.yaml",
        "airflow_provider_jobset/rbac/jobset-airflow-triggerer-controller.yaml",
        "airflow_provider_jobset/rbac/jobset-airflow-triggerer-native.yaml",
        "airflow_provider_jobset/rbac/kustomization.yaml",
        "jobset_core/_version.py",
    ):
        assert needed in files, needed
    assert not [f for f in files if f.startswith(("tests/", "examples/", "docs/", "scripts/"))]
    assert f"Version: {VERSION}\n" in metadata
    assert _requires_dist(metadata) == _declared_requirements()
    assert "jobsetctl = jobset_core.cli:script" in entry_points
    assert "provider_info = airflow_provider_jobset:get_provider_info" in entry_points
    assert "jobset_view = airflow_provider_jobset.plugin:JobSetViewPlugin" in entry_points
    with tarfile.open(dist / f"airflow_provider_jobset-{VERSION}.tar.gz") as sdist:
        members = {m.name.split("/", 1)[-1] for m in sdist.getmembers()}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "jobset_core/_version.py"} <= members


def _requirement_key(requirement: Requirement, extra: str) -> tuple[str, str, str]:
    name = re.sub(r"[-_.]+", "-", requirement.name).lower()
    return (name, ",".join(sorted(str(requirement.specifier).split(","))), extra)


def _declared_requirements() -> set[tuple[str, str, str]]:
    """Every requirement of pyproject.toml, with the extra it belongs to ("" for none)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {_requirement_key(Requirement(r), extra) for extra, reqs in groups.items() for r in reqs}


def _requires_dist(metadata: str) -> set[tuple[str, str, str]]:
    """The wheel's ``Requires-Dist`` lines, as :func:`_declared_requirements` says them."""
    found = set()
    for line in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or ():
        requirement = Requirement(line)
        extra = re.search(r'extra == "([^"]+)"', str(requirement.marker or ""))
        requirement.marker = None
        found.add(_requirement_key(requirement, extra[1] if extra else ""))
    return found


#: The classifiers the release claims (PEP 639: no licence classifier beside the expression).
CLASSIFIERS = {
    "Development Status :: 4 - Beta",
    "Framework :: Apache Airflow",
    "Framework :: Apache Airflow :: Provider",
    "Intended Audience :: Developers",
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Topic :: System :: Distributed Computing",
    "Typing :: Typed",
}


def _dockerfile_sources() -> list[str]:
    """What the launcher's Dockerfile copies from its build context."""
    sources: list[str] = []
    for line in (ROOT / "kfp_components/Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            args = [a for a in line.split()[1:] if not a.startswith("--")]
            sources += args[:-1]
    assert sources, "the Dockerfile copies nothing: it changed shape"
    return sources


def test_the_release_carries_its_licence_classifiers_launcher_and_rbac(dist: Path) -> None:
    info = f"airflow_provider_jobset-{VERSION}.dist-info"
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        files = set(wheel.namelist())
        metadata = wheel.read(f"{info}/METADATA").decode()
        wheel_licence = wheel.read(f"{info}/licenses/LICENSE")
    with tarfile.open(_sdist(dist)) as sdist:
        members = {m.name.split("/", 1)[-1]: m for m in sdist.getmembers()}

        def read(name: str) -> bytes:
            member = sdist.extractfile(members[name])
            assert member is not None, name
            return member.read()

        pkg_info = read("PKG-INFO").decode()
        sdist_licence = read("LICENSE")
    licence = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in licence
    assert wheel_licence == licence
    assert sdist_licence == licence

    # PEP 639 in both the wheel's METADATA and the sdist's PKG-INFO.
    for where, text in (("METADATA", metadata), ("PKG-INFO", pkg_info)):
        meta = HeaderParser().parsestr(text)
        version = tuple(int(n) for n in meta["Metadata-Version"].split("."))
        assert version >= (2, 4), (where, meta["Metadata-Version"])
        assert meta["License-Expression"] == "Apache-2.0", where
        assert meta.get_all("License-File") == ["LICENSE"], where
        assert meta["License"] is None, where
        classifiers = set(meta.get_all("Classifier") or ())
        assert not {c for c in classifiers if c.startswith("License ::")}, where
        pythons = {
            c.rpartition(" :: ")[2]
            for c in classifiers
            if re.fullmatch(r"Programming Language :: Python :: \d+\.\d+", c)
        }
        assert pythons == TESTED_PYTHONS, (where, pythons)
        assert not CLASSIFIERS - classifiers, (where, CLASSIFIERS - classifiers)
        # The project's home (pyproject.toml's [project.urls]), as a package index shows it.
        urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or ())
        assert set(urls) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}, where

    # The sdist is a build context for the launcher image; the wheel has no use for its
    # Dockerfile. The RBAC Roles are in both.
    assert "kfp_components/Dockerfile" in members
    assert "kfp_components/Dockerfile" not in files
    for source in _dockerfile_sources():
        assert source in members or any(m.startswith(f"{source}/") for m in members), source
    rbac = {
        str(path.relative_to(ROOT))
        for package in ("airflow_provider_jobset", "kfp_components")
        for path in (ROOT / package / "rbac").rglob("*.yaml")
    }
    assert len(rbac) >= 4, rbac
    assert rbac <= members.keys(), rbac - members.keys()
    assert rbac <= files, rbac - files


def _constraints() -> str:
    chosen = os.environ.get("JOBSET_AIRFLOW_CONSTRAINTS")
    if chosen:
        return chosen
    airflow = _locked("apache-airflow")
    path = ROOT / "requirements" / "constraints" / f"airflow-{airflow}-py3.11.txt"
    assert path.exists(), f"no constraints for Airflow {airflow}: run scripts/lock.sh constraints"
    return str(path)


DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

pod = {{
    "metadata": {{"annotations": {{"devcluster/termination-message": '{{"installed": true}}'}}}},
    "spec": {{"restartPolicy": "Never", "containers": [{{"name": "c", "image": "busybox"}}]}},
}}
with DAG("installed", schedule=None, start_date=datetime(2026, 1, 1)):
    JobSetOperator(
        task_id="run",
        namespace={namespace!r},
        jobset={{
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {{"name": "installed"}},
            "spec": {{"replicatedJobs": [{{"name": "w", "template": {{"spec": {{
                "backoffLimit": 0, "template": pod}}}}}}]}},
        }},
        deferrable={deferrable!r},
    )
"""


@pytest.mark.cluster
@pytest.mark.timeout(1500)
def test_the_wheel_installs_from_airflows_constraints_and_runs_a_dag(
    dist: Path, tmp_path: Path, cluster_namespace: str, devcluster: Any
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _wheel(dist)
    (wheels / wheel.name).write_bytes(wheel.read_bytes())
    venv = tmp_path / "venv"
    airflow = _locked("apache-airflow")
    installed = _run(
        ["bash", str(HERE / "install.sh"), str(venv), str(wheels), airflow, _constraints()]
    )
    moved = sorted(
        ln.split()[1] for ln in installed.stdout.splitlines() if ln.startswith("moved: ")
    )
    # Airflow itself never moves; what else pip moved is shown in the test's output.
    print("moved away from Airflow's constraints:", ", ".join(moved) or "nothing")
    assert not {m.split("==")[0] for m in moved} & set(NEVER_MOVES), moved
    py = str(venv / "bin" / "python")

    home = tmp_path / "home"
    dags = home / "dags"
    dags.mkdir(parents=True)
    kubeconfig = str(devcluster.kubeconfig)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON"))},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "KUBECONFIG": kubeconfig,
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}}
        ),
    }
    where = _run(
        [
            py,
            "-c",
            "import airflow_provider_jobset as p, jobset_core as c; "
            "print(p.__file__); print(c.__version__)",
        ],
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    assert where[0].startswith(str(venv)), f"imported from {where[0]}, not the installed wheel"
    assert where[1] == VERSION
    _run([py, "-m", "airflow", "db", "migrate"], cwd=tmp_path, env=env)
    listed = _run(
        [py, "-m", "airflow", "providers", "list", "--output", "json"], cwd=tmp_path, env=env
    )
    providers = json.loads(listed.stdout[listed.stdout.index("[{") :])
    assert {"package_name": "airflow-provider-jobset", "version": VERSION}.items() <= next(
        p for p in providers if p["package_name"] == "airflow-provider-jobset"
    ).items()
    assert _run([str(venv / "bin" / "jobsetctl"), "--version"], env=env).stdout.split() == [
        "jobsetctl",
        VERSION,
    ]

    for deferrable in (False, True):
        dag_path = dags / "installed.py"
        dag_path.write_text(DAG.format(namespace=cluster_namespace, deferrable=deferrable))
        written = tmp_path / f"report-{deferrable}.json"
        run = _run(
            [py, str(ROOT / "tests/airflow/_run_dag.py"), str(dag_path), "installed", str(written)],
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
        result = report(run.stdout, run.stderr, written)
        assert result["state"] == "success", run.stdout[-3000:]
        assert result["tasks"]["run"]["xcom"]["return_value"] == {"installed": True}


def _dockerfile() -> tuple[str, str, list[str]]:
    """The launcher image's install command, its import check and its entry point."""
    text = (ROOT / "kfp_components/Dockerfile").read_text().replace("\\\n", " ")
    install = check = ""
    entrypoint: list[str] = []
    for line in text.splitlines():
        if line.startswith("RUN pip install"):
            install, _, rest = line[len("RUN ") :].partition("&&")
            check = rest.strip()
        if line.startswith("ENTRYPOINT"):
            entrypoint = json.loads(line[len("ENTRYPOINT") :])
    assert install and check.startswith("python -c") and entrypoint, "Dockerfile changed shape"
    return install.strip(), check, entrypoint


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_the_launcher_image_contents_run_a_step(
    dist: Path, tmp_path: Path, cluster_namespace: str, devcluster: Any
) -> None:
    install, check, entrypoint = _dockerfile()
    # The Dockerfile installs ".[kfp]" from the copied source with the KFP lock as
    # constraints; here the same command installs the wheel into a plain directory.
    args = shlex.split(install)
    assert args[:2] == ["pip", "install"] and ".[kfp]" in args, install
    args[args.index(".[kfp]")] = f"{_wheel(dist)}[kfp]"
    base = tmp_path / "python"
    _run([PYTHON, "-m", "venv", str(base)])
    image = tmp_path / "image"
    _run(
        [str(base / "bin" / "python"), "-m", *args[:2], "--target", str(image), *args[2:]], cwd=ROOT
    )
    py = str(base / "bin" / "python")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
        "PYTHONPATH": str(image),
        "KUBECONFIG": str(devcluster.kubeconfig),
    }
    # The image's own import check, then its entry point running a step for real.
    _run([py, *shlex.split(check)[1:]], cwd=tmp_path, env=env)
    jobset = tmp_path / "jobset.yaml"
    jobset.write_text(
        json.dumps(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "launcher"},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "w",
                            "template": {
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "metadata": {
                                            "annotations": {
                                                "devcluster/termination-message": '{"image": "ok"}'
                                            }
                                        },
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "containers": [{"name": "c", "image": "busybox"}],
                                        },
                                    },
                                }
                            },
                        }
                    ]
                },
            }
        )
    )
    outputs = tmp_path / "outputs.json"
    assert entrypoint[0] == "python"
    _run(
        [
            py,
            *entrypoint[1:],
            "launch",
            "--jobset",
            str(jobset),
            "--namespace",
            cluster_namespace,
            "--run-id",
            "release-test",
            "--task-name",
            "train",
            "--task-id",
            "t-1",
            "--delete-policy",
            "always",
            "--outputs",
            str(outputs),
        ],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    written = json.loads(outputs.read_text())["outputs"]
    imported = _run(
        [py, "-c", "import kfp_components; print(kfp_components.__file__)"], cwd=tmp_path, env=env
    ).stdout.strip()
    assert imported.startswith(str(image)), imported
    assert written["terminal_state"] == "Completed", written
    assert written["result"] == {"image": "ok"}, written


def test_changelog_follows_keep_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "[Keep a Changelog](https://keepachangelog.com/" in text
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases, "no release sections"
    names = [name for name, _ in releases]
    assert names[0] in ("Unreleased", VERSION), "the newest section is Unreleased or this version"
    for name, date in releases:
        assert name == "Unreleased" or (re.fullmatch(r"\d+\.\d+\.\d+", name) and date), name
    kinds = set(re.findall(r"^### (\w+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
