"""``ClientSettings.insecure_skip_tls_verify``: the client really skips the certificate check.

A local TLS endpoint with a self-signed certificate for another name stands in for an API
server nobody can verify. It answers nothing: it records the request line the client sent
after the handshake, then hangs up. So no Kubernetes API is imitated; what is tested is only
whether the client's TLS handshake accepts the certificate: with verification on (the
default) the handshake fails and nothing reaches the endpoint; with it off, the request does.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings, RetryPolicy
from jobset_core.client.config import load_connection
from jobset_core.errors import Unreachable
from jobset_core.observe import settings_key
from jobset_core.resources import CONFIG_MAP

ONE_ATTEMPT = RetryPolicy(max_attempts=1)
EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def kubeconfig(server: str, **cluster: Any) -> dict[str, Any]:
    """A kubeconfig whose cluster is verified unless ``cluster`` says otherwise."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "dev",
    }


class Endpoint:
    """A TLS endpoint that records each request line it receives, then closes."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            if line:
                self.requests.append(line.decode("latin-1").strip())
        except (TimeoutError, OSError):
            pass  # a handshake the client gave up
        finally:
            writer.close()


@pytest.fixture
async def endpoint(tmp_path: Path) -> AsyncIterator[Endpoint]:
    key, cert = tmp_path / "server.key", tmp_path / "server.crt"
    command = ["openssl", "req", "-x509", *EC_KEY, "-days", "1", "-subj", "/CN=elsewhere.invalid"]
    command += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(command, check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    found = Endpoint()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0, ssl=context)
    found.url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield found


async def _get(settings: ClientSettings) -> Unreachable:
    async with Client(settings, retry=ONE_ATTEMPT) as client:
        with pytest.raises(Unreachable) as lost:
            await client.get(CONFIG_MAP, "x", namespace="ns")
    return lost.value


async def test_the_certificate_is_verified_by_default(endpoint: Endpoint) -> None:
    lost = await _get(ClientSettings(kubeconfig=kubeconfig(endpoint.url)))
    assert "certificate verify failed" in str(lost).lower()
    assert endpoint.requests == []


async def test_insecure_skip_tls_verify_skips_it(endpoint: Endpoint) -> None:
    settings = ClientSettings(kubeconfig=kubeconfig(endpoint.url), insecure_skip_tls_verify=True)
    lost = await _get(settings)  # the endpoint hangs up instead of answering
    assert "certificate" not in str(lost).lower()
    assert endpoint.requests  # (aiohttp may send it once more after the hang-up)
    assert set(endpoint.requests) == {"GET /api/v1/namespaces/ns/configmaps/x HTTP/1.1"}


async def test_the_kubeconfigs_own_insecure_flag_still_works(endpoint: Endpoint) -> None:
    config = kubeconfig(endpoint.url, **{"insecure-skip-tls-verify": True})
    await _get(ClientSettings(kubeconfig=config))
    assert endpoint.requests


async def test_the_setting_overrides_the_kubeconfig_and_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = "https://10.20.30.40:6443"  # never contacted: only the configuration is built
    verified = await load_connection(ClientSettings(kubeconfig=kubeconfig(server)))
    assert verified.configuration.verify_ssl is True
    settings = ClientSettings(kubeconfig=kubeconfig(server), insecure_skip_tls_verify=True)
    with caplog.at_level(logging.WARNING, logger="jobset_core.client.config"):
        for _ in range(2):
            loaded = await load_connection(settings)
            assert loaded.configuration.verify_ssl is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"TLS verification is off for the API server at {server}" in warnings[0]


def test_settings_that_differ_in_verification_share_no_observer() -> None:
    config = kubeconfig("https://x")
    assert settings_key(ClientSettings(kubeconfig=config)) != settings_key(
        ClientSettings(kubeconfig=config, insecure_skip_tls_verify=True)
    )
