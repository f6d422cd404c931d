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
from jobset_core.client._h2 import _PLAIN_LIMIT, _READ_SIZE, _TLS, H2Pool
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


# ------------------------------------------------------------------ the HTTP/2 path's own TLS
#
# The HTTP/2 connections speak TLS through jobset_core.client._h2._TLS (OpenSSL over memory
# buffers), not asyncio's. A local endpoint with a certificate for 127.0.0.1 that offers
# ``h2`` stands in for the server's TLS: what is tested is the TLS layer (handshake verdicts,
# data both ways, the end, the socket paused while nobody reads), not HTTP/2.


class TlsServer:
    """A TLS endpoint on 127.0.0.1 offering ``h2``; each connection runs ``handler``."""

    def __init__(self, directory: Path) -> None:
        self.key, self.cert = directory / "h2.key", directory / "h2.crt"
        command = ["openssl", "req", "-x509", *EC_KEY, "-days", "1", "-subj", "/CN=127.0.0.1"]
        command += ["-addext", "subjectAltName=IP:127.0.0.1"]
        command += ["-keyout", str(self.key), "-out", str(self.cert)]
        subprocess.run(command, check=True, capture_output=True)
        self.port = 0
        self.handler: Any = None

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.cert))
        context.set_alpn_protocols(["h2", "http/1.1"])
        return context

    async def connect(self, hostname: str = "127.0.0.1") -> Any:
        """A :class:`_TLS` after its handshake."""
        loop = asyncio.get_running_loop()
        context = self.client_context()
        _, wire = await loop.create_connection(
            lambda: _TLS(context, hostname), "127.0.0.1", self.port
        )
        await asyncio.wait_for(wire.handshake(), 10)
        return wire

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.handler(reader, writer)
        except OSError:
            pass  # the client went
        finally:
            writer.close()


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[TlsServer]:
    found = TlsServer(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(found.cert, found.key)
    context.set_alpn_protocols(["h2"])
    server = await asyncio.start_server(found._handle, "127.0.0.1", 0, ssl=context)
    found.port = server.sockets[0].getsockname()[1]
    async with server:
        yield found


async def _read_all(wire: Any) -> bytes:
    chunks = []
    while chunk := await asyncio.wait_for(wire.read(_READ_SIZE), 10):
        assert len(chunk) <= _READ_SIZE
        chunks.append(chunk)
    return b"".join(chunks)


async def test_our_tls_carries_data_both_ways_and_sees_the_servers_close(
    tls_server: TlsServer,
) -> None:
    """What is written comes back whole (written in pieces far larger than a TLS record),
    ALPN is the server's choice, and the server's close (``close_notify``) reads as b""."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = int((await reader.readline()).decode())
        writer.write(await reader.readexactly(size))
        await writer.drain()

    tls_server.handler = echo
    wire = await tls_server.connect()
    assert wire.ssl_object.selected_alpn_protocol() == "h2"
    payload = bytes(range(256)) * 1000  # 256,000 bytes
    wire.write(f"{len(payload)}\n".encode())
    wire.write(payload)
    assert await _read_all(wire) == payload
    assert await wire.read(_READ_SIZE) == b""  # and stays at the end
    wire.close()


async def test_our_tls_pauses_the_socket_while_nobody_reads(tls_server: TlsServer) -> None:
    """4 MB sent to a reader that does not read: what is held decrypted stops growing past
    the bound and one read of the socket (TCP holds the rest back), then all of it comes."""
    payload = b"0123456789abcdef" * 2**18  # 4 MiB

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()

    tls_server.handler = send
    wire = await tls_server.connect()
    async with asyncio.timeout(10):
        while not wire._paused:
            await asyncio.sleep(0.01)
    held = wire._buffered
    await asyncio.sleep(0.3)
    assert wire._buffered == held <= _PLAIN_LIMIT + 256 * 1024  # asyncio reads 256 KiB at most
    assert await _read_all(wire) == payload
    assert not wire._paused and wire._buffered == 0 and wire._plain == []
    wire.close()


async def _open(tls_server: TlsServer, **options: Any) -> Any:
    context = options.pop("context", None) or tls_server.client_context()
    pool = H2Pool(f"https://127.0.0.1:{tls_server.port}", context, **options)
    return await pool._open()


async def test_our_tls_raises_the_certificate_errors_of_asyncios(tls_server: TlsServer) -> None:
    """An untrusted certificate or one for another name fails the handshake with
    ``ssl.SSLCertVerificationError``, as asyncio's TLS did (the client's errors name it)."""
    tls_server.handler = lambda reader, writer: reader.read()
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        await _open(tls_server, context=ssl.create_default_context())
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        await _open(tls_server, server_hostname="elsewhere.invalid")


async def test_a_server_that_hangs_up_in_the_handshake_is_a_reset_connection() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        pool = H2Pool(f"https://127.0.0.1:{port}", ssl.create_default_context())
        with pytest.raises(ConnectionResetError):
            await pool._open()


async def test_a_handshake_that_never_ends_is_bounded_by_the_connect_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read()  # reads the ClientHello, answers nothing
        finally:
            writer.close()  # Python 3.12's server waits for every connection it handled

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        pool = H2Pool(
            f"https://127.0.0.1:{port}", ssl.create_default_context(), connect_timeout=0.3
        )
        with pytest.raises(ConnectionError, match=r"no TLS connection to .* in 0\.3 s"):
            await pool._open()
