"""The shipped Roles are enough, and needed: the launcher runs as a service account that has
nothing but ``kfp_components/rbac/<role>.yaml`` (bound as the YAML binds pipeline-runner).

The launcher's command line (``python -m kfp_components.launcher``) is used, with a
kubeconfig holding the service account's token.
"""

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kfp._cluster import ROOT, bind, kubeconfig_as_account
from tests.kfp.conftest import make_jobset

pytestmark = [pytest.mark.cluster, pytest.mark.kfp]


def _launcher(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kfp_components.launcher", *args],
        cwd=ROOT,
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("backend", "role_file"),
    [
        pytest.param("controller", "jobset-launcher-controller.yaml", id="controller"),
        pytest.param("native", "jobset-launcher-native.yaml", id="native"),
        pytest.param("auto", "jobset-launcher-controller.yaml", id="auto"),
    ],
)
def test_launch_and_cleanup_with_only_the_shipped_role(
    backend: str, role_file: str, devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    bind(devcluster, cluster_namespace, role_file)
    kubeconfig = kubeconfig_as_account(devcluster, cluster_namespace, tmp_path)
    annotations = {"devcluster/run-seconds": "1", "devcluster/termination-message": '{"ok": 1}'}
    jobset = tmp_path / "jobset.yaml"
    jobset.write_text(yaml.safe_dump(make_jobset(annotations=annotations)), encoding="utf-8")
    run_id = uuid.uuid4().hex
    common = ["--backend", backend, "--run-id", run_id, "--task-id", "1"]
    outputs = tmp_path / "outputs.json"
    done = _launcher(
        kubeconfig,
        "launch",
        "--jobset",
        str(jobset),
        "--task-name",
        "train",
        "--follow-logs",
        "--outputs",
        str(outputs),
        *common,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(outputs.read_text(encoding="utf-8"))
    assert result["outputs"]["terminal_state"] == "Completed"
    assert result["outputs"]["result"] == {"ok": 1}
    assert result["metrics"]["workers.succeeded"] == 2.0

    cleaned = _launcher(
        kubeconfig,
        "cleanup",
        "--run-id",
        run_id,
        "--backend",
        "auto" if backend != "native" else "native",
    )
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert f"cleanup of run {run_id}: 1 deleted" in cleaned.stdout


def test_native_backend_needs_more_than_the_controller_role(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    """The account is really limited: the controller Role cannot create Jobs."""
    bind(devcluster, cluster_namespace, "jobset-launcher-controller.yaml")
    kubeconfig = kubeconfig_as_account(devcluster, cluster_namespace, tmp_path)
    jobset = tmp_path / "jobset.yaml"
    jobset.write_text(yaml.safe_dump(make_jobset()), encoding="utf-8")
    done = _launcher(
        kubeconfig,
        "launch",
        "--jobset",
        str(jobset),
        "--backend",
        "native",
        "--run-id",
        "r",
        "--task-name",
        "t",
        "--task-id",
        "1",
    )
    assert done.returncode == 5, done.stdout + done.stderr  # EXIT_API_ERROR
    assert "Forbidden" in done.stderr
