"""The pure half of authentication: which credentials a kubeconfig user stands for, when they
are due for a refresh, and what an exec plugin's answer means.

Nothing here performs I/O or reads a clock: :mod:`jobset_core.client._credentials` runs the
plugins, reads the files and passes the time in. A credential that expires is refreshed
before it does (:func:`refresh_due`) and once more when the API server refuses it
(:func:`after_refusal`); a refusal of a credential that cannot change ends in the error, so
the 401 handling never loops.

Which user fields count, in order (as ``kubernetes_asyncio`` and client-go read them):

* ``auth-provider`` (the removed ``gcp`` / ``oidc`` providers): left to the official loader;
* ``exec``: a credential plugin (client.authentication.k8s.io ExecCredential), run again
  before its token expires and after a 401;
* ``tokenFile``: a file somebody rotates (a projected service-account token, a sidecar),
  read again whenever it changes and after a 401 (client-go lets it win over ``token``);
* anything else (``token``, client certificates, basic auth): fixed for the client's life.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jobset_core.errors import ConfigError

__all__ = [
    "EXEC_API_VERSIONS",
    "MAX_REFRESH_MARGIN",
    "REFRESH_FRACTION",
    "CertificateAnswer",
    "Credential",
    "CredentialPlan",
    "ExecPlugin",
    "Fixed",
    "Refusal",
    "TokenFile",
    "after_refusal",
    "exec_info",
    "plan_credentials",
    "read_exec_credential",
    "refresh_due",
    "resolve_command",
    "stripped_user",
    "token_from_file",
]

#: The ExecCredential versions a plugin may speak (v1alpha1 is gone from client-go).
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: A credential is refreshed when this fraction of its lifetime is left...
REFRESH_FRACTION = 0.2
#: ...but never earlier than this many seconds before it expires.
MAX_REFRESH_MARGIN = 60.0
_CLUSTER_CONFIG_EXTENSION = "client.authentication.k8s.io/exec"


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` section.

    Attributes:
        command: The program (resolved against the kubeconfig's folder when it is a relative
            path with a separator, as client-go does).
        args: Its arguments.
        env: Extra environment variables, in order.
        api_version: The ExecCredential version it speaks.
        provide_cluster_info: Whether the plugin gets the cluster in ``KUBERNETES_EXEC_INFO``.
        where: The field path of the section, for messages.
    """

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]
    provide_cluster_info: bool = False
    where: str = "user.exec"

    @property
    def label(self) -> str:
        """How messages name the plugin (its program's file name, never its arguments)."""
        return f"exec plugin {os.path.basename(self.command)!r} ({self.where})"


@dataclass(frozen=True)
class TokenFile:
    """A token kept in a file that is rotated by somebody else.

    Attributes:
        path: The file.
        where: The field path of its setting, for messages.
    """

    path: str
    where: str = "user.tokenFile"

    @property
    def label(self) -> str:
        """How messages name the file."""
        return f"token file {self.path} ({self.where})"


@dataclass(frozen=True)
class Fixed:
    """Credentials that do not change while the client lives (a ``token``, a client
    certificate, basic auth, or none): what the official loader configured."""

    label: str = "the kubeconfig's fixed credentials"


CredentialPlan = ExecPlugin | TokenFile | Fixed


@dataclass(frozen=True)
class Credential:
    """One credential, as obtained.

    Attributes:
        header: The ``Authorization`` header value (``None``: the TLS client certificate, or
            nothing, authenticates).
        obtained_at: Epoch seconds when it was obtained.
        expires_at: Epoch seconds when it stops working, when known.
        generation: Counts the credentials one source has handed out (1 for the first), so
            a refusal can tell whether it concerns the current one.
    """

    header: str | None
    obtained_at: float
    expires_at: float | None = None
    generation: int = 1


Refusal = Literal["retry", "refresh", "give_up"]


def plan_credentials(
    user: Mapping[str, Any] | None, base_dir: str, *, where: str = "user"
) -> CredentialPlan:
    """Which refreshable credential a kubeconfig ``user`` section names, if any.

    Args:
        user: The ``user`` mapping of the context's user entry (``None``: no user).
        base_dir: The folder of the kubeconfig file that defined it (relative paths start
            there); ``""`` for a kubeconfig given as content.
        where: The field path of ``user``, for messages.

    Raises:
        ConfigError: a malformed ``exec`` section (its field path named).
    """
    if not user or "auth-provider" in user:
        return Fixed()
    if user.get("exec") is not None:
        return _exec_plugin(user["exec"], base_dir, f"{where}.exec")
    token_file = user.get("tokenFile")
    if token_file:
        if not isinstance(token_file, str):
            raise ConfigError(f"{where}.tokenFile: must be a path, not {type(token_file).__name__}")
        path = os.path.normpath(os.path.join(base_dir, os.path.expanduser(token_file)))
        return TokenFile(path, f"{where}.tokenFile")
    return Fixed()


def _exec_plugin(section: Any, base_dir: str, where: str) -> ExecPlugin:
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    command = section.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f"{where}.command: required (the credential plugin to run)")
    api_version = section.get("apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{where}.apiVersion: {api_version!r} is not one of {', '.join(EXEC_API_VERSIONS)}"
        )
    args = section.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}.args: must be a list of strings")
    env: list[tuple[str, str]] = []
    for index, item in enumerate(section.get("env") or []):
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise ConfigError(f"{where}.env[{index}]: needs a string name and value")
        env.append((item["name"], item["value"]))
    if section.get("interactiveMode") == "Always":
        raise ConfigError(
            f"{where}.interactiveMode: Always needs a terminal, and a JobSet waits without one; "
            "use a plugin mode that works non-interactively"
        )
    return ExecPlugin(
        command=resolve_command(command, base_dir),
        args=tuple(args),
        env=tuple(env),
        api_version=str(api_version),
        provide_cluster_info=bool(section.get("provideClusterInfo")),
        where=where,
    )


def resolve_command(command: str, base_dir: str) -> str:
    """A relative command with a path separator (``./bin/plugin``) starts in the kubeconfig's
    folder; a bare name (``aws``) is looked up on ``PATH``; an absolute path stays."""
    command = os.path.expanduser(command)
    if os.path.isabs(command) or os.sep not in command or not base_dir:
        return command
    return os.path.normpath(os.path.join(base_dir, command))


def stripped_user(user: Mapping[str, Any], plan: CredentialPlan) -> dict[str, Any]:
    """The user section the official loader should see: without what this client refreshes
    itself (so the loader neither runs the plugin nor reads the file a second time)."""
    if isinstance(plan, ExecPlugin):
        drop = {"exec", "token", "tokenFile"}
    elif isinstance(plan, TokenFile):
        drop = {"token", "tokenFile"}
    else:
        drop = set()
    return {key: value for key, value in user.items() if key not in drop}


def exec_info(
    plugin: ExecPlugin, cluster: Mapping[str, Any] | None, *, interactive: bool = False
) -> str:
    """The ``KUBERNETES_EXEC_INFO`` document handed to a plugin (JSON).

    With ``provideClusterInfo`` the plugin also gets the cluster: its server, TLS settings
    and the ``client.authentication.k8s.io/exec`` extension's ``config``.
    """
    spec: dict[str, Any] = {"interactive": interactive}
    if plugin.provide_cluster_info and cluster is not None:
        spec["cluster"] = _cluster_info(cluster)
    return json.dumps({"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec})


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    names = {
        "tls-server-name": "tls-server-name",
        "insecure-skip-tls-verify": "insecure-skip-tls-verify",
        "certificate-authority-data": "certificate-authority-data",
        "proxy-url": "proxy-url",
        "disable-compression": "disable-compression",
    }
    for source, target in names.items():
        if cluster.get(source) not in (None, ""):
            info[target] = cluster[source]
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == _CLUSTER_CONFIG_EXTENSION:
            info["config"] = extension.get("extension")
    return info


@dataclass(frozen=True)
class CertificateAnswer:
    """A plugin answered with a client certificate instead of a token: the official loader
    installs it in the TLS context when the client starts (it is not refreshed later)."""


def read_exec_credential(
    stdout: bytes, plugin: ExecPlugin, now: float
) -> Credential | CertificateAnswer:
    """Read a plugin's answer (an ``ExecCredential`` on its standard output).

    Raises:
        ConfigError: not an ExecCredential of the plugin's version, or neither a token nor
            a client certificate in it.
    """
    label = plugin.label
    try:
        document = json.loads(stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"{label}: its output is not JSON ({err})") from None
    if not isinstance(document, Mapping) or document.get("kind") != "ExecCredential":
        raise ConfigError(f"{label}: its output is not an ExecCredential")
    if document.get("apiVersion") != plugin.api_version:
        raise ConfigError(
            f"{label}: it answered apiVersion {document.get('apiVersion')!r}, "
            f"the kubeconfig asks for {plugin.api_version!r}"
        )
    status = document.get("status")
    if not isinstance(status, Mapping):
        raise ConfigError(f"{label}: its ExecCredential has no status")
    token = status.get("token")
    if not isinstance(token, str) or not token:
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            return CertificateAnswer()
        raise ConfigError(
            f"{label}: its ExecCredential status has neither a token nor a client certificate"
        )
    expires_at = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        expires_at = _parse_rfc3339(str(stamp), label)
    return Credential(f"Bearer {token}", obtained_at=now, expires_at=expires_at)


def _parse_rfc3339(text: str, label: str) -> float:
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{label}: expirationTimestamp {text!r} is not RFC 3339") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


def token_from_file(content: bytes, source: TokenFile, now: float) -> Credential:
    """The credential a token file holds (its whitespace trimmed). A JWT's ``exp`` claim,
    when readable, says when it expires (so it is read again before then at the latest).

    Raises:
        ConfigError: the file is empty.
    """
    token = content.decode("utf-8", "replace").strip()
    if not token:
        raise ConfigError(f"{source.label}: the file is empty")
    return Credential(f"Bearer {token}", obtained_at=now, expires_at=_jwt_expiry(token))


def _jwt_expiry(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def refresh_due(credential: Credential, now: float) -> bool:
    """Whether a credential should be replaced before the next request: when less than
    :data:`REFRESH_FRACTION` of its lifetime is left, at most :data:`MAX_REFRESH_MARGIN`
    seconds before it expires. One without a known expiry is kept until it is refused."""
    if credential.expires_at is None:
        return False
    lifetime = max(0.0, credential.expires_at - credential.obtained_at)
    margin = min(MAX_REFRESH_MARGIN, REFRESH_FRACTION * lifetime)
    return now >= credential.expires_at - margin


def after_refusal(used: Credential, current: Credential, *, retried: bool) -> Refusal:
    """What to do after the API server answered 401 to a request sent with ``used``.

    Args:
        used: The credential the refused request carried.
        current: The source's credential now (another request may have replaced it).
        retried: Whether this request was already sent again after a 401.

    Returns:
        ``retry`` with the current credential (it is newer than the refused one),
        ``refresh`` the source first (the refused one is still current), or ``give_up``: this
        request already had its second chance, so the 401 surfaces.
    """
    if retried:
        return "give_up"
    if current.generation != used.generation:
        return "retry"
    return "refresh"
