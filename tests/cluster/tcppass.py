"""A TCP pass-through on loopback in front of the devcluster's kube-apiserver.

Unlike :mod:`tests.cluster.faultproxy`, it does not end TLS: the client's TLS (and its HTTP/2,
negotiated in that handshake) goes to the API server itself, so the client meets the server's
own HTTP/2. On command it loses the connections the way networks do:

* :meth:`TcpPass.cut`: every connection is reset at once (a restart, a broken link);
* :meth:`TcpPass.freeze`: nothing is forwarded any more, in either direction, and the sockets
  stay open (a half-open connection: a peer that vanished without a FIN reads nothing, forever).

It runs on the test's own event loop; :attr:`TcpPass.accepted` counts the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from pathlib import Path

import yaml

__all__ = ["TcpPass"]


class TcpPass:
    """Forwards 127.0.0.1:<port> to the API server of ``kubeconfig``."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = yaml.safe_load(Path(kubeconfig).read_text())
        server = urllib.parse.urlsplit(self._kubeconfig["clusters"][0]["cluster"]["server"])
        self._upstream = (server.hostname or "127.0.0.1", server.port or 443)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.accepted = 0
        self.port = 0

    async def __aenter__(self) -> TcpPass:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._flowing.set()
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def kubeconfig(self, path: Path) -> Path:
        """The kubeconfig with its server here (same CA, same client certificate)."""
        config = dict(self._kubeconfig)
        cluster = dict(config["clusters"][0]["cluster"], server=f"https://127.0.0.1:{self.port}")
        config["clusters"] = [dict(config["clusters"][0], cluster=cluster)]
        path.write_text(yaml.safe_dump(config))
        return path

    def cut(self) -> None:
        """Reset every connection now."""
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.transport.abort()

    def freeze(self) -> None:
        """Stop forwarding; the connections stay open."""
        self._flowing.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()
