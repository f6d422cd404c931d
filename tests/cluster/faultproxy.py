"""A small fault-injecting proxy on loopback in front of the devcluster's kube-apiserver.

Clients given its address (a kubeconfig whose ``server`` is :attr:`FaultProxy.url`) reach the
real API server through it; on command it:

* answers a **burst of 429s** with ``Retry-After`` (:meth:`FaultProxy.throttle`), with the
  ``Status`` body the API server's priority and fairness sends;
* **cuts the open watches** (:meth:`FaultProxy.cut_watches`): each gets the ``ERROR`` event
  with the ``410 Gone`` Status an API server sends when a watch's resourceVersion is too old,
  then the stream ends (``mode="gone"``); or the connections just drop (``mode="drop"``);
* **refuses to list or watch** some resources from now on (:meth:`FaultProxy.refuse_reads`):
  a ``404 NotFound`` Status, as a server that stopped serving them (a CRD deleted) answers;
* **holds the next request** of a verb on one object (:meth:`FaultProxy.hold_next`) before it
  reaches the API server, until the test releases it: the cluster changes in between, and
  the request gets the API server's answer to what is there then;
* keeps answering while the API server restarts the way a dead server does: the client's
  connection is closed without an answer.

It terminates TLS with the API server's own certificate (issued for 127.0.0.1 by the
devcluster CA) and opens its own TLS connections upstream, so clients must authenticate with
bearer tokens (a client certificate ends at the proxy). Everything stays on 127.0.0.1. The
proxy runs on an event loop in a thread of the process that owns it; :meth:`FaultProxy.stats`
counts what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ["FaultProxy", "Held", "ProxyStats"]

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
}


@dataclass
class ProxyStats:
    """What the proxy did (read at any time)."""

    requests: int = 0
    watches: int = 0
    throttled: int = 0
    cut_gone: int = 0
    cut_dropped: int = 0
    upstream_down: int = 0
    client_gone: int = 0
    answers_lost: int = 0
    refused: int = 0
    by_verb: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """A plain copy (for JSON)."""
        return {**vars(self), "by_verb": dict(sorted(self.by_verb.items()))}


@dataclass(eq=False)
class Held:
    """A request the proxy holds before passing it on (:meth:`FaultProxy.hold_next`).

    Attributes:
        reached: Set when the request arrived (and is being held).
        released: Set by :meth:`release`: the request goes on to the API server.
    """

    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        """Pass the request on (at once, if it has not arrived yet)."""
        self.released.set()


@dataclass(eq=False)
class _Stream:
    response: web.StreamResponse
    request: web.Request
    watch: bool
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    mode: str = "gone"


class FaultProxy:
    """The proxy. Use as a context manager (``with FaultProxy(state_dir) as proxy:``).

    Args:
        state_dir: The devcluster's state directory (``.devcluster``): the upstream address,
            the CA and the API server's certificate come from it.
        seed: Seeds the choice of requests a partial throttle refuses.
    """

    def __init__(self, state_dir: Path, *, seed: int = 0) -> None:
        state = json.loads((state_dir / "state.json").read_text())
        self.upstream = str(state["server"]).rstrip("/")
        self._state_dir = state_dir
        self._pki = state_dir / "pki"
        self.stats = ProxyStats()
        self._rand = random.Random(seed)
        self._throttle_until = 0.0
        self._throttle_fraction = 1.0
        self._retry_after = 1
        self._lose: dict[str, int] = {}  # verb -> answers still to lose
        self._refused: frozenset[str] = frozenset()  # resources whose lists/watches get 404
        self._held: dict[tuple[str, str, str], Held] = {}  # (verb, resource, name) -> hold
        self._streams: set[_Stream] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """Where clients connect (``https://127.0.0.1:<port>``)."""
        return f"https://127.0.0.1:{self.port}"

    def admin_kubeconfig(
        self, path: Path, *, user: str, namespace: str | None = None, ttl: float = 600
    ) -> Path:
        """A kubeconfig of a cluster admin (group ``system:masters``) that talks through this
        proxy, with a token minted at every call (the proxy ends TLS: no client certificate)."""
        from tests.cluster.localcluster import auth

        return auth.exec_kubeconfig(
            self._state_dir,
            path,
            user=user,
            groups=["system:masters"],
            ttl=ttl,
            server=self.url,
            namespace=namespace,
        )

    # ------------------------------------------------------------------ control (any thread)

    def throttle(self, seconds: float, *, retry_after: int = 1, fraction: float = 1.0) -> None:
        """Answer 429 (``Retry-After: retry_after``) to ``fraction`` of the requests that
        arrive in the next ``seconds`` (watches and log streams included)."""
        self._retry_after = retry_after
        self._throttle_fraction = fraction
        self._throttle_until = time.monotonic() + seconds

    def lose_answers(self, verb: str, count: int = 1) -> None:
        """Pass the next ``count`` requests of ``verb`` (``create``, ``delete``...) to the API
        server, then close the connection instead of answering: the request took effect, its
        answer was lost (what a client sees when the server or a load balancer dies between
        the two)."""
        self._lose[verb] = self._lose.get(verb, 0) + count

    def refuse_reads(self, *resources: str) -> None:
        """From now on, answer every list and watch of these resources (``jobsets``,
        ``configmaps``...) with 404 NotFound; gets, creates, patches and deletes still pass.
        No arguments: refuse nothing again."""
        self._refused = frozenset(resources)

    def hold_next(self, verb: str, resource: str, name: str) -> Held:
        """Hold the next request of ``verb`` (``get``, ``delete``...) on the object ``name`` of
        ``resource`` (``jobsets``, ``configmaps``...) before it reaches the API server, until
        :meth:`Held.release` (at most 120 s). Release it in a ``finally``."""
        held = self._held[(verb, resource, name)] = Held()
        return held

    def cut_watches(self, mode: str = "gone", *, logs: bool = True) -> int:
        """End every open watch (``gone``: a 410 ERROR event first; ``drop``: the connection
        just closes) and, unless ``logs`` is false, every followed log (closed). Returns how
        many were cut."""
        if mode not in ("gone", "drop"):
            raise ValueError(f"unknown cut mode {mode!r}")
        loop = self._loop
        if loop is None:
            return 0
        return asyncio.run_coroutine_threadsafe(self._cut(mode, logs=logs), loop).result(10)

    @contextlib.contextmanager
    def cutting(self, every: float, *, logs: bool = True) -> Iterator[FaultProxy]:
        """Cut every open watch with 410 Gone every ``every`` seconds while the block runs
        (from a thread of its own), and followed logs unless ``logs`` is false."""
        stop = threading.Event()

        def cutter() -> None:
            while not stop.wait(every):
                self.cut_watches("gone", logs=logs)

        thread = threading.Thread(target=cutter, name="faultproxy-cutter", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(10)

    def open_streams(self) -> int:
        """Watches and log streams open right now."""
        return len(self._streams)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FaultProxy:
        ready = threading.Event()
        problem: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start())
            except BaseException as error:  # reported to the caller below
                problem.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            loop.close()

        self._thread = threading.Thread(target=main, name="faultproxy", daemon=True)
        self._thread.start()
        ready.wait(30)
        if problem:
            raise problem[0]
        return self

    def __exit__(self, *exc: object) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
        self._loop = None

    async def _start(self) -> None:
        upstream_tls = ssl.create_default_context(cafile=str(self._pki / "ca.crt"))
        connector = aiohttp.TCPConnector(ssl=upstream_tls, limit=0)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(None)
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(self._pki / "apiserver.crt"), str(self._pki / "apiserver.key"))
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        server = site._server
        assert server is not None
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _stop(self) -> None:
        await self._cut("drop")
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _cut(self, mode: str, *, logs: bool = True) -> int:
        streams = [s for s in self._streams if logs or s.watch]
        for stream in streams:
            stream.mode = mode
            stream.cut.set()
        return len(streams)

    # ------------------------------------------------------------------ requests

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        watch = request.query.get("watch") in ("true", "1") or "/watch/" in request.path
        follow = request.path.endswith("/log") and request.query.get("follow") == "true"
        verb = _verb(request.method, request.path, watch)
        if request.query.get("dryRun") == "All":  # stores nothing: not a create to lose
            verb = f"dry-run {verb}"
        self.stats.by_verb[verb] = self.stats.by_verb.get(verb, 0) + 1
        if time.monotonic() < self._throttle_until and (
            self._rand.random() < self._throttle_fraction
        ):
            self.stats.throttled += 1
            return _too_many(self._retry_after)
        if verb in ("list", "watch") and _resource(request.path) in self._refused:
            self.stats.refused += 1
            return _not_found(_resource(request.path))
        body = await request.read()
        held = self._held.pop(
            (verb, _resource(request.path), request.path.rsplit("/", 1)[-1]), None
        )
        if held is not None:
            held.reached.set()
            await asyncio.get_running_loop().run_in_executor(None, held.released.wait, 120)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError):
            self.stats.upstream_down += 1
            _drop(request)  # as a dead server: no answer at all
            raise web.HTTPServiceUnavailable() from None
        if self._lose.get(verb, 0) > 0:
            self._lose[verb] -= 1
            await upstream.read()  # the server has done it; the client never hears
            upstream.release()
            self.stats.answers_lost += 1
            _drop(request)
            raise web.HTTPServiceUnavailable()
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        try:
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value)
            await response.prepare(request)
            if not (watch or follow) or upstream.status != 200:
                await _copy(upstream, response)
                await response.write_eof()
                return response
            if watch:
                self.stats.watches += 1
            await self._stream(request, upstream, response, watch=watch)
            return response
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            self.stats.client_gone += 1  # the client went away first (killed, timed out)
            return response
        finally:
            upstream.release()

    async def _stream(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        response: web.StreamResponse,
        *,
        watch: bool,
    ) -> None:
        stream = _Stream(response, request, watch)
        self._streams.add(stream)
        copier = asyncio.ensure_future(_copy(upstream, response))
        cut = asyncio.ensure_future(stream.cut.wait())
        try:
            await asyncio.wait({copier, cut}, return_when=asyncio.FIRST_COMPLETED)
            if copier.done():
                with contextlib.suppress(Exception):
                    copier.result()
                    await response.write_eof()
                return
            copier.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await copier
            if stream.mode == "gone" and watch:
                self.stats.cut_gone += 1
                with contextlib.suppress(Exception):
                    await response.write(_gone_event())
                    await response.write_eof()
            else:
                self.stats.cut_dropped += 1
                _drop(request)
        finally:
            cut.cancel()
            self._streams.discard(stream)


def _verb(method: str, path: str, watch: bool) -> str:
    """The Kubernetes verb of a request (roughly as the API server's request info does)."""
    if watch:
        return "watch"
    if method != "GET":
        return {"POST": "create", "PATCH": "patch", "PUT": "update"}.get(method, method.lower())
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return "list" if len(rest) == 1 else "get"


async def _copy(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)


def _drop(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.close()


def _resource(path: str) -> str:
    """The resource a request's path names (``/apis/g/v/namespaces/ns/jobsets`` → ``jobsets``;
    ``/api/v1/watch/namespaces/ns/configmaps`` → ``configmaps``)."""
    parts = [p for p in path.split("/") if p and p != "watch"]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:]
    return rest[0] if rest else ""


def _not_found(resource: str) -> web.Response:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"the server could not find the requested resource ({resource})",
        "reason": "NotFound",
        "code": 404,
    }
    return web.json_response(status, status=404)


def _too_many(retry_after: int) -> web.Response:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Too many requests, please try again later.",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": retry_after},
        "code": 429,
    }
    return web.Response(
        status=429,
        body=json.dumps(status).encode(),
        content_type="application/json",
        headers={"Retry-After": str(retry_after)},
    )


def _gone_event() -> bytes:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version (cut by the devcluster fault proxy)",
        "reason": "Expired",
        "code": 410,
    }
    return json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"


@contextlib.contextmanager
def running(state_dir: Path, *, seed: int = 0) -> Iterator[FaultProxy]:
    """``with running(state_dir) as proxy:`` (the same as ``with FaultProxy(...)``)."""
    with FaultProxy(state_dir, seed=seed) as proxy:
        yield proxy
