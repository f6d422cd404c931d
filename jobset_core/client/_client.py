"""The one API client: a thin async shell over the official ``kubernetes_asyncio`` client.

Every method builds a :class:`~jobset_core.client._core.Request` in the pure core, sends it
through ``kubernetes_asyncio.client.ApiClient.call_api`` (TLS and fixed credentials are the
official client's), maps failures to :mod:`jobset_core.errors`, and retries as
:func:`~jobset_core.client._core.retry_delay` decides. Each attempt carries the
``Authorization`` header of :class:`~jobset_core.client._credentials.Credentials`, refreshed
before it expires; a 401 refreshes it and sends the request once more, never in a loop.

Every request and watch goes over HTTP/2 when the API server speaks it (:mod:`._h2`): a few
TLS connections for a triggerer's hundreds of watches, as client-go. Otherwise (an HTTP
proxy, a server that offers only HTTP/1.1) two aiohttp pools: short requests share one
bounded pool; watches and followed logs, which hold a connection for minutes, get a pool of
their own without a limit, so a thousand open watches never starve a GET. What the client
sends is counted in :attr:`Client.stats` (requests by verb, retries, TCP connections opened,
watches open, the protocol), for logs and benchmarks.

There is no synchronous twin: synchronous callers run the core's coroutines through
:func:`jobset_core.blocking.run`.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import itertools
import logging
import random
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from jobset_core.client import _core, _h2
from jobset_core.client._auth import Credential
from jobset_core.client._core import (
    DEFAULT_RETRY,
    POD,
    ObjectList,
    PatchType,
    Propagation,
    Request,
    RetryPolicy,
    Selector,
)
from jobset_core.client._credentials import Credentials
from jobset_core.client._memory import Trimmer
from jobset_core.client._watch import LineBuffer, WatchEvent, WatchState
from jobset_core.client.config import ClientSettings, load_connection
from jobset_core.errors import (
    ApiError,
    Forbidden,
    JobSetError,
    NotFound,
    ServerError,
    Unauthorized,
)
from jobset_core.resources import NODE, ApiResource

__all__ = ["Client", "ClientStats"]

T = TypeVar("T")
Obj = dict[str, Any]
Body = Mapping[str, Any] | Any

log = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
#: An HTTP/2 connection silent this long is pinged; unanswered this long after, it is lost.
_PING_AFTER = 30.0
_PING_TIMEOUT = 15.0
#: For this long after the API server could not be reached, a 403 may be its restart's.
_RESTART_GRACE = 60.0
_CONNECT_TIMEOUT = 10.0
#: A watch whose socket stays silent this much longer than the watch's own timeout is dead.
_WATCH_GRACE = 30.0
#: The API server sends a bookmark on a quiet watch about once a minute: a watch silent for
#: longer than this lost its connection (a half-open TCP socket reads nothing, forever).
_WATCH_SILENCE = 150.0
_REQUEST_POOL = 100
_READ_BUFFER = 2**21  # watch events of large objects exceed aiohttp's default buffer


@dataclass
class ClientStats:
    """What a client sent, counted as it happens (read it at any time).

    Attributes:
        requests: Requests sent, by Kubernetes verb (``get``, ``list``, ``watch``, ``create``,
            ``patch``, ``delete``; pod logs count as ``get``), retries included.
        retries: Requests sent again after a retryable failure (a 401 included).
        connections: TCP (TLS) connections opened, both pools.
        watches_open: Watches (and followed logs) streaming right now.
        unauthorized: 401 answers (each followed by at most one more attempt).
        credential_refreshes: Credentials obtained after the first (plugin runs, token
            files read again).
        protocol: ``"h2"`` or ``"http/1.1"`` once the first request chose (``""`` before).
        trims: Times the memory big answers took was handed back to the system, and the
            seconds that took in all (see :mod:`jobset_core.client._memory`).
    """

    requests: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    connections: int = 0
    watches_open: int = 0
    unauthorized: int = 0
    credential_refreshes: int = 0
    protocol: str = ""
    trims: int = 0
    trim_seconds: float = 0.0

    def trimmed(self, seconds: float) -> None:
        """Count a trim."""
        self.trims += 1
        self.trim_seconds += seconds

    @property
    def total(self) -> int:
        """Every request sent."""
        return sum(self.requests.values())

    def snapshot(self) -> dict[str, Any]:
        """A plain copy (for JSON)."""
        return {
            "requests": dict(sorted(self.requests.items())),
            "total": self.total,
            "retries": self.retries,
            "connections": self.connections,
            "watches_open": self.watches_open,
            "unauthorized": self.unauthorized,
            "credential_refreshes": self.credential_refreshes,
            "protocol": self.protocol,
            "trims": self.trims,
            "trim_seconds": round(self.trim_seconds, 4),
        }


class Client:
    """Asynchronous client for JobSets and the objects around them.

    Args:
        settings: Where to connect (see :class:`~jobset_core.client.ClientSettings`).
        retry: How 429, 5xx and lost answers to reads are retried.
        request_timeout: Read timeout of a non-streaming request, in seconds.
        sleep: Waits between attempts (injectable for tests).
        rand: Source of jitter in ``[0, 1)``.
        ping_after: Seconds of silence after which an HTTP/2 connection is pinged.
        ping_timeout: Seconds a pinged connection has to answer before it counts as lost
            (every stream on it fails and is retried or reopened on a fresh one).

    Use it as ``async with Client(settings) as client:`` (or call :meth:`aclose`).
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        request_timeout: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        ping_after: float = _PING_AFTER,
        ping_timeout: float = _PING_TIMEOUT,
    ) -> None:
        self.settings = settings or ClientSettings()
        self.stats = ClientStats()
        self._trimmer = Trimmer(self.stats.trimmed)
        self._retry = retry
        self._timeout = request_timeout
        self._sleep = sleep
        self._rand = rand
        self._loading: asyncio.Lock | None = None
        self._pools: tuple[Any, Any] | None = None
        self._h2: _h2.H2Pool | None = None
        self._ping = (ping_after, ping_timeout)
        self._credentials: Credentials | None = None
        #: The calls (verb, resource, namespace) the API server allowed this client.
        self._allowed: set[tuple[str, str, str]] = set()
        #: When the API server last could not be reached (``time.monotonic()``).
        self._unreachable_at: float | None = None

    async def aclose(self) -> None:
        """Close the connections: every pool, even when a cancellation comes meanwhile (it is
        raised once all are closed)."""
        self._trimmer.cancel()
        pools, self._pools = self._pools, None
        h2_pool, self._h2 = self._h2, None
        closers = [api.close for api in pools or ()]
        if h2_pool is not None:
            closers.append(h2_pool.aclose)
        cancelled: asyncio.CancelledError | None = None
        for close in closers:
            try:
                await close()
            except asyncio.CancelledError as error:
                cancelled = error
        if cancelled is not None:
            raise cancelled

    async def __aenter__(self) -> Client:
        await self._api(streaming=False)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ verbs

    async def create(
        self, resource: ApiResource, body: Body, *, namespace: str, dry_run: bool = False
    ) -> Obj:
        """Create an object (``fieldValidation=Strict``; ``dry_run``: admission only)."""
        request = _core.create(resource, namespace, body, dry_run=dry_run)
        return _core.as_object(await self._send(request))

    async def get(self, resource: ApiResource, name: str, *, namespace: str) -> Obj:
        """Read one object."""
        return _core.as_object(await self._send(_core.get(resource, namespace, name)))

    async def list(
        self,
        resource: ApiResource,
        *,
        namespace: str | None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        optional: bool = False,
        each: Callable[[Obj], Obj | None] | None = None,
    ) -> ObjectList[Obj]:
        """List objects (``namespace=None``: across all namespaces); with ``limit``, one page
        (its ``continue_`` asks for the next). ``optional``: a 403 is expected and raised at
        once (see :attr:`Request.optional`). ``each``: what is kept of each object, made
        as it is decoded, before the next one is (``None``: nothing of it), so a page's
        whole objects are never in memory at once."""
        request = _core.list_(
            resource,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_=continue_,
            optional=optional,
        )
        return _core.decode_list(await self._received(request), resource, each or _same)

    async def patch(
        self,
        resource: ApiResource,
        name: str,
        body: Body,
        *,
        namespace: str,
        patch_type: PatchType = "merge",
    ) -> Obj:
        """Patch an object (merge patch by default; a merge patch carrying
        ``metadata.resourceVersion`` is a compare-and-swap: 409 when the object moved on)."""
        request = _core.patch(resource, namespace, name, body, patch_type=patch_type)
        return _core.as_object(await self._send(request))

    async def delete(
        self,
        resource: ApiResource,
        name: str,
        *,
        namespace: str,
        propagation: Propagation = "Foreground",
        uid: str | None = None,
    ) -> Obj | None:
        """Delete an object (children first with ``Foreground``); ``uid`` guards against a
        namesake. Raises :class:`~jobset_core.errors.NotFound` when it is already gone."""
        request = _core.delete(resource, namespace, name, propagation=propagation, uid=uid)
        answer = await self._send(request)
        return answer if isinstance(answer, dict) else None

    def watch(
        self,
        resource: ApiResource,
        *,
        namespace: str | None,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent[Obj]]:
        """Watch objects from ``resource_version`` (with bookmarks). Raises
        :class:`~jobset_core.errors.Gone` when the version is too old (list again) and
        :class:`~jobset_core.errors.Unreachable` when the stream drops."""
        request = _core.watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )
        return self._watch(request, resource_version, timeout_seconds)

    async def read_pod_log(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log as text, as it is now."""
        request = _core.pod_log(
            namespace, name, container=container, tail_lines=tail_lines, previous=previous
        )
        data: bytes = await self._retrying(
            request, lambda auth: self._read(request, self._timeout, auth, streaming=False)
        )
        return data.decode("utf-8", "replace")

    async def stream_pod_log(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        follow: bool = True,
        max_line_bytes: int | None = None,
    ) -> AsyncIterator[str]:
        """Yield a container's log line by line as it is written (without newlines).

        ``max_line_bytes`` bounds what one line may hold in memory (see :class:`LineBuffer`):
        a longer line comes cut, saying how many bytes were left out."""
        request = _core.pod_log(
            namespace, name, container=container, tail_lines=tail_lines, follow=follow
        )
        response = await self._retrying(
            request, lambda auth: self._call_api(request, None, auth, streaming=follow)
        )
        lines = LineBuffer(max_line_bytes)
        self.stats.watches_open += 1
        try:
            while chunk := await self._read_some(request, response):
                for line in lines.feed(chunk):
                    yield line.decode("utf-8", "replace")
            rest = lines.flush()
            if rest is not None:
                yield rest.decode("utf-8", "replace")
        finally:
            self.stats.watches_open -= 1
            response.close()

    async def jobset_api_served(self) -> bool:
        """Whether the API server serves ``jobset.x-k8s.io/v1alpha2`` jobsets (discovery)."""
        try:
            return _core.jobset_api_in(await self._send(_core.discovery()))
        except NotFound:
            return False

    async def may(self, verb: str, resource: ApiResource, *, namespace: str | None) -> bool:
        """Whether this identity may ``verb`` the resource in ``namespace`` (``None``: in all
        namespaces), as a ``SelfSubjectAccessReview`` answers."""
        return _core.access_allowed(
            await self._send(_core.access_review(verb, resource, namespace))
        )

    async def pod(self, name: str, *, namespace: str) -> Obj:
        """Read one pod (a shorthand of :meth:`get`)."""
        return await self.get(POD, name, namespace=namespace)

    async def node(self, name: str) -> Obj:
        """Read one node (cluster-scoped)."""
        return _core.as_object(await self._send(_core.get(NODE, None, name)))

    # ------------------------------------------------------------------ plumbing

    async def _watch(
        self, request: Request, resource_version: str | None, timeout_seconds: int | None
    ) -> AsyncIterator[WatchEvent[Obj]]:
        state = WatchState(_core.as_object, resource_version)
        read_timeout = _WATCH_SILENCE
        if timeout_seconds is not None:
            read_timeout = min(_WATCH_SILENCE, timeout_seconds + _WATCH_GRACE)
        response = await self._retrying(
            request, lambda auth: self._call_api(request, read_timeout, auth, streaming=True)
        )
        self.stats.watches_open += 1
        # Read piece by piece, with no generator below this one, and nothing of the last
        # piece or event kept while the watch is silent (a triggerer holds 400 watches).
        event: WatchEvent[Obj] | None = None
        try:
            while chunk := await self._read_some(request, response):
                for event in state.feed(chunk):
                    yield event
                del chunk
                event = None
            for event in state.close():
                yield event
        finally:
            self.stats.watches_open -= 1
            response.close()

    async def _send(self, request: Request) -> Any:
        """Send a request and decode its JSON answer, retrying as the policy says."""
        return _core.decode_body(await self._received(request))

    async def _received(self, request: Request) -> bytes:
        """Send a request and read its whole answer, retrying as the policy says."""
        data = await self._retrying(
            request, lambda auth: self._read(request, self._timeout, auth, streaming=False)
        )
        self._trimmer.answered(len(data))
        return data

    async def _retrying(self, request: Request, attempt: Callable[[Credential], Awaitable[T]]) -> T:
        credentials = await self._credential_source()
        reauthenticated = False
        for number in itertools.count(1):
            if number > 1:
                self.stats.retries += 1
            credential = await credentials.current()
            self.stats.credential_refreshes = credentials.stats.refreshes
            try:
                answer = await attempt(credential)
                self._allowed.add(request.permission)
                return answer
            except Unauthorized as refused:
                self.stats.unauthorized += 1
                fresh = await credentials.refused(credential, retried=reauthenticated)
                if fresh is None:
                    raise _explained(refused, credentials.label, reauthenticated) from None
                reauthenticated = True
                continue  # at once, with the fresh credential (one second chance only)
            except ApiError as answer:  # an error answer, already mapped by _call_api
                if isinstance(answer, ServerError):  # e.g. a server that is starting
                    self._unreachable_at = time.monotonic()
                delay = self._delay(request, number, answer)
                if delay is None:
                    raise
                _said_refused(request, answer, number)
            except ApiException as exc:
                error = _api_error(request, exc)
                delay = self._delay(request, number, error)
                if delay is None:
                    raise error from exc
                _said_refused(request, error, number)
            except _TRANSPORT_ERRORS as exc:
                self._unreachable_at = time.monotonic()
                error = _core.unreachable(request, exc)
                delay = self._delay(request, number, error)
                if delay is None:
                    raise error from exc
            await self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _credential_source(self) -> Credentials:
        if self._credentials is None:
            await self._api(streaming=False)
        assert self._credentials is not None
        return self._credentials

    def _delay(self, request: Request, attempt: int, error: JobSetError) -> float | None:
        once = request.dry_run or request.optional
        return _core.retry_delay(
            self._retry,
            attempt,
            error,
            idempotent=request.idempotent,
            rand=self._rand(),
            forbidden_may_pass=request.permission in self._allowed or self._restarted_lately(),
            forbidden_attempts=1 if once else _core.FORBIDDEN_ATTEMPTS,
        )

    async def _read_some(self, request: Request, response: Any) -> bytes:
        """The next piece of a streamed answer, ``b""`` at its end."""
        try:
            data: bytes = await response.content.readany()
            return data
        except _TRANSPORT_ERRORS as exc:
            self._unreachable_at = time.monotonic()  # a stream cut: the server may be going
            raise _core.unreachable(request, exc) from exc

    def _restarted_lately(self) -> bool:
        """Whether the API server could not be reached moments ago (it may be restarting)."""
        lost = self._unreachable_at
        return lost is not None and time.monotonic() - lost < _RESTART_GRACE

    async def _api(self, *, streaming: bool) -> Any:
        if self._pools is None:
            if self._loading is None:
                self._loading = asyncio.Lock()
            async with self._loading:
                if self._pools is None:
                    connection = await load_connection(self.settings)
                    self._credentials = connection.credentials
                    self._pools = (
                        self._api_client(connection.configuration, _REQUEST_POOL),
                        self._api_client(connection.configuration, 0),  # 0: no limit
                    )
                    self._h2 = self._h2_pool(connection.configuration)
        return self._pools[1 if streaming else 0]

    def _api_client(self, configuration: Any, limit: int) -> Any:
        pool = copy.copy(configuration)
        pool.connection_pool_maxsize = limit
        api = ApiClient(pool)
        rest = api.rest_client
        traced = aiohttp.TraceConfig()
        traced.on_connection_create_end.append(self._connection_opened)
        old = rest.pool_manager
        rest.pool_manager = aiohttp.ClientSession(
            connector=old.connector,
            trust_env=True,
            read_bufsize=_READ_BUFFER,
            trace_configs=[traced],
        )
        old.detach()  # the connector now belongs to the traced session
        return api

    async def _connection_opened(self, *_: Any) -> None:
        self.stats.connections += 1

    def _h2_pool(self, configuration: Any) -> _h2.H2Pool | None:
        """HTTP/2 connections to the server, unless it is reached through a proxy."""
        host = str(configuration.host)
        hostname = urllib.parse.urlsplit(host).hostname or ""
        blocked = _h2.http2_blocked(
            host,
            configuration.proxy,
            urllib.request.getproxies(),
            bool(urllib.request.proxy_bypass(hostname)),
        )
        if blocked is not None:
            log.debug("HTTP/1.1 to %s: %s", host, blocked)
            self.stats.protocol = "http/1.1"
            return None
        return _h2.H2Pool(
            host,
            _h2.tls_context(configuration),
            server_hostname=getattr(configuration, "tls_server_name", None),
            connect_timeout=_CONNECT_TIMEOUT,
            ping_after=self._ping[0],
            ping_timeout=self._ping[1],
            on_connect=self._h2_opened,
        )

    def _h2_opened(self) -> None:
        self.stats.connections += 1
        self.stats.protocol = "h2"

    async def _over_h2(
        self, request: Request, headers: dict[str, str], read_timeout: float | None
    ) -> Any:
        """The answer over HTTP/2, or ``None`` when the server turned out not to speak it
        (then this client speaks HTTP/1.1 from now on)."""
        pool = self._h2
        if pool is None:
            return None
        response = await pool.request(
            request.method,
            request.path,
            query=request.query,
            headers={**headers, "Accept-Encoding": "gzip"},
            body=request.body,
            read_timeout=read_timeout,
        )
        if response is None and self._h2 is pool:
            log.info(
                "the API server does not speak HTTP/2 (%s): HTTP/1.1 from now on", pool.refused
            )
            self._h2 = None
            self.stats.protocol = "http/1.1"
            await pool.aclose()
        return response

    async def _read(
        self,
        request: Request,
        read_timeout: float | None,
        credential: Credential,
        *,
        streaming: bool,
    ) -> bytes:
        response = await self._call_api(request, read_timeout, credential, streaming=streaming)
        try:
            data: bytes = await response.read()
            return data
        finally:
            response.release()

    async def _call_api(
        self,
        request: Request,
        read_timeout: float | None,
        credential: Credential,
        *,
        streaming: bool,
    ) -> Any:
        """Open the request; an error answer is read, released and raised as our error."""
        api = await self._api(streaming=streaming)
        self.stats.requests[request.verb] = self.stats.requests.get(request.verb, 0) + 1
        accept = "application/json" if request.resource != "pods/log" else "*/*"
        headers = {"Content-Type": request.content_type, "Accept": accept}
        if credential.header is not None:
            headers["Authorization"] = credential.header
        response = await self._over_h2(request, headers, read_timeout)
        if response is None:
            response = await self._over_http1(api, request, headers, read_timeout)
        if _core.is_success(response.status):
            return response
        try:
            body: bytes = await response.read()
        finally:
            response.release()
        now = _dt.datetime.now(_dt.UTC)
        raise _core.error_from_response(response.status, response.headers, body, now=now)

    async def _over_http1(
        self, api: Any, request: Request, headers: dict[str, str], read_timeout: float | None
    ) -> Any:
        response = await api.call_api(
            request.path,
            request.method,
            query_params=list(request.query),
            header_params=headers,
            body=request.body,
            auth_settings=[],  # the header above: our credentials, refreshed
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=(_CONNECT_TIMEOUT, read_timeout),
        )
        # The generated client keeps its last answer until the next request: a list page's
        # body (megabytes at a thousand runs) held for the whole wait of a triggerer.
        api.last_response = None
        return response


def _same(obj: Obj) -> Obj:
    return obj


def _explained(refused: Unauthorized, source: str, refreshed: bool) -> Unauthorized:
    """The 401 with the credentials' source named (never the credential)."""
    what = "refreshed after a first 401 and refused again" if refreshed else "refused"
    message = f"{refused.message} ({source}: {what})".strip()
    return Unauthorized(refused.status, refused.reason, message, refused.details)


def _api_error(request: Request, exc: Any) -> JobSetError:
    if not exc.status:  # the library failed before any answer (bad arguments)
        return _core.unreachable(request, exc)
    now = _dt.datetime.now(_dt.UTC)
    return _core.error_from_response(exc.status, exc.headers, exc.body, now=now)


def _said_refused(request: Request, error: JobSetError, attempt: int) -> None:
    """Say a 403 the first time it is retried: a missing permission shows at once, not only
    once the retries meant for a restarting API server are over. (An optional request's
    caller says it, once.)"""
    if isinstance(error, Forbidden) and attempt == 1 and not request.optional:
        log.warning("403 Forbidden, trying again in case the API server just restarted: %s", error)
