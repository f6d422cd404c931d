"""The Roles of the RBAC how-to are enough for the Airflow side too: an operator try, in the
worker and deferred (the trigger runs as the same identity, as a triggerer would), succeeds
as a service account that has nothing but ``kfp_components/rbac/<role>.yaml``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kfp._cluster import bind, kubeconfig_as_account

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("deferrable", [False, True], ids=["worker", "deferrable"])
@pytest.mark.parametrize(
    ("backend", "role_file"),
    [
        ("controller", "jobset-launcher-controller.yaml"),
        ("native", "jobset-launcher-native.yaml"),
    ],
    ids=["controller", "native"],
)
def test_an_operator_try_needs_only_the_shipped_role(  # noqa: PLR0917
    backend: str,
    role_file: str,
    deferrable: bool,
    devcluster: Any,
    cluster_namespace: str,
    tmp_path: Path,
) -> None:
    bind(devcluster, cluster_namespace, role_file)
    kubeconfig = kubeconfig_as_account(devcluster, cluster_namespace, tmp_path)
    spec = {
        "namespace": cluster_namespace,
        "backend": backend,
        "deferrable": deferrable,
        "run_id": "manual__rbac",
        "annotations": {"devcluster/run-seconds": "2", "devcluster/termination-message": "42"},
    }
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        ),
    }
    proc = subprocess.run(
        [sys.executable, str(HERE / "_run_op.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines and lines[-1] == {"result": 42}, proc.stdout[-3000:] + proc.stderr[-3000:]
