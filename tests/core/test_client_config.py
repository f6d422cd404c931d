"""Connection settings and the loader, and the client's behaviour when no server answers."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core.client import Client, ClientSettings, RetryPolicy
from jobset_core.client.config import (
    choose_source,
    context_namespace,
    default_namespace,
    load_connection,
)
from jobset_core.errors import ConfigError, Unreachable
from jobset_core.resources import CONFIG_MAP, JOB, JOBSET


def kubeconfig(server: str, *, context: str = "dev", token: str = "t0ken") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": "c", "user": "u", "namespace": "ns"}},
            {"name": "other", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": context,
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"kubeconfig_path": "a", "kubeconfig": {}}, "at most one", id="path-and-dict"),
        pytest.param(
            {"kubeconfig_path": "a", "in_cluster": True}, "at most one", id="path-and-in-cluster"
        ),
        pytest.param(
            {"in_cluster": True, "context": "x"}, "context only applies", id="context-in-cluster"
        ),
    ],
)
def test_contradictory_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClientSettings(**kwargs)


@pytest.mark.parametrize(
    ("settings", "environ", "default_exists", "source"),
    [
        pytest.param(ClientSettings(kubeconfig_path="k"), {}, False, "kubeconfig_file", id="path"),
        pytest.param(ClientSettings(kubeconfig={}), {}, True, "kubeconfig_dict", id="dict"),
        pytest.param(ClientSettings(in_cluster=True), {}, True, "in_cluster", id="in-cluster"),
        pytest.param(ClientSettings(), {}, True, "kubeconfig_file", id="default-kubeconfig"),
        pytest.param(
            ClientSettings(context="x"), {}, False, "kubeconfig_file", id="context-means-kubeconfig"
        ),
        pytest.param(
            ClientSettings(),
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
            False,
            "in_cluster",
            id="in-pod-fallback",
        ),
        pytest.param(
            ClientSettings(),
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
            True,
            "kubeconfig_file",
            id="kubeconfig-first",
        ),
    ],
)
def test_choose_source(
    settings: ClientSettings, environ: dict[str, str], default_exists: bool, source: str
) -> None:
    assert choose_source(settings, environ, default_exists) == source


def test_no_source_at_all_is_an_error() -> None:
    with pytest.raises(ConfigError, match="no kubeconfig found"):
        choose_source(ClientSettings(), {}, False)


async def test_loader_from_file_and_dict_with_context(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig("https://10.1.2.3:6443")))
    from_file = await load_connection(ClientSettings(kubeconfig_path=str(path)))
    from_dict = await load_connection(
        ClientSettings(kubeconfig=kubeconfig("https://10.9.9.9:6443"), context="other")
    )
    assert from_file.configuration.host == "https://10.1.2.3:6443"
    assert (await from_file.credentials.current()).header == "Bearer t0ken"
    assert from_dict.configuration.host == "https://10.9.9.9:6443"


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(
            ClientSettings(kubeconfig={"apiVersion": "v1", "kind": "Config"}), id="empty-dict"
        ),
        pytest.param(
            ClientSettings(kubeconfig=kubeconfig("https://x"), context="missing"),
            id="unknown-context",
        ),
    ],
)
async def test_loader_errors_are_config_errors(settings: ClientSettings) -> None:
    with pytest.raises(ConfigError, match="cannot load the kubeconfig dict"):
        await load_connection(settings)


async def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load the kubeconfig file"):
        await load_connection(ClientSettings(kubeconfig_path=tmp_path / "absent"))


# ------------------------------------------------------------------ nobody answering

NO_SERVER_RETRY = RetryPolicy(max_attempts=3, base_delay=0.25, jitter=0.0)


async def test_reads_are_retried_then_unreachable() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    settings = ClientSettings(kubeconfig=kubeconfig(f"https://127.0.0.1:{closed_port()}"))
    async with Client(settings, retry=NO_SERVER_RETRY, sleep=sleep) as client:
        with pytest.raises(Unreachable, match=r"during get jobsets\.jobset\.x-k8s\.io") as info:
            await client.get(JOBSET, "x", namespace="ns")
        assert info.value.__cause__ is not None
        assert slept == [0.25, 0.5]
        assert client.stats.requests == {"get": 3} and client.stats.retries == 2
        slept.clear()
        with pytest.raises(Unreachable, match="during create"):
            await client.create(CONFIG_MAP, {"metadata": {"generateName": "x-"}}, namespace="ns")
        assert slept == []  # a repeat may make a second object: never retried
        with pytest.raises(Unreachable, match="during patch"):
            await client.patch(CONFIG_MAP, "x", {"data": {"a": "1"}}, namespace="ns")
        assert slept == []  # a lost answer to a patch may hide a success: never retried
        with pytest.raises(Unreachable, match="during create"):
            await client.create(CONFIG_MAP, {"metadata": {"name": "x"}}, namespace="ns")
        assert slept == [0.25, 0.5]  # a repeat of a fixed name meets the first (409)
        slept.clear()
        with pytest.raises(Unreachable, match="during delete"):
            await client.delete(CONFIG_MAP, "x", namespace="ns")
        assert slept == [0.25, 0.5]  # a second delete finds it gone: retried like a read
        with pytest.raises(Unreachable, match="during watch"):
            await anext(aiter(client.watch(JOB, namespace="ns")))


def test_there_is_one_client_and_it_is_async() -> None:
    """The sync twin is gone: synchronous callers run the core through the blocking façade."""
    import inspect

    import jobset_core.client as package

    assert not hasattr(package, "JobSetClient") and not hasattr(package, "AsyncJobSetClient")
    verbs = ("create", "get", "list", "patch", "delete", "read_pod_log", "jobset_api_served")
    assert all(inspect.iscoroutinefunction(getattr(Client, verb)) for verb in verbs)
    assert inspect.isasyncgenfunction(Client.stream_pod_log)
    assert inspect.isasyncgenfunction(Client._watch)


@pytest.mark.parametrize(
    ("context", "namespace"),
    [
        pytest.param(None, "ns", id="current-context"),
        pytest.param("dev", "ns", id="named"),
        pytest.param("other", None, id="context-without-namespace"),
        pytest.param("missing", None, id="unknown-context"),
    ],
)
def test_context_namespace(context: str | None, namespace: str | None) -> None:
    assert context_namespace(kubeconfig("https://x"), context) == namespace


def test_default_namespace_from_file_dict_or_default(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig("https://x")))
    assert default_namespace(ClientSettings(kubeconfig_path=path)) == "ns"
    assert default_namespace(ClientSettings(kubeconfig_path=path, context="other")) == "default"
    assert default_namespace(ClientSettings(kubeconfig=kubeconfig("https://x"))) == "ns"


def test_inline_certificates_are_whole_files_before_any_thread_sees_them() -> None:
    # Threads that load one kubeconfig with inline certificates at once each get whole files:
    # the official loader's own files (named to other threads before they are written, which
    # once gave a CI run's threads an empty CA file) are never made.
    import asyncio
    import base64
    import os
    import stat
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes_asyncio.config import kube_config

    ca, cert, key = (f"-----{what}-----\n".encode() + os.urandom(600) for what in "ABC")
    config = kubeconfig("https://10.1.2.3:6443")
    config["clusters"][0]["cluster"] = {
        "server": "https://10.1.2.3:6443",
        "certificate-authority-data": base64.b64encode(ca).decode(),
    }
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    given = yaml.safe_dump(config)
    made_before = dict(kube_config._temp_files)

    def load(_: int) -> Any:
        return asyncio.run(load_connection(ClientSettings(kubeconfig=config)))

    with ThreadPoolExecutor(8) as pool:
        connections = list(pool.map(load, range(16)))
    for connection in connections:
        configuration = connection.configuration
        assert Path(configuration.ssl_ca_cert).read_bytes() == ca
        assert Path(configuration.cert_file).read_bytes() == cert
        assert Path(configuration.key_file).read_bytes() == key
        assert stat.S_IMODE(os.stat(configuration.key_file).st_mode) == 0o600
    assert len({c.configuration.ssl_ca_cert for c in connections}) == 1  # one per content
    assert kube_config._temp_files == made_before
    assert yaml.safe_dump(config) == given  # the caller's mapping is not changed
    # A cleaner of the temporary folder removed them: the next load writes them again.
    for made in ("ssl_ca_cert", "key_file"):  # (not the folder: other tests' processes use it)
        Path(getattr(connections[0].configuration, made)).unlink()
    again = load(0).configuration
    assert Path(again.ssl_ca_cert).read_bytes() == ca
    assert Path(again.key_file).read_bytes() == key


def test_a_shared_folder_others_may_read_is_never_used() -> None:
    # The files live in one 0700 folder of this user, shared by its processes (none left per
    # process); a folder of that name others may enter is passed over for a private one.
    import asyncio
    import base64
    import os
    import tempfile

    shared = Path(tempfile.gettempdir()) / f"jobset-kubeconfig-{os.getuid()}"
    config = kubeconfig("https://10.1.2.3:6443")
    config["clusters"][0]["cluster"] = {
        "server": "https://10.1.2.3:6443",
        "certificate-authority-data": base64.b64encode(b"-----CA-----\n").decode(),
    }

    def load() -> Any:
        return asyncio.run(load_connection(ClientSettings(kubeconfig=config)))

    assert Path(load().configuration.ssl_ca_cert).parent == shared
    shared.chmod(0o755)
    try:
        elsewhere = Path(load().configuration.ssl_ca_cert)
        assert elsewhere.parent != shared and elsewhere.read_bytes() == b"-----CA-----\n"
    finally:
        shared.chmod(0o700)
