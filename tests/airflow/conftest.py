"""Airflow test setup: a private ``AIRFLOW_HOME`` (never the user's) with an SQLite database
migrated once per session, and helpers to run DAG files with ``dag.test()``.

``AIRFLOW_HOME`` is set when this file is imported, before anything imports Airflow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._scratch import scratch_dir

HOME = scratch_dir("jobset-airflow-home-")
DAGS = HOME / "dags"
DAGS.mkdir()
os.environ["AIRFLOW_HOME"] = str(HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS)
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{HOME}/airflow.db"
os.environ.pop("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", None)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """``airflow db migrate`` into the session's SQLite database (once)."""
    marker = HOME / ".migrated"
    if not marker.exists():
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=True,
            capture_output=True,
            env=dict(os.environ),
            timeout=300,
        )
        marker.touch()
    return HOME


@pytest.fixture
def kube_conn(devcluster: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """``kubernetes_default`` pointing at the devcluster (an env-var connection)."""
    kubeconfig = str(devcluster.kubeconfig)  # type: ignore[attr-defined]
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(conn))
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    return kubeconfig


@pytest.fixture
def dag_file(airflow_db: Path) -> Iterator[Path]:
    """A DAG file path in the dags folder, removed afterwards."""
    created: list[Path] = []

    class _Writer:
        def __call__(self, name: str, text: str) -> Path:
            path = DAGS / f"{name}.py"
            path.write_text(text)
            created.append(path)
            return path

    yield _Writer()  # type: ignore[misc]
    for path in created:
        path.unlink(missing_ok=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.airflow_min("3.3")``: the test is about a feature of that Airflow and
    newer; below it the fallback is what ``test_compat.py`` checks."""
    marker = item.get_closest_marker("airflow_min")
    if marker is None:
        return
    from airflow import __version__
    from packaging.version import Version

    if Version(Version(__version__).base_version) < Version(marker.args[0]):
        pytest.skip(f"needs Airflow {marker.args[0]}+ (this is {__version__})")
