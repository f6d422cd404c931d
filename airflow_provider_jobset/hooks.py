"""``JobSetHook``: an Airflow ``kubernetes`` connection turned into the core's client settings.

The hook reuses the connection type of the ``cncf.kubernetes`` provider, so an existing
``kubernetes_default`` connection just works, and one connection can serve both providers'
tasks. Every extra of that connection type (also in its legacy ``extra__kubernetes__``
spelling) is honoured, accepted as meaningless here, or refused:

===========================================  =======================================================
extra                                        what the hook does with it
===========================================  =======================================================
``in_cluster``                               honoured: use the pod's service account
``kube_config_path``                         honoured: a kubeconfig file
``kube_config``                              honoured: a kubeconfig's content (JSON or YAML text, or
                                             a mapping)
``cluster_context``                          honoured: the kubeconfig context
``namespace``                                honoured: the default namespace of the operators
``disable_verify_ssl``                       honoured: the API server's certificate and name are not
                                             verified (the core's ``insecure_skip_tls_verify``
                                             setting); a warning is logged once per API server
                                             and process
``disable_tcp_keepalive``                    accepted, nothing to do: the core's client never turns
                                             TCP keepalive on, so ``true`` already holds; ``false``
                                             (the cncf default: keepalive probes on its urllib3
                                             sockets) has no equivalent and needs none: the client
                                             finds a dead connection by its own timeouts (10 s to
                                             connect, a read timeout on requests and watches: a
                                             watch silent for 150 s is dropped and opened again)
                                             and closes an idle pooled connection after 15 s, before
                                             a load balancer or firewall drops it
``xcom_sidecar_container_image``             ignored: ``KubernetesPodOperator``'s XCom sidecar image
``xcom_sidecar_container_resources``         ignored: that sidecar's resources
``xcom_sidecar_container_security_context``  ignored: that sidecar's security context (a JobSet has
                                             no XCom sidecar; a connection shared with that operator
                                             keeps working)
any other key                                refused: a ``ValueError`` naming the connection and the
                                             key (a misspelt extra is never dropped silently)
===========================================  =======================================================

The booleans take ``true``/``false`` (or ``1``/``0``, ``yes``/``no``, ``on``/``off``); anything
else is refused. With none of the first three, the usual order applies (``$KUBECONFIG`` /
``~/.kube/config``, then in-cluster). A missing ``kubernetes_default`` counts as an empty one,
like the cncf provider does.

The hook only reads the connection into the core's :class:`~jobset_core.client.ClientSettings`;
the core's one client, observer and lifecycle do the rest (:mod:`jobset_core.lifecycle`). It
never imports a Kubernetes client; :meth:`JobSetHook.aget_config` reads the connection through
Airflow's async accessors so it never blocks a triggerer's loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from airflow_provider_jobset._compat import AirflowNotFoundException, BaseHook

if TYPE_CHECKING:
    from jobset_core.lifecycle import ClientSettings

__all__ = ["KNOWN_EXTRAS", "ConnectionConfig", "JobSetHook", "config_from_extras"]

_PREFIX = "extra__kubernetes__"

#: The extras the hook reads (the module's table says how).
_HONOURED = (
    "in_cluster",
    "kube_config_path",
    "kube_config",
    "cluster_context",
    "namespace",
    "disable_verify_ssl",
)
#: The extras of the ``kubernetes`` connection type that mean nothing for a JobSet (the
#: module's table says why): accepted, so that a connection shared with the cncf provider's
#: operators keeps working.
_IGNORED = (
    "disable_tcp_keepalive",
    "xcom_sidecar_container_image",
    "xcom_sidecar_container_resources",
    "xcom_sidecar_container_security_context",
)
#: Every extra of the ``kubernetes`` connection type; any other key is refused.
KNOWN_EXTRAS = frozenset(_HONOURED + _IGNORED)


def _field(extras: Mapping[str, Any], name: str) -> Any:
    if name in extras:
        return extras[name] or None
    return extras.get(_PREFIX + name) or None


def _as_bool(value: Any, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"sets {name} to {value!r}, which is not a boolean")


def _connection(conn_id: str | None) -> str:
    return "the kubernetes connection" + (f" {conn_id!r}" if conn_id else "")


def _refuse_unknown(extras: Mapping[str, Any], conn_id: str | None) -> None:
    """Refuse a key that is no extra of the ``kubernetes`` connection type, in either
    spelling (a misspelt extra would otherwise be dropped silently)."""
    unknown = [key for key in map(str, extras) if key.removeprefix(_PREFIX) not in KNOWN_EXTRAS]
    if unknown:
        keys = ", ".join(repr(key) for key in sorted(unknown))
        plural = "s" if len(unknown) > 1 else ""
        raise ValueError(
            f"{_connection(conn_id)} has the unknown extra{plural} {keys}; the extras of a "
            f"kubernetes connection are {', '.join(sorted(KNOWN_EXTRAS))}"
        )


def _as_kubeconfig(value: Any) -> dict[str, Any] | None:
    if value is None or isinstance(value, Mapping):
        return None if value is None else dict(value)
    try:
        parsed = json.loads(value)
    except ValueError:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ValueError("sets kube_config to text that is neither JSON nor YAML") from None
    if not isinstance(parsed, Mapping):
        raise ValueError("sets kube_config to something that is not a kubeconfig mapping")
    return dict(parsed)


@dataclass(frozen=True)
class ConnectionConfig:
    """Plain data read from a connection (no client imported): where and which namespace.

    Attributes:
        kubeconfig_path: A kubeconfig file.
        kubeconfig: A kubeconfig's content.
        context: The kubeconfig context.
        in_cluster: Use the pod's service account.
        namespace: The connection's default namespace.
        insecure_skip_tls_verify: Do not verify the API server's certificate (the
            ``disable_verify_ssl`` extra).
    """

    kubeconfig_path: str | None = None
    kubeconfig: Mapping[str, Any] | None = None
    context: str | None = None
    in_cluster: bool = False
    namespace: str | None = None
    insecure_skip_tls_verify: bool = False

    def client_settings(self) -> ClientSettings:
        """The core's settings (imports the client layer)."""
        from jobset_core.lifecycle import ClientSettings

        return ClientSettings(
            kubeconfig_path=self.kubeconfig_path,
            kubeconfig=self.kubeconfig,
            context=self.context,
            in_cluster=self.in_cluster,
            insecure_skip_tls_verify=self.insecure_skip_tls_verify,
        )


def config_from_extras(
    extras: Mapping[str, Any],
    *,
    config_file: str | None = None,
    cluster_context: str | None = None,
    in_cluster: bool | None = None,
    namespace: str | None = None,
    conn_id: str | None = None,
) -> ConnectionConfig:
    """Read a ``kubernetes`` connection's extras; hook arguments override the extras.

    Every extra of the connection type is honoured or deliberately ignored (the module's
    table); ``conn_id`` names the connection in the errors.

    Raises:
        ValueError: an unknown extra (named with the connection), more than one of in-cluster,
            kubeconfig path and kubeconfig content, or a malformed value.
    """
    _refuse_unknown(extras, conn_id)
    try:
        return _config(extras, config_file, cluster_context, in_cluster, namespace)
    except ValueError as err:  # each says what the connection "sets"
        raise ValueError(f"{_connection(conn_id)} {err}") from None


def _config(
    extras: Mapping[str, Any],
    config_file: str | None,
    cluster_context: str | None,
    in_cluster: bool | None,
    namespace: str | None,
) -> ConnectionConfig:
    in_cluster_value = (
        in_cluster
        if in_cluster is not None
        else _as_bool(_field(extras, "in_cluster"), "in_cluster")
    )
    path = config_file or _field(extras, "kube_config_path")
    content = _as_kubeconfig(_field(extras, "kube_config"))
    chosen = [bool(in_cluster_value), path is not None, content is not None]
    if sum(chosen) > 1:
        raise ValueError(
            "sets more than one of in_cluster, kube_config_path and kube_config; they are "
            "mutually exclusive"
        )
    context = cluster_context or _field(extras, "cluster_context")
    # Ignored (the module's table says why), but a value that is no boolean is still a mistake.
    _as_bool(_field(extras, "disable_tcp_keepalive"), "disable_tcp_keepalive")
    return ConnectionConfig(
        kubeconfig_path=str(path) if path is not None else None,
        kubeconfig=content,
        context=None if in_cluster_value else context,
        in_cluster=bool(in_cluster_value),
        namespace=namespace or _field(extras, "namespace"),
        insecure_skip_tls_verify=bool(
            _as_bool(_field(extras, "disable_verify_ssl"), "disable_verify_ssl")
        ),
    )


class JobSetHook(BaseHook):
    """Reach a cluster through an Airflow ``kubernetes`` connection.

    Args:
        kubernetes_conn_id: The connection (``kubernetes_default`` by default; ``None``: no
            connection, the ambient kubeconfig / in-cluster account).
        config_file: A kubeconfig file, overriding the connection.
        cluster_context: A kubeconfig context, overriding the connection.
        in_cluster: Use the pod's service account, overriding the connection.
        namespace: Default namespace, overriding the connection's.
    """

    conn_name_attr = "kubernetes_conn_id"
    default_conn_name = "kubernetes_default"
    conn_type = "kubernetes"
    hook_name = "Kubernetes (JobSet)"

    def __init__(
        self,
        kubernetes_conn_id: str | None = default_conn_name,
        *,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__()
        self.kubernetes_conn_id = kubernetes_conn_id
        self._overrides: dict[str, Any] = {
            "config_file": config_file,
            "cluster_context": cluster_context,
            "in_cluster": in_cluster,
            "namespace": namespace,
        }
        self._config: ConnectionConfig | None = None

    @classmethod
    def of(cls, task: Any) -> JobSetHook:
        """The hook of a task, sensor or trigger that carries the connection arguments
        (``kubernetes_conn_id``, ``config_file``, ``cluster_context``, ``in_cluster`` and, when
        it has one, ``namespace``)."""
        return cls(
            task.kubernetes_conn_id,
            config_file=task.config_file,
            cluster_context=task.cluster_context,
            in_cluster=task.in_cluster,
            namespace=getattr(task, "namespace", None),
        )

    # ------------------------------------------------------------------ connection

    def _extras(self) -> dict[str, Any]:
        if not self.kubernetes_conn_id:
            return {}
        try:
            return dict(self.get_connection(self.kubernetes_conn_id).extra_dejson)
        except AirflowNotFoundException:
            if self.kubernetes_conn_id != self.default_conn_name:
                raise
            return {}

    async def _aextras(self) -> dict[str, Any]:
        """The connection's extras. Reads of one connection that overlap share one read: a
        triggerer starting a thousand triggers at once asks its secrets backends (in Airflow
        3, a round trip to the supervisor each) once, not a thousand times. A read that
        starts after the shared one ended reads again: nothing is cached."""
        conn_id = self.kubernetes_conn_id
        if not conn_id:
            return {}
        key = (asyncio.get_running_loop(), conn_id)
        reading = _READING.get(key)
        if reading is None:
            reading = _READING[key] = asyncio.ensure_future(self._read_extras(conn_id))
            reading.add_done_callback(functools.partial(_read, key))
        return dict(await asyncio.shield(reading))  # a cancelled reader leaves it to the others

    async def _read_extras(self, conn_id: str) -> dict[str, Any]:
        from airflow.providers.common.compat.connection import (
            get_async_connection,
            get_async_extra_dejson,
        )

        try:
            connection = await get_async_connection(conn_id)
        except AirflowNotFoundException:
            if conn_id != self.default_conn_name:
                raise
            return {}
        return dict(await get_async_extra_dejson(connection))

    def get_config(self) -> ConnectionConfig:
        """The connection's settings (read once per hook)."""
        if self._config is None:
            self._config = config_from_extras(
                self._extras(), **self._overrides, conn_id=self.kubernetes_conn_id
            )
        return self._config

    async def aget_config(self) -> ConnectionConfig:
        """The connection's settings, read without blocking the event loop."""
        if self._config is None:
            self._config = config_from_extras(
                await self._aextras(), **self._overrides, conn_id=self.kubernetes_conn_id
            )
        return self._config

    def default_namespace(self) -> str:
        """The namespace to use when none is given: the connection's, else the kubeconfig
        context's, else the pod's own (in-cluster), else ``default``."""
        config = self.get_config()
        if config.namespace:
            return config.namespace
        from jobset_core.lifecycle import default_namespace

        return default_namespace(config.client_settings())

    # ------------------------------------------------------------------ clients

    def test_connection(self) -> tuple[bool, str]:
        """Whether the cluster answers, and whether it serves the JobSet API."""
        from jobset_core.lifecycle import blocking

        async def served(lifecycle: Any) -> bool:
            return bool(await lifecycle.runs.jobset_api_served())

        try:
            available = blocking(self.get_config().client_settings(), served)
        except Exception as err:  # the UI shows any failure as text
            return False, str(err)
        if available:
            return True, "connected; the JobSet API (jobset.x-k8s.io/v1alpha2) is served"
        return True, "connected; the JobSet API is not served: the native backend will be used"


#: The connection reads in flight, by event loop and connection id (see ``_aextras``).
_READING: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Future[dict[str, Any]]] = {}


def _read(key: tuple[asyncio.AbstractEventLoop, str], reading: asyncio.Future[Any]) -> None:
    """A shared read ended: the next one reads again (its error, if any, was its readers')."""
    if _READING.get(key) is reading:
        del _READING[key]
    if not reading.cancelled():
        reading.exception()  # retrieved: every reader was given it
