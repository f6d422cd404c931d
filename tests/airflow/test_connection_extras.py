"""Every extra of the ``kubernetes`` connection type is honoured, deliberately ignored, or
refused with the connection and the key named (``airflow_provider_jobset.hooks``' table), in
both spellings; the installed cncf provider declares no extra the hook does not know."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from airflow_provider_jobset.hooks import (
    KNOWN_EXTRAS,
    ConnectionConfig,
    JobSetHook,
    config_from_extras,
)

pytestmark = pytest.mark.airflow

_PREFIX = "extra__kubernetes__"
_KUBECONFIG = {"apiVersion": "v1", "kind": "Config"}

#: (extra, a value, what the hook reads from it): the honoured extras.
HONOURED: list[tuple[str, Any, ConnectionConfig]] = [
    ("in_cluster", True, ConnectionConfig(in_cluster=True)),
    ("kube_config_path", "/k", ConnectionConfig(kubeconfig_path="/k")),
    ("kube_config", json.dumps(_KUBECONFIG), ConnectionConfig(kubeconfig=_KUBECONFIG)),
    ("cluster_context", "c", ConnectionConfig(context="c")),
    ("namespace", "ml", ConnectionConfig(namespace="ml")),
    ("disable_verify_ssl", True, ConnectionConfig(insecure_skip_tls_verify=True)),
    ("disable_verify_ssl", "true", ConnectionConfig(insecure_skip_tls_verify=True)),
    ("disable_verify_ssl", False, ConnectionConfig()),
    ("disable_verify_ssl", "false", ConnectionConfig()),
]

#: (extra, a value): accepted and ignored, the config stays the empty one.
IGNORED: list[tuple[str, Any]] = [
    ("disable_tcp_keepalive", True),
    ("disable_tcp_keepalive", "false"),
    ("xcom_sidecar_container_image", "alpine:3.20"),
    ("xcom_sidecar_container_resources", '{"requests": {"cpu": "1m"}}'),
    ("xcom_sidecar_container_security_context", '{"runAsNonRoot": true}'),
]

#: Keys that are no extra of the connection type (misspelt, another hook's, a bad prefix).
REFUSED = [
    "kube_confg_path",
    "verify_ssl",
    "disable_ssl",
    "extra__kubernetes__contexts",
    "extra__cncf_kubernetes__namespace",
    "host",
]


def _ids(rows: list[Any]) -> list[str]:
    return [f"{row[0]}={row[1]!r}" for row in rows]


@pytest.mark.parametrize("prefix", ["", _PREFIX], ids=["plain", "legacy-prefix"])
@pytest.mark.parametrize(("extra", "value", "expected"), HONOURED, ids=_ids(HONOURED))
def test_honoured_extra(prefix: str, extra: str, value: Any, expected: ConnectionConfig) -> None:
    assert config_from_extras({prefix + extra: value}) == expected


@pytest.mark.parametrize("prefix", ["", _PREFIX], ids=["plain", "legacy-prefix"])
@pytest.mark.parametrize(("extra", "value"), IGNORED, ids=_ids(IGNORED))
def test_ignored_extra(prefix: str, extra: str, value: Any) -> None:
    assert config_from_extras({prefix + extra: value}, conn_id="k8s") == ConnectionConfig()


@pytest.mark.parametrize("key", REFUSED)
def test_unknown_extra_is_refused_naming_the_connection_and_the_key(key: str) -> None:
    with pytest.raises(ValueError, match="unknown extra") as refused:
        config_from_extras({"namespace": "ml", key: "x"}, conn_id="k8s")
    message = str(refused.value)
    assert "'k8s'" in message
    assert repr(key) in message
    assert "kube_config_path" in message  # the extras it could have meant are listed


def test_every_unknown_extra_is_named_at_once() -> None:
    with pytest.raises(ValueError, match="unknown extras 'a', 'b'"):
        config_from_extras({"b": 1, "namespace": "ml", "a": None}, conn_id="k8s")


def test_an_unknown_extra_is_refused_even_empty_and_without_a_connection_id() -> None:
    with pytest.raises(ValueError, match=r"^the kubernetes connection has the unknown extra 'x'"):
        config_from_extras({"x": ""})


@pytest.mark.parametrize("extra", ["in_cluster", "disable_verify_ssl", "disable_tcp_keepalive"])
def test_a_boolean_extra_that_is_no_boolean_is_refused(extra: str) -> None:
    with pytest.raises(ValueError, match=f"connection 'k8s' sets {extra} to 'maybe'"):
        config_from_extras({extra: "maybe"}, conn_id="k8s")


def test_malformed_kube_config_names_the_connection() -> None:
    with pytest.raises(ValueError, match="connection 'k8s' sets kube_config to text"):
        config_from_extras({"kube_config": "{not: [json"}, conn_id="k8s")
    with pytest.raises(ValueError, match="connection 'k8s' sets kube_config to something"):
        config_from_extras({"kube_config": "[1, 2]"}, conn_id="k8s")


def test_a_connection_shared_with_the_pod_operator_works() -> None:
    """Every field of the cncf connection form filled in, as the UI saves it."""
    extras = {
        "kube_config_path": "/k",
        "cluster_context": "c",
        "namespace": "ml",
        "in_cluster": False,
        "kube_config": None,
        "disable_verify_ssl": True,
        "disable_tcp_keepalive": True,
        "xcom_sidecar_container_image": "alpine:3.20",
        "xcom_sidecar_container_resources": '{"limits": {"cpu": "1"}}',
        "xcom_sidecar_container_security_context": '{"runAsNonRoot": true}',
    }
    expected = ConnectionConfig(
        kubeconfig_path="/k", context="c", namespace="ml", insecure_skip_tls_verify=True
    )
    assert config_from_extras(extras, conn_id="shared") == expected


def test_disable_verify_ssl_reaches_the_core_settings() -> None:
    settings = config_from_extras({"disable_verify_ssl": True}).client_settings()
    assert settings.insecure_skip_tls_verify is True
    assert config_from_extras({}).client_settings().insecure_skip_tls_verify is False


def test_the_hook_knows_every_extra_of_the_installed_cncf_provider() -> None:
    """A cncf release that adds an extra fails here, not in a user's task."""
    from airflow.providers.cncf.kubernetes.get_provider_info import get_provider_info

    (kubernetes,) = [
        entry
        for entry in get_provider_info()["connection-types"]
        if entry["connection-type"] == "kubernetes"
    ]
    fields = kubernetes.get("conn-fields") or _form_fields()
    assert fields, "the cncf provider declares no connection fields"
    assert set(fields) <= KNOWN_EXTRAS


def _form_fields() -> set[str]:
    """The extras an older cncf release (10.7 with Airflow 3.0) declares only as its form's
    widgets, built with Flask-AppBuilder (not installed with Airflow 3): the keys of the
    dict ``get_connection_form_widgets`` returns, read from its source."""
    import ast
    import inspect
    import textwrap

    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    source = textwrap.dedent(inspect.getsource(KubernetesHook.get_connection_form_widgets))
    returned = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict)
    ]
    return {
        str(key.value).removeprefix("extra__kubernetes__")
        for found in returned
        for key in found.keys
        if isinstance(key, ast.Constant)
    }


@pytest.fixture
def conn_k8s_extra(monkeypatch: pytest.MonkeyPatch) -> str:
    """A connection ``k8s_extra`` (an environment variable) with a misspelt extra."""
    conn = {"conn_type": "kubernetes", "extra": {"kube_confg_path": "/k", "namespace": "ml"}}
    monkeypatch.setenv("AIRFLOW_CONN_K8S_EXTRA", json.dumps(conn))
    return "k8s_extra"


def test_the_hook_names_its_connection(conn_k8s_extra: str) -> None:
    with pytest.raises(ValueError, match="connection 'k8s_extra' has the unknown extra"):
        JobSetHook(conn_k8s_extra).get_config()


async def test_the_hook_names_its_connection_in_the_triggerer(conn_k8s_extra: str) -> None:
    with pytest.raises(ValueError, match="connection 'k8s_extra' has the unknown extra"):
        await JobSetHook(conn_k8s_extra).aget_config()


def _conn(monkeypatch: pytest.MonkeyPatch, namespace: str) -> None:
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": "/k", "namespace": namespace}}
    monkeypatch.setenv("AIRFLOW_CONN_K8S_SHARED", json.dumps(conn))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the reads of a connection that reach Airflow (its secrets backends)."""
    import airflow.providers.common.compat.connection as compat

    real = compat.get_async_connection
    seen: list[str] = []

    async def counted(conn_id: str) -> Any:
        seen.append(conn_id)
        await asyncio.sleep(0.05)  # a round trip to the supervisor
        return await real(conn_id)

    monkeypatch.setattr(compat, "get_async_connection", counted)
    return seen


async def test_overlapping_reads_of_a_connection_share_one(
    monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    """A triggerer starting many triggers at once reads their connection once; a read after
    it ended reads again (a changed connection is seen: nothing is cached)."""
    _conn(monkeypatch, "first")
    configs = await asyncio.gather(*(JobSetHook("k8s_shared").aget_config() for _ in range(50)))
    assert reads == ["k8s_shared"]
    assert {c.namespace for c in configs} == {"first"}
    _conn(monkeypatch, "second")
    assert (await JobSetHook("k8s_shared").aget_config()).namespace == "second"
    assert reads == ["k8s_shared"] * 2


async def test_a_shared_read_fails_for_every_reader_and_outlives_a_cancelled_one(
    monkeypatch: pytest.MonkeyPatch, reads: list[str], conn_k8s_extra: str
) -> None:
    readers = [asyncio.ensure_future(JobSetHook(conn_k8s_extra).aget_config()) for _ in range(3)]
    await asyncio.sleep(0)
    readers[0].cancel()
    done = await asyncio.gather(*readers, return_exceptions=True)
    assert isinstance(done[0], asyncio.CancelledError)
    assert all(isinstance(e, ValueError) and "kube_confg_path" in str(e) for e in done[1:])
    assert reads == [conn_k8s_extra]
    missing = [JobSetHook("no_such_connection").aget_config() for _ in range(2)]
    failed = await asyncio.gather(*missing, return_exceptions=True)
    assert all("no_such_connection" in str(e) for e in failed), failed
