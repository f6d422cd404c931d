"""Where the client connects: a kubeconfig file, a kubeconfig's content, or in-cluster.

:class:`ClientSettings` is plain data (an Airflow connection or a KFP parameter can hold it).
The loader hands it to the official ``kubernetes_asyncio`` config loader, which already handles
every kubeconfig authentication (client certificates, tokens, exec plugins, in-cluster service
account tokens): this module writes none of that itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from jobset_core.errors import ConfigError

__all__ = [
    "ClientSettings",
    "ConfigError",
    "Source",
    "choose_source",
    "context_namespace",
    "default_namespace",
    "load_configuration",
]

Source = Literal["kubeconfig_file", "kubeconfig_dict", "in_cluster"]

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
_SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the API server. Give at most one of the three sources.

    With none, the usual order applies: ``$KUBECONFIG`` or ``~/.kube/config`` when present,
    else the in-cluster service account.

    Attributes:
        kubeconfig_path: A kubeconfig file.
        kubeconfig: A kubeconfig's content (the parsed YAML mapping).
        context: The kubeconfig context to use (default: its ``current-context``).
        in_cluster: Use the pod's service account.
    """

    kubeconfig_path: str | os.PathLike[str] | None = None
    kubeconfig: Mapping[str, Any] | None = None
    context: str | None = None
    in_cluster: bool = False

    def __post_init__(self) -> None:
        given = [
            self.kubeconfig_path is not None,
            self.kubeconfig is not None,
            self.in_cluster,
        ]
        if sum(given) > 1:
            raise ConfigError("give at most one of kubeconfig_path, kubeconfig and in_cluster")
        if self.in_cluster and self.context:
            raise ConfigError("a context only applies to a kubeconfig, not to in_cluster")


def choose_source(
    settings: ClientSettings, environ: Mapping[str, str], default_kubeconfig_exists: bool
) -> Source:
    """Decide which source the settings stand for (pure).

    Args:
        settings: The settings.
        environ: The process environment.
        default_kubeconfig_exists: Whether ``$KUBECONFIG`` / ``~/.kube/config`` exists.

    Raises:
        ConfigError: nothing was given and neither a kubeconfig nor a cluster is around.
    """
    if settings.kubeconfig_path is not None:
        return "kubeconfig_file"
    if settings.kubeconfig is not None:
        return "kubeconfig_dict"
    if settings.in_cluster:
        return "in_cluster"
    if default_kubeconfig_exists or settings.context:
        return "kubeconfig_file"
    if environ.get(_SERVICE_HOST_ENV):
        return "in_cluster"
    raise ConfigError(
        "no kubeconfig found ($KUBECONFIG, ~/.kube/config) and not running in a cluster; "
        "pass kubeconfig_path, kubeconfig or in_cluster=True"
    )


def context_namespace(kubeconfig: Mapping[str, Any], context: str | None = None) -> str | None:
    """The namespace a kubeconfig's context names (its ``current-context`` by default), if any."""
    name = context or kubeconfig.get("current-context")
    for entry in kubeconfig.get("contexts") or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            namespace = (entry.get("context") or {}).get("namespace")
            return str(namespace) if namespace else None
    return None


def default_namespace(settings: ClientSettings | None = None) -> str:
    """The namespace to use when none is given, as ``kubectl`` picks it: the kubeconfig
    context's namespace, the pod's own namespace in-cluster, else ``default``."""
    settings = settings or ClientSettings()
    source = _resolve(settings)
    if source == "in_cluster":
        try:
            return _SA_NAMESPACE_FILE.read_text(encoding="utf-8").strip() or "default"
        except OSError:
            return "default"
    for document in _kubeconfig_documents(settings, source):
        namespace = context_namespace(document, settings.context)
        if namespace:
            return namespace
    return "default"


def _kubeconfig_documents(settings: ClientSettings, source: Source) -> list[Mapping[str, Any]]:
    if source == "kubeconfig_dict":
        return [settings.kubeconfig or {}]
    path = _path(settings)
    files = [path] if path else os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)
    documents: list[Mapping[str, Any]] = []
    for name in files:
        try:
            loaded = yaml.safe_load(Path(name).expanduser().read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(loaded, Mapping):
            documents.append(loaded)
    return documents


def _default_kubeconfig_exists(environ: Mapping[str, str]) -> bool:
    paths = environ.get("KUBECONFIG", "")
    candidates = [p for p in paths.split(os.pathsep) if p] or ["~/.kube/config"]
    return any(Path(p).expanduser().is_file() for p in candidates)


def _resolve(settings: ClientSettings) -> Source:
    environ = dict(os.environ)
    return choose_source(settings, environ, _default_kubeconfig_exists(environ))


def _path(settings: ClientSettings) -> str | None:
    return None if settings.kubeconfig_path is None else os.fspath(settings.kubeconfig_path)


async def load_configuration(settings: ClientSettings | None = None) -> Any:
    """A ``kubernetes_asyncio.client.Configuration`` filled by ``kubernetes_asyncio.config``.

    Raises:
        ConfigError: the official loader rejected the settings.
    """
    from kubernetes_asyncio import client, config

    settings = settings or ClientSettings()
    source = _resolve(settings)
    configuration = client.Configuration()
    try:
        if source == "in_cluster":
            load_incluster: Any = config.load_incluster_config  # untyped in kubernetes_asyncio
            load_incluster(client_configuration=configuration)
        elif source == "kubeconfig_dict":
            await config.load_kube_config_from_dict(
                dict(settings.kubeconfig or {}),
                context=settings.context,
                client_configuration=configuration,
            )
        else:
            await config.load_kube_config(
                config_file=_path(settings),
                context=settings.context,
                client_configuration=configuration,
            )
    except (config.ConfigException, OSError) as err:
        raise ConfigError(f"cannot load the {source.replace('_', ' ')}: {err}") from err
    return configuration
