"""Where the client connects: a kubeconfig file, a kubeconfig's content, or in-cluster.

:class:`ClientSettings` is plain data (an Airflow connection or a KFP parameter can hold it).
:func:`load_connection` hands it to the official ``kubernetes_asyncio`` config loader for the
server, TLS and fixed credentials (a token, client certificates, basic auth), and keeps the
credentials that expire to itself (:mod:`._credentials`): an exec plugin, a ``tokenFile``, the
in-cluster service-account token. The official loader reads those once, and a deferred JobSet
waits for hours in one client, so they are refreshed here before they expire and after a 401.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import copy
import hashlib
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from jobset_core.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from jobset_core.client._credentials import Credentials

__all__ = [
    "ClientSettings",
    "ConfigError",
    "Connection",
    "Source",
    "choose_source",
    "context_namespace",
    "default_namespace",
    "load_connection",
    "settings_spelled_as",
]

Source = Literal["kubeconfig_file", "kubeconfig_dict", "in_cluster"]

log = logging.getLogger(__name__)

_SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_SA_NAMESPACE_FILE = _SA_DIR / "namespace"


#: How the settings are spelled in messages: the Python arguments by default; a front end
#: names its own (the CLI its flags, ``--kubeconfig``) with :func:`settings_spelled_as`. A
#: setting the front end does not offer maps to ``None`` and is left out of the advice.
_SPELLING: dict[str, str | None] = {
    "kubeconfig_path": "kubeconfig_path",
    "kubeconfig": "kubeconfig",
    "context": "context",
    "in_cluster": "in_cluster=True",
}


@contextmanager
def settings_spelled_as(names: Mapping[str, str | None]) -> Iterator[None]:
    """Within the block, messages about :class:`ClientSettings` name the settings as ``names``
    says (keys: ``kubeconfig_path``, ``kubeconfig``, ``context``, ``in_cluster``).

    Example:
        >>> with settings_spelled_as({"kubeconfig_path": "--kubeconfig"}):
        ...     _named("kubeconfig_path")
        '--kubeconfig'
    """
    before = dict(_SPELLING)
    _SPELLING.update(names)
    try:
        yield
    finally:
        _SPELLING.clear()
        _SPELLING.update(before)


def _named(setting: str) -> str | None:
    return _SPELLING.get(setting)


def _either(*settings: str) -> str:
    names = [n for n in (_named(s) for s in settings) if n]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


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
        insecure_skip_tls_verify: Do not verify the API server's certificate (nor its name),
            whatever the source says, as ``kubectl --insecure-skip-tls-verify`` does; a
            warning is logged once per API server and process. For test clusters only:
            anyone on the path can impersonate the server and read the credentials sent to it.
    """

    kubeconfig_path: str | os.PathLike[str] | None = None
    kubeconfig: Mapping[str, Any] | None = None
    context: str | None = None
    in_cluster: bool = False
    insecure_skip_tls_verify: bool = False

    def __post_init__(self) -> None:
        given = [
            self.kubeconfig_path is not None,
            self.kubeconfig is not None,
            self.in_cluster,
        ]
        if sum(given) > 1:
            offered = [n for n in map(_named, ("kubeconfig_path", "kubeconfig", "in_cluster")) if n]
            raise ConfigError(f"give at most one of {', '.join(offered)}")
        if self.in_cluster and self.context:
            raise ConfigError(
                f"{_named('context') or 'a context'} only applies to a kubeconfig, "
                f"not to {_named('in_cluster') or 'the in-cluster service account'}"
            )


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
        f"pass {_either('kubeconfig_path', 'kubeconfig', 'in_cluster')} or set $KUBECONFIG"
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


@dataclass(frozen=True)
class Connection:
    """What a client needs to connect: the official client's configuration (server, TLS,
    fixed credentials) and the credentials that are refreshed while it runs.

    Attributes:
        configuration: A ``kubernetes_asyncio.client.Configuration``.
        credentials: The ``Authorization`` header's source.
    """

    configuration: Any
    credentials: Credentials


async def load_connection(settings: ClientSettings | None = None) -> Connection:
    """Load the settings into a :class:`Connection` (runs an exec plugin, reads a token file).

    Raises:
        ConfigError: the official loader rejected the settings, the plugin failed, or the
            token file cannot be read (the file and field are named).
    """
    from kubernetes_asyncio import client, config

    from jobset_core.client._auth import TokenFile
    from jobset_core.client._credentials import Credentials

    settings = settings or ClientSettings()
    source = _resolve(settings)
    configuration = client.Configuration()
    try:
        if source == "in_cluster":
            load_incluster: Any = config.load_incluster_config  # untyped in kubernetes_asyncio
            load_incluster(
                client_configuration=configuration,
                try_refresh_token=False,  # refreshed by our credentials, below
                token_filename=str(_SA_DIR / "token"),
                cert_filename=str(_SA_DIR / "ca.crt"),
            )
            plan = TokenFile(str(_SA_DIR / "token"), "the in-cluster service account token")
            credentials = Credentials(plan)
            await credentials.start()
        else:
            credentials = await _load_kubeconfig(settings, source, configuration)
    except (config.ConfigException, OSError) as err:
        raise ConfigError(f"cannot load the {source.replace('_', ' ')}: {err}") from err
    if settings.insecure_skip_tls_verify:
        _skip_tls_verify(configuration)
    return Connection(configuration, credentials)


#: The API servers whose certificate is not verified, each warned about once per process.
_UNVERIFIED: set[str] = set()


def _skip_tls_verify(configuration: Any) -> None:
    """Turn the certificate check off on ``configuration`` (the official client builds its TLS
    context from ``verify_ssl``: no hostname check, ``CERT_NONE``); warn once per server."""
    configuration.verify_ssl = False
    host = str(configuration.host)
    if host not in _UNVERIFIED:
        _UNVERIFIED.add(host)
        log.warning(
            "TLS verification is off for the API server at %s (insecure_skip_tls_verify): its "
            "certificate is not checked, so anyone on the path can impersonate it",
            host,
        )


async def _load_kubeconfig(
    settings: ClientSettings, source: Source, configuration: Any
) -> Credentials:
    """Load a kubeconfig with the official loader, except the user's expiring credentials."""
    from kubernetes_asyncio.config.kube_config import (
        ConfigNode,
        KubeConfigLoader,
        KubeConfigMerger,
    )

    from jobset_core.client._auth import Fixed, plan_credentials, stripped_user
    from jobset_core.client._credentials import Credentials

    if source == "kubeconfig_dict":
        # A copy: the caller's mapping is never changed.
        merged = ConfigNode("kube-config", copy.deepcopy(dict(settings.kubeconfig or {})))
    else:
        paths = _path(settings) or os.environ.get("KUBECONFIG") or "~/.kube/config"
        merger = KubeConfigMerger(paths)
        if merger.config is None:
            raise OSError(f"no kubeconfig file found at {paths}")
        merged = merger.config
    entry, where = _user_entry(merged, settings.context)
    cluster = _cluster_section(merged, settings.context)
    user = entry.value.get("user") if entry is not None else None
    base_dir = os.path.dirname(os.path.abspath(entry.path)) if entry and entry.path else ""
    plan = plan_credentials(user if isinstance(user, Mapping) else None, base_dir, where=where)
    credentials = Credentials(plan, cluster=cluster)
    # A plugin that answers with a certificate stays in the loader's view: it installs it.
    refreshed = not isinstance(plan, Fixed) and await credentials.start() is None
    if refreshed and entry is not None and isinstance(user, Mapping):
        entry.value["user"] = stripped_user(user, plan)
    _inline_data_as_files(merged, settings.context)
    loader = KubeConfigLoader(
        config_dict=merged, config_base_path=None, active_context=settings.context
    )
    await loader.load_and_set(configuration)
    if isinstance(credentials.plan, Fixed):
        fixed = configuration.api_key.get("BearerToken")
        credentials = Credentials(credentials.plan, fixed_header=fixed)
    return credentials


def _context(merged: Any, context: str | None) -> Mapping[str, Any]:
    name = context or merged.value.get("current-context")
    found = merged["contexts"].get_with_name(name)
    value = found.value.get("context") if found is not None else None
    return value if isinstance(value, Mapping) else {}


def _user_entry(merged: Any, context: str | None) -> tuple[Any, str]:
    """The context's user entry (a ``ConfigNode`` that knows its file) and its field path."""
    name = _context(merged, context).get("user")
    if not name or not merged.value.get("users"):
        return None, "user"
    entry = merged["users"].get_with_name(name, safe=True)
    where = f"users[name={name}].user"
    if entry is not None and entry.path:
        where = f"{entry.path}: {where}"
    return entry, where


def _cluster_section(merged: Any, context: str | None) -> Mapping[str, Any] | None:
    name = _context(merged, context).get("cluster")
    if not name or not merged.value.get("clusters"):
        return None
    entry = merged["clusters"].get_with_name(name, safe=True)
    cluster = entry.value.get("cluster") if entry is not None else None
    return cluster if isinstance(cluster, Mapping) else None


# ------------------------------------------------------------------ inline certificates

#: ``(data field, file field)`` of the inline certificates and keys a kubeconfig may hold.
_CLUSTER_FILES = (("certificate-authority-data", "certificate-authority"),)
_USER_FILES = (("client-certificate-data", "client-certificate"), ("client-key-data", "client-key"))


def _inline_data_as_files(merged: Any, context: str | None) -> None:
    """Write the context's inline ``*-data`` certificates and keys to files of this process
    and point the (private copy of the) kubeconfig at them, as the TLS layer reads files.

    The official loader would write them itself, but it names its file to other threads
    before it has written it: two threads loading one kubeconfig at once could build a TLS
    context from an empty file (``NO_CERTIFICATE_OR_CRL_FOUND``). Here each file is complete
    before anyone sees its name (written aside, then renamed, under a lock), one per content,
    readable by this user only (in a folder of this user's, shared by its processes), and
    written again if a cleaner of the temporary folder removed it meanwhile."""
    user, _ = _user_entry(merged, context)
    sections: tuple[tuple[Any, tuple[tuple[str, str], ...]], ...] = (
        (_cluster_section(merged, context), _CLUSTER_FILES),
        (user.value.get("user") if user is not None else None, _USER_FILES),
    )
    for section, fields in sections:
        if not isinstance(section, dict):
            continue
        for data_field, file_field in fields:
            data = section.get(data_field)
            if not data or not isinstance(data, str | bytes):
                continue  # absent or empty: the loader's own rules apply
            try:
                content = base64.standard_b64decode(data)
            except (binascii.Error, ValueError):
                continue  # the loader reports it, as it always did
            section[file_field] = str(_content_files.path(content))
            del section[data_field]


class _ContentFiles:
    """Files holding given bytes (0600; one file for the same bytes), in one folder of this
    user (0700) that every process of it shares: a process that ends without running its exit
    handlers (a forked Airflow task runner) leaves no folder of its own behind, and the files
    are bounded by the distinct certificates used. A folder of that name that is not this
    user's own private directory is never used (a private one of this process instead)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._private: Path | None = None

    def _folder(self) -> Path:
        shared = Path(tempfile.gettempdir()) / f"jobset-kubeconfig-{os.getuid()}"
        with contextlib.suppress(FileExistsError):
            shared.mkdir(mode=0o700)
        found = os.lstat(shared)
        mine = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
        if mine and stat.S_IMODE(found.st_mode) & 0o077 == 0:
            return shared
        if self._private is None or not self._private.is_dir():
            self._private = Path(tempfile.mkdtemp(prefix="jobset-kubeconfig-"))
            atexit.register(shutil.rmtree, self._private, ignore_errors=True)
        return self._private

    def path(self, content: bytes) -> Path:
        with self._lock:
            folder = self._folder()
            path = folder / hashlib.sha256(content).hexdigest()[:32]
            if not path.is_file():
                fd, aside = tempfile.mkstemp(dir=folder)
                with os.fdopen(fd, "wb") as out:
                    out.write(content)
                os.replace(aside, path)
            return path


_content_files = _ContentFiles()
