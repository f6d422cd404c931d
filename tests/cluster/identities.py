"""Least-privilege identities on the devcluster: a service account's name, bound to one of the
shipped Roles in a namespace, with a short-lived-token kubeconfig (the devcluster's token
webhook accepts it as that service account; no token is ever stored in the kubeconfig).

Used by the RBAC, credential and fault tests and by the soak.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.localcluster import auth as devcluster_auth

__all__ = ["AIRFLOW_ROLES", "Identity", "bind_role", "identity", "least_privilege", "role_rules"]

REPO = Path(__file__).resolve().parents[2]
#: The Roles the Airflow provider ships, by their file stem.
AIRFLOW_ROLES = REPO / "airflow_provider_jobset" / "rbac"


@dataclass(frozen=True)
class Identity:
    """A service account as the API server sees it, and a kubeconfig that authenticates as it.

    Attributes:
        namespace: The service account's namespace.
        account: Its name.
        kubeconfig: An exec-plugin kubeconfig minting tokens of ``ttl`` seconds for it.
        ttl: The lifetime of each token.
    """

    namespace: str
    account: str
    kubeconfig: Path
    ttl: float

    @property
    def username(self) -> str:
        """The user name of the service account."""
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    def connection(self) -> str:
        """An Airflow ``kubernetes`` connection (JSON, for ``AIRFLOW_CONN_...``) using it."""
        import json

        extra = {"kube_config_path": str(self.kubeconfig), "namespace": self.namespace}
        return json.dumps({"conn_type": "kubernetes", "extra": extra})


def identity(
    state_dir: Path,
    folder: Path,
    namespace: str,
    account: str,
    *,
    ttl: float = 600.0,
    server: str | None = None,
) -> Identity:
    """The identity of service account ``namespace/account`` with a kubeconfig in ``folder``
    (``server``: another address of the API server, e.g. a fault proxy's)."""
    path = folder / f"{namespace}-{account}.kubeconfig"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    devcluster_auth.exec_kubeconfig(
        state_dir,
        path,
        user=f"system:serviceaccount:{namespace}:{account}",
        groups=groups,
        ttl=ttl,
        server=server,
        namespace=namespace,
    )
    return Identity(namespace, account, path, ttl)


def role_rules(role: str) -> list[dict[str, Any]]:
    """The rules of a shipped Role (``airflow_provider_jobset/rbac/<role>.yaml``)."""
    for document in yaml.safe_load_all((AIRFLOW_ROLES / f"{role}.yaml").read_text()):
        if document["kind"] == "Role":
            return list(document["rules"])
    raise AssertionError(f"no Role in {role}.yaml")


def bind_role(
    devcluster: Any,
    namespace: str,
    role: str,
    who: Identity,
    *,
    rules: Iterable[Mapping[str, Any]] | None = None,
) -> None:
    """Create the shipped Role ``role`` in ``namespace`` (with ``rules`` instead of its own,
    when given) and bind it to ``who``, as the file's RoleBinding binds its example subject."""
    from kubernetes import client

    api = client.RbacAuthorizationV1Api(devcluster.api_client())
    for document in yaml.safe_load_all((AIRFLOW_ROLES / f"{role}.yaml").read_text()):
        body = copy.deepcopy(document)
        body["metadata"]["namespace"] = namespace
        body["metadata"]["name"] = f"{role}-{who.account}"
        if body["kind"] == "Role":
            if rules is not None:
                body["rules"] = [dict(r) for r in rules]
            api.create_namespaced_role(namespace, body)
        else:
            body["roleRef"]["name"] = f"{role}-{who.account}"
            body["subjects"] = [
                {"kind": "ServiceAccount", "name": who.account, "namespace": who.namespace}
            ]
            api.create_namespaced_role_binding(namespace, body)


def least_privilege(
    devcluster: Any,
    namespace: str,
    folder: Path,
    account: str,
    roles: Iterable[str],
    *,
    ttl: float = 30.0,
) -> Identity:
    """A service account of ``namespace`` bound there to nothing but the shipped ``roles``,
    with tokens of ``ttl`` seconds (a test that runs as it outlives a few of them)."""
    assert devcluster.state_dir is not None, "short-lived tokens need the devcluster's webhook"
    who = identity(devcluster.state_dir, folder, namespace, account, ttl=ttl)
    for role in roles:
        bind_role(devcluster, namespace, role, who)
    return who
