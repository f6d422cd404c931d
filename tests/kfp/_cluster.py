"""Helpers of the KFP tests that run on the devcluster: the runs a namespace holds, and the
shipped KFP Roles bound to a namespace's ``pipeline-runner``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "kfp_components" / "rbac"
#: The service account the shipped RoleBindings name (standalone KFP's pipeline runner).
ACCOUNT = "pipeline-runner"
ANCHORS = "jobset-core/anchor=native"
RUN_LABEL = "jobset-core/kfp-run-id"


def runs(devcluster: Any, namespace: str, backend: str) -> list[dict[str, Any]]:
    """The runs in a namespace: JobSets (controller) or anchor ConfigMaps (native)."""
    if backend == "controller":
        listed = devcluster.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
        )
        return list(listed["items"])
    items = devcluster.core.list_namespaced_config_map(namespace, label_selector=ANCHORS).items
    return [devcluster.core.api_client.sanitize_for_serialization(cm) for cm in items]


def run_status(run: dict[str, Any], backend: str) -> dict[str, Any]:
    if backend == "controller":
        return dict(run.get("status") or {})
    return dict(json.loads((run.get("data") or {}).get("status.json") or "{}"))


def only_run(devcluster: Any, namespace: str, backend: str) -> dict[str, Any]:
    found = runs(devcluster, namespace, backend)
    assert len(found) == 1, [r["metadata"]["name"] for r in found]
    return found[0]


def gone(devcluster: Any, namespace: str, backend: str) -> bool:
    return not runs(devcluster, namespace, backend)


def annotations(**values: str) -> dict[str, str]:
    """The devcluster's kwok pod annotations (``run_seconds="3"`` ...)."""
    return {f"devcluster/{key.replace('_', '-')}": value for key, value in values.items()}


def _create_account(devcluster: Any, namespace: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        devcluster.core.create_namespaced_service_account(
            namespace, {"metadata": {"name": ACCOUNT}}
        )
    except ApiException as error:
        if error.status != 409:
            raise


def bind(devcluster: Any, namespace: str, role_file: str) -> None:
    """``kfp_components/rbac/<role_file>`` in ``namespace``, bound to its ``pipeline-runner``
    as the file binds it (the account is created when missing)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    _create_account(devcluster, namespace)
    rbac = client.RbacAuthorizationV1Api(devcluster.api_client())
    creates = []
    for document in yaml.safe_load_all((RBAC / role_file).read_text(encoding="utf-8")):
        document["metadata"]["namespace"] = namespace
        if document["kind"] == "Role":
            creates.append((rbac.create_namespaced_role, document))
        else:
            assert document["subjects"][0]["name"] == ACCOUNT
            document["subjects"][0]["namespace"] = namespace
            creates.append((rbac.create_namespaced_role_binding, document))
    for create, body in creates:
        try:
            create(namespace, body)
        except ApiException as error:  # bound already (the same file twice)
            if error.status != 409:
                raise


def kubeconfig_as_account(devcluster: Any, namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig holding a token of the namespace's ``pipeline-runner`` (created when
    missing; :func:`bind` gives it its Roles)."""
    _create_account(devcluster, namespace)
    request = {"spec": {"expirationSeconds": 3600}}
    token = devcluster.core.create_namespaced_service_account_token(ACCOUNT, namespace, request)
    admin = yaml.safe_load(devcluster.kubeconfig.read_text(encoding="utf-8"))
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": ACCOUNT, "user": {"token": token.status.token}}],
        "contexts": [
            {
                "name": ACCOUNT,
                "context": {"cluster": cluster["name"], "user": ACCOUNT, "namespace": namespace},
            }
        ],
        "current-context": ACCOUNT,
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
