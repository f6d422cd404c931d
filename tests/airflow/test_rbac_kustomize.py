"""The shipped kustomize base (``airflow_provider_jobset/rbac/kustomization.yaml``) with the
namespace as a parameter: an overlay puts every Role and RoleBinding in the JobSets' namespace
and binds them to service accounts of another namespace; the API server accepts what it
renders (server-side dry run, as the devcluster's admin), and it holds every file of the
folder, so a new Role cannot be left out of it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import airflow_provider_jobset

RBAC = Path(airflow_provider_jobset.__file__).parent / "rbac"

pytestmark = pytest.mark.cluster


def _kubectl(devcluster: Any, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=devcluster.env,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_base_renders_into_any_namespace_and_the_server_accepts_it(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    listed = yaml.safe_load((RBAC / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in RBAC.glob("jobset-airflow-*.yaml"))
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    patch = [{"op": "replace", "path": "/subjects/0/namespace", "value": "airflow-prod"}]
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": cluster_namespace,
                "resources": [os.path.relpath(RBAC, overlay)],  # kustomize wants it relative
                "patches": [{"target": {"kind": "RoleBinding"}, "patch": json.dumps(patch)}],
            }
        )
    )
    rendered = _kubectl(devcluster, "kustomize", str(overlay))
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["Role"] * len(listed) + ["RoleBinding"] * len(listed), kinds
    assert {o["metadata"]["namespace"] for o in objects} == {cluster_namespace}
    for binding in (o for o in objects if o["kind"] == "RoleBinding"):
        assert [s["namespace"] for s in binding["subjects"]] == ["airflow-prod"], binding
        assert binding["roleRef"]["name"] == binding["metadata"]["name"]
    applied = _kubectl(
        devcluster, "apply", "--dry-run=server", "--server-side", "-f", "-", stdin=rendered
    )
    assert applied.count("serverside-applied (server dry run)") == len(objects), applied
