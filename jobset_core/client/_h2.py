"""HTTP/2 to the API server: every request and watch of a client over a few TLS connections.

The API server speaks HTTP/2 (ALPN ``h2``) and multiplexes streams on one connection, as
client-go uses it: a triggerer watching 100 namespaces holds 400-500 watches, which over
HTTP/1.1 are 400-500 TCP connections, each with its TLS state and asyncio's 256 KiB read
buffer. Here they share ``ceil(streams / the server's MAX_CONCURRENT_STREAMS)`` connections
(100 streams per connection on a default kube-apiserver), and the TLS is our own (:class:`_TLS`:
OpenSSL over memory buffers on a plain TCP transport), which holds only what is in flight.

:class:`H2Pool` opens connections as streams need room; a connection lives until the server
closes it (GOAWAY, a restart) or stops answering: after ``ping_after`` seconds without a
frame it is sent a PING, and with no frame ``ping_timeout`` seconds later it is dead (a
half-open TCP connection reads nothing, forever), like client-go's ``ReadIdleTimeout`` and
``PingTimeout``. Every stream of a lost connection fails with a :class:`ConnectionError`
(the client's transport errors: retried, or a watch reopened), and the next request opens a
fresh connection. Received data is acknowledged to the server only as the reader takes it
(HTTP/2 flow control), so a slow reader holds back its own stream, not memory.

When the server does not offer ``h2`` (an HTTP/1.1 proxy, a load balancer), the first
request answers ``None`` and the client goes on over HTTP/1.1. Whether a
server is reached through an HTTP proxy at all is :func:`http2_blocked` (pure): then the
client does not try.

What the h2 library cannot decide is here, and nothing else: the socket and its TLS, the
wake-ups, the clock of the pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
import zlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

__all__ = [
    "H2Pool",
    "H2Response",
    "first_with_room",
    "http2_blocked",
    "tls_context",
]

#: Our receive window per stream and the connection's: what the server may send before we
#: take it. Large enough that a list page or a big watch event never waits for a window
#: update on a fast link; nothing is allocated for it.
_STREAM_WINDOW = 4 * 2**20
_CONNECTION_WINDOW = 64 * 2**20
_READ_SIZE = 2**16
#: Decrypted bytes the reader has not taken yet beyond which the socket is not read (TCP then
#: holds the server back; h2's windows bound what it may send anyway).
_PLAIN_LIMIT = 2 * _READ_SIZE
#: What goes into OpenSSL's memory buffers at a time. A ``MemoryBIO`` keeps the largest size
#: it ever held until it is freed (OpenSSL grows its buffer, never shrinks it): fed whole,
#: one 256 KiB read of the socket during a long list would stay allocated for the life of
#: the connection. In 4 KiB pieces each buffer stays at about 5.5 KiB.
_SLICE = 2**12
#: The most one TLS record decrypts to (RFC 8446 5.1): what one ``SSLObject.read`` asks for.
_RECORD = 2**14


class _NotH2(Exception):
    """The server chose HTTP/1.1 (or no protocol) in the TLS handshake."""


def http2_blocked(
    host_url: str, proxy: str | None, env_proxies: Mapping[str, str], bypassed: bool
) -> str | None:
    """Why this API server is not spoken to over HTTP/2 here, or ``None`` when it may be.

    Args:
        host_url: The API server's URL (the kubeconfig's ``server``).
        proxy: The kubeconfig's ``proxy-url``, if any.
        env_proxies: The environment's proxies by scheme (``urllib.request.getproxies()``).
        bypassed: Whether ``NO_PROXY`` exempts the server's host.

    Examples:
        >>> http2_blocked("https://10.0.0.1:6443", None, {}, False) is None
        True
        >>> http2_blocked("http://127.0.0.1:8080", None, {}, False)
        'not TLS (h2 is negotiated in the TLS handshake)'
    """
    scheme = urllib.parse.urlsplit(host_url).scheme
    if scheme != "https":
        return "not TLS (h2 is negotiated in the TLS handshake)"
    if proxy:
        return "the kubeconfig's proxy-url (an HTTP/1.1 tunnel)"
    if env_proxies.get("https") and not bypassed:
        return "the environment's HTTPS proxy (an HTTP/1.1 tunnel)"
    return None


def first_with_room(rooms: Sequence[int]) -> int | None:
    """The connection the next stream goes on: the first with room (streams fill one
    connection before the next, so the fewest stay open), or ``None``: open another.

    Args:
        rooms: Per connection, in the order they were opened, how many more streams it
            takes (0 for one that is full, draining after a GOAWAY, or not yet settled).

    Examples:
        >>> first_with_room([0, 3, 10])
        1
        >>> first_with_room([0, 0]) is None
        True
    """
    return next((i for i, room in enumerate(rooms) if room > 0), None)


def tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS context for ``configuration`` (the official client's ``Configuration``), as its
    own REST client builds it (CA, client certificate, verification switches), offering
    ``h2`` before ``http/1.1``."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


#: The response headers the client reads (each open stream, a watch among them, keeps its
#: headers: the rest, a dozen strings, would be kept for nothing).
_HEADERS_READ = frozenset({"content-encoding", "content-type", "retry-after", "warning"})


class _Body:
    """The ``content`` face of a response: what the client reads a stream with."""

    __slots__ = ("_response",)

    def __init__(self, response: H2Response) -> None:
        self._response = response

    def readany(self) -> Coroutine[Any, Any, bytes]:
        """The next piece of the body as soon as there is one; ``b""`` at its end (what a
        watch reads with: no generator, nor a frame of this face, kept per open stream)."""
        return self._response.next_chunk()


class H2Response:
    """One stream's answer, with the surface of aiohttp's response the client uses:
    ``status``, ``headers``, ``read()``, ``content.readany()``, ``release()``, ``close()``.
    """

    __slots__ = ("__weakref__", "_inflate", "_stream", "_timeout", "headers", "status")

    def __init__(self, stream: _Stream, read_timeout: float | None) -> None:
        self._stream = stream
        self._timeout = read_timeout
        self.status = stream.status
        self.headers = stream.headers
        gzip = stream.headers.get("content-encoding", "").lower() == "gzip"
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None

    @property
    def content(self) -> _Body:
        """Made when asked, not kept: kept, it and the answer would hold each other, and every
        answer read would stay in memory, with its stream, until the interpreter's cycle
        collector came by (a triggerer's 500 list answers at its start: 0.5 KiB a task)."""
        return _Body(self)

    async def next_chunk(self) -> bytes:
        """The next piece of the body (decompressed), ``b""`` once the stream ended."""
        while (chunk := await self._stream.take(self._timeout)) is not None:
            if self._inflate is not None:
                chunk = self._inflate.decompress(chunk)
            if chunk:
                return chunk
        inflate, self._inflate = self._inflate, None
        return inflate.flush() if inflate is not None else b""

    async def read(self) -> bytes:
        """The whole body."""
        chunks = []
        while chunk := await self.next_chunk():
            chunks.append(chunk)
        return b"".join(chunks)

    def release(self) -> None:
        """Done with the answer: a stream not read to its end is reset (RST_STREAM CANCEL)."""
        self._stream.cancel()

    close = release


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Stream:
    """What one stream has received, and the wake-up of its reader."""

    __slots__ = (
        "__weakref__",
        "_waiter",
        "chunks",
        "connection",
        "ended",
        "error",
        "headers",
        "id",
        "status",
    )

    def __init__(self, connection: _Connection, stream_id: int) -> None:
        self.connection = connection
        self.id = stream_id
        self.status = 0
        self.headers: dict[str, str] = {}  # names in lower case, as HTTP/2 sends them
        #: What came and was not read yet (a list: mostly empty or one chunk; a deque and an
        #: ``asyncio.Event`` took 1.6 KiB a stream, and a triggerer bound to 100 namespaces
        #: holds 400 watches).
        self.chunks: list[tuple[bytes, int]] = []
        self.ended = False
        self.error: BaseException | None = None
        #: The reader's wake-up, while it waits.
        self._waiter: asyncio.Future[None] | None = None

    def answered(self) -> bool:
        return self.status != 0

    def wake(self) -> None:
        """Something came: the reader, if it waits, looks."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Until something comes (a header, data, the end, an error); ``TimeoutError`` after
        ``timeout`` seconds. A timer, not ``asyncio.timeout``: a silent watch waits here for
        minutes, and each of a triggerer's 400 kept the timeout's object besides."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if self._waiter is waiter:
                self._waiter = None

    async def take(self, timeout: float | None) -> bytes | None:
        """The next chunk (``None`` at the end); raises the stream's error."""
        while not self.chunks:
            if self.error is not None:
                raise self.error
            if self.ended:
                return None
            await self.wait(timeout)
        data, flow = self.chunks.pop(0)
        self.connection.acknowledge(self, flow)
        return data

    def cancel(self) -> None:
        """The reader is done: a stream not at its end is reset, and what came but was not
        read is given back to the connection's window (else each abandoned answer would
        shrink it for good, until the connection stalls)."""
        if not self.ended and self.error is None:
            self.connection.reset(self)
        unread = sum(flow for _, flow in self.chunks)
        self.chunks.clear()
        if unread:
            self.connection.acknowledge(self, unread)


class _Protocol(h2.connection.H2Connection):  # type: ignore[misc,unused-ignore]
    """h2's state of one connection, remembering fewer closed streams.

    h2 remembers how each closed stream closed, so that frames still in flight for a stream
    it reset are answered with a reset rather than taken for the peer's error: 65,536 streams
    a connection, 120 bytes each. A triggerer opens a stream per request and per watch
    reopening; 400 watches reopened every ten minutes fill that in 27 hours: 7.9 MB a
    connection, for good. Frames in flight for a reset stream come within a round trip,
    while a few other streams close: :attr:`MAX_CLOSED_STREAMS` are plenty. (Go's client,
    client-go's, remembers none: it drops frames of streams it no longer knows.)"""

    MAX_CLOSED_STREAMS = 1024


class _TLS(asyncio.Protocol):
    """One TLS connection over a plain TCP transport: OpenSSL through two ``MemoryBIO``s, as
    ``ssl.SSLObject`` is meant to be used, for the one reader and writer of a
    :class:`_Connection`.

    asyncio's own TLS (``open_connection(ssl=...)``) reads the socket into a 256 KiB
    ``bytearray`` it allocates (and touches) for every connection, and feeds OpenSSL's input
    buffer whole reads, which it then keeps at their largest: 650 KiB a connection after lists
    of megabytes (glibc's ``mallinfo2``), with no way to size either. Here the socket's reads
    (``data_received``) go to OpenSSL in :data:`_SLICE` pieces and are decrypted at once; what
    is kept is the decrypted bytes the reader has not taken (at most :data:`_PLAIN_LIMIT` and
    one read of the socket: past it the socket is paused) and what OpenSSL keeps for a record
    that came in part.
    """

    def __init__(self, context: ssl.SSLContext, server_hostname: str) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl_object = context.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname
        )
        self._transport: asyncio.Transport | None = None
        self._secure = False  # the handshake is done: what comes is application data
        #: Decrypted, not read yet (a list: mostly empty or one record).
        self._plain: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._eof = False
        self._error: BaseException | None = None
        self._closing = False
        #: The wake-up of the one reader (the handshake, then the connection's reading task).
        self._waiter: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # create_connection's: TCP

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        for start in range(0, len(view), _SLICE):
            self._incoming.write(view[start : start + _SLICE])
            if self._secure:
                self._decrypt()
        if self._buffered > _PLAIN_LIMIT and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        """The server closed its side: what OpenSSL holds is decrypted, then the reader gets
        the end (a TLS ``close_notify`` or not: the h2 layer knows whether its streams were
        done). ``False``: the transport closes."""
        self._incoming.write_eof()
        if self._secure:
            self._decrypt()
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self._error is None:
            self._error = exc
        self._eof = True
        self._closing = True
        self._wake()

    # ------------------------------------------------------------ the connection's side

    async def handshake(self) -> None:
        """The TLS handshake; raises OpenSSL's verdict (``ssl.SSLCertVerificationError`` for a
        certificate not trusted or not for this host), as asyncio's own TLS does."""
        while True:
            try:
                self.ssl_object.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError) as err:
                raise ConnectionResetError(
                    "the server closed the connection during the TLS handshake"
                ) from err
            except ssl.SSLError:
                self._flush()  # the alert that tells the server why
                raise
            if self._error is not None:
                raise self._error
            if self._closing:
                raise ConnectionResetError("the connection was lost during the TLS handshake")
            await self._wait()
        self._secure = True
        self._flush()
        self._decrypt()  # application data that came with the handshake's last records

    async def read(self, size: int) -> bytes:
        """Up to ``size`` decrypted bytes, as soon as there are any; ``b""`` once the server
        closed the connection. Raises the error that broke it."""
        while not self._plain:
            if self._error is not None:
                raise self._error
            if self._eof:
                return b""
            await self._wait()
        taken: list[bytes] = []
        count = 0
        while self._plain and count < size:
            chunk = self._plain[0]
            if count + len(chunk) > size:
                self._plain[0] = chunk[size - count :]
                chunk = chunk[: size - count]
            else:
                del self._plain[0]
            taken.append(chunk)
            count += len(chunk)
        self._buffered -= count
        if self._paused and self._buffered <= _PLAIN_LIMIT // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return taken[0] if len(taken) == 1 else b"".join(taken)

    def write(self, data: bytes) -> None:
        """Encrypt and send ``data`` (dropped once the connection is closing)."""
        view = memoryview(data)
        for start in range(0, len(view), _SLICE):
            if self._closing:
                return
            try:
                self.ssl_object.write(view[start : start + _SLICE])
            except ssl.SSLError as err:  # OpenSSL refuses: the connection is broken
                self._broken(err)
                return
            self._flush()

    def close(self) -> None:
        """Send a ``close_notify`` (when the handshake was done) and close the socket; a
        reader still waiting gets the end. When what was sent before has not all left (the
        server reads nothing: a connection found dead by a ping), the socket is closed at
        once: else it would stay open, with what it holds, until TCP itself gave up."""
        if self._closing:
            return
        self._closing = True
        if self._secure:
            with contextlib.suppress(ssl.SSLError):  # the server's close_notify is not awaited
                self.ssl_object.unwrap()
            self._flush(closing=True)
        if self._transport is not None:
            if self._transport.get_write_buffer_size():
                self._transport.abort()
            else:
                self._transport.close()
        self._eof = True
        self._wake()

    # ------------------------------------------------------------ within

    def _decrypt(self) -> None:
        """Take every whole record OpenSSL has, then send what it wants sent (TLS 1.3 session
        tickets and key updates are answered while reading)."""
        try:
            while chunk := self.ssl_object.read(_RECORD):
                self._plain.append(chunk)
                self._buffered += len(chunk)
            self._eof = True  # b"": the server's close_notify
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._eof = True  # the end, with or without close_notify: the reader gets b""
        except (ssl.SSLError, OSError) as err:
            self._broken(err)
            return
        self._flush()

    def _broken(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()
        if self._transport is not None:
            self._closing = True
            self._transport.abort()

    def _flush(self, *, closing: bool = False) -> None:
        """Hand OpenSSL's output to the socket."""
        data = self._outgoing.read()
        if data and self._transport is not None and (closing or not self._closing):
            self._transport.write(data)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            if self._waiter is waiter:
                self._waiter = None


class _Connection:
    """One TLS connection speaking HTTP/2, and the task that reads it."""

    def __init__(
        self,
        wire: _TLS,
        authority: str,
        *,
        ping_after: float,
        ping_timeout: float,
    ) -> None:
        self._wire = wire
        self._authority = authority
        self._ping_after = ping_after
        self._ping_timeout = ping_timeout
        config = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self._h2 = _Protocol(config=config)
        self._streams: dict[int, _Stream] = {}
        self._settled = asyncio.Event()
        self._window = asyncio.Event()
        self._draining = False
        self.closed: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        """Send the preface and our settings; wait for the server's."""
        self._h2.initiate_connection()
        self._h2.update_settings(
            {
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _STREAM_WINDOW,
            }
        )
        self._h2.increment_flow_control_window(_CONNECTION_WINDOW - 65535)
        self._flush()
        self._task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        except TimeoutError:
            self._fail(ConnectionError("the API server sent no HTTP/2 settings"))
            raise

    def room(self) -> int:
        """How many more streams the server lets this connection open now."""
        if self.closed is not None or self._draining or not self._settled.is_set():
            return 0
        limit = int(self._h2.remote_settings.max_concurrent_streams)
        return max(0, limit - int(self._h2.open_outbound_streams))

    def idle(self) -> bool:
        return not self._streams

    @property
    def draining(self) -> bool:
        """Whether the server said GOAWAY: no new stream goes here."""
        return self._draining

    def drop(self, error: BaseException) -> None:
        """Close the connection now, failing its streams with ``error``."""
        self._fail(error)

    async def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
    ) -> H2Response:
        """Open a stream and wait for the answer's headers."""
        try:
            stream_id = self._h2.get_next_available_stream_id()
        except h2.exceptions.H2Error as err:  # every stream id of the connection was used
            self._draining = True
            raise ConnectionError(f"HTTP/2: {err}") from err
        stream = _Stream(self, stream_id)
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", self._authority.encode()),
            (b":path", target.encode()),
        ]
        fields += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        if body is not None:
            fields.append((b"content-length", str(len(body)).encode()))
        self._streams[stream_id] = stream
        try:
            self._h2.send_headers(stream_id, fields, end_stream=body is None)
            self._flush()
            if body is not None:
                await self._send_body(stream, body)
            while not stream.answered():
                if stream.error is not None:
                    raise stream.error
                await stream.wait(read_timeout)
        except h2.exceptions.H2Error as err:
            self._streams.pop(stream_id, None)
            raise ConnectionError(f"HTTP/2: {err}") from err
        except BaseException:
            stream.cancel()
            raise
        return H2Response(stream, read_timeout)

    async def _send_body(self, stream: _Stream, body: bytes) -> None:
        view = memoryview(body)
        while view:
            if stream.error is not None:
                raise stream.error
            size = min(
                len(view),
                self._h2.local_flow_control_window(stream.id),
                self._h2.max_outbound_frame_size,
            )
            if size <= 0:  # the server's window is full: wait for its WINDOW_UPDATE
                self._window.clear()
                await self._window.wait()
                continue
            self._h2.send_data(stream.id, bytes(view[:size]))
            self._flush()
            view = view[size:]
        self._h2.end_stream(stream.id)
        self._flush()

    def acknowledge(self, stream: _Stream, flow: int) -> None:
        """The reader took (or dropped) ``flow`` bytes of the stream: the server may send as
        many more (on a closed stream, h2 opens only the connection's window)."""
        if flow and self.closed is None:
            self._h2.acknowledge_received_data(flow, stream.id)
            self._flush()

    def reset(self, stream: _Stream) -> None:
        """Give up a stream before its end."""
        self._streams.pop(stream.id, None)
        stream.error = ConnectionError("the stream was closed by its reader")
        if self.closed is None:
            try:
                self._h2.reset_stream(stream.id, h2.errors.ErrorCodes.CANCEL)
                self._flush()
            except h2.exceptions.H2Error:
                pass  # already closed on the server's side

    async def aclose(self) -> None:
        self._fail(ConnectionError("the client closed the connection"))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # -------------------------------------------------------------- the reading task

    async def _read_loop(self) -> None:
        try:
            while True:
                self._receive(await self._next_bytes())
        except asyncio.CancelledError:
            self._fail(ConnectionError("the client closed the connection"))
            raise
        except (OSError, h2.exceptions.H2Error) as err:
            error = err if isinstance(err, ConnectionError) else ConnectionError(str(err))
            self._fail(error)

    def _receive(self, data: bytes) -> None:
        """Hand what came to h2 and act on its events. A function of its own so that nothing
        of it stays referenced while the loop waits (a local of the loop would keep the last
        read, up to 64 KiB, for as long as the connection is silent)."""
        if not data:
            raise ConnectionResetError("the API server closed the HTTP/2 connection")
        for event in self._h2.receive_data(data):
            self._on(event)
        self._flush()

    async def _next_bytes(self) -> bytes:
        """The next bytes; a silent connection is pinged, and dead when the ping is not
        answered (any frame will do)."""
        try:
            async with asyncio.timeout(self._ping_after):
                return await self._wire.read(_READ_SIZE)
        except TimeoutError:
            self._h2.ping(b"jobset\x00\x00")
            self._flush()
        try:
            async with asyncio.timeout(self._ping_timeout):
                return await self._wire.read(_READ_SIZE)
        except TimeoutError:
            raise ConnectionError(
                f"the API server did not answer a ping in {self._ping_timeout:g} s after "
                f"{self._ping_after:g} s of silence: the connection is lost"
            ) from None

    def _on(self, event: h2.events.Event) -> None:
        stream = self._streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self._settled.set()
        elif isinstance(event, h2.events.WindowUpdated):
            self._window.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._goaway(event.last_stream_id, event.error_code)
        elif stream is None:
            return
        elif isinstance(event, h2.events.ResponseReceived):
            for name, value in event.headers:
                key = name.decode() if isinstance(name, bytes) else name
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                if key == ":status":
                    stream.status = int(text)
                elif key in _HEADERS_READ:
                    stream.headers[key] = text
            stream.wake()
        elif isinstance(event, h2.events.DataReceived):
            stream.chunks.append((event.data, event.flow_controlled_length))
            stream.wake()
        elif isinstance(event, h2.events.StreamEnded):
            stream.ended = True
            self._streams.pop(stream.id, None)
            stream.wake()
        elif isinstance(event, h2.events.StreamReset):
            self._streams.pop(stream.id, None)
            stream.error = ConnectionResetError(
                f"the API server reset the stream (HTTP/2 error {event.error_code!s})"
            )
            stream.wake()

    def _goaway(self, last_stream_id: int | None, code: Any) -> None:
        """The server is going (a restart, too many streams served): no new stream here;
        the ones it will not serve fail now, the others may finish."""
        self._draining = True
        last = last_stream_id if last_stream_id is not None else 2**31
        for stream_id in [i for i in self._streams if i > last]:
            stream = self._streams.pop(stream_id)
            stream.error = ConnectionResetError(f"the API server went away (GOAWAY {code!s})")
            stream.wake()
        self._window.set()

    def _fail(self, error: BaseException) -> None:
        if self.closed is None:
            self.closed = error
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            if stream.error is None and not stream.ended:
                stream.error = error
            stream.wake()
        self._settled.set()
        self._window.set()
        self._wire.close()

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and self.closed is None:
            self._wire.write(data)


class H2Pool:
    """The HTTP/2 connections of one client to one API server.

    Args:
        host_url: The API server (``https://host:port``).
        context: Its TLS context (:func:`tls_context`).
        server_hostname: The name its certificate is checked against, when it is not the
            URL's host (the kubeconfig's ``tls-server-name``).
        connect_timeout: Seconds for TCP, TLS and the server's settings.
        ping_after: Seconds of silence after which a connection is pinged.
        ping_timeout: Seconds a pinged connection has to answer.
        on_connect: Called for every connection opened (the client counts them).
    """

    def __init__(
        self,
        host_url: str,
        context: ssl.SSLContext,
        *,
        server_hostname: str | None = None,
        connect_timeout: float = 10.0,
        ping_after: float = 30.0,
        ping_timeout: float = 15.0,
        on_connect: Callable[[], None] = lambda: None,
    ) -> None:
        parts = urllib.parse.urlsplit(host_url)
        self._host = parts.hostname or ""
        self._port = parts.port or 443
        self._prefix = parts.path.rstrip("/")
        self._authority = parts.netloc.rpartition("@")[2]
        self._context = context
        self._server_hostname = server_hostname or self._host
        self._connect_timeout = connect_timeout
        self._ping_after = ping_after
        self._ping_timeout = ping_timeout
        self._on_connect = on_connect
        self._connections: list[_Connection] = []
        self._opening = asyncio.Lock()
        #: Why the server is not spoken to in HTTP/2 (it chose another protocol), once known.
        self.refused: str | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        headers: Mapping[str, str],
        body: Any = None,
        read_timeout: float | None,
    ) -> H2Response | None:
        """Send one request and return its answer once its headers came; ``None`` when the
        server does not speak HTTP/2 (ask again over HTTP/1.1: :attr:`refused` says why).

        Raises:
            ConnectionError: The connection failed or was lost (a transport error).
        """
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(list(query))
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if self.refused is not None:
            return None
        try:
            connection = await self._connection()
        except _NotH2 as why:
            self.refused = str(why)
            return None
        return await connection.request(
            method, target, headers=headers, body=data, read_timeout=read_timeout
        )

    async def aclose(self) -> None:
        connections, self._connections = self._connections, []
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)

    async def _connection(self) -> _Connection:
        chosen = self._pick()
        if chosen is not None:
            return chosen
        async with self._opening:  # one connect at a time: the waiters then share it
            if self.refused is not None:
                raise _NotH2(self.refused)
            chosen = self._pick()
            if chosen is None:
                chosen = await self._open()
                self._connections.append(chosen)
            return chosen

    def _pick(self) -> _Connection | None:
        alive = []
        for connection in self._connections:
            if connection.closed is None and connection.draining and connection.idle():
                connection.drop(ConnectionError("the API server went away"))
            if connection.closed is None:
                alive.append(connection)
        self._connections = alive
        index = first_with_room([c.room() for c in alive])
        return None if index is None else alive[index]

    async def _open(self) -> _Connection:
        wire: _TLS | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, wire = await asyncio.get_running_loop().create_connection(
                    lambda: _TLS(self._context, self._server_hostname), self._host, self._port
                )
                await wire.handshake()
        except TimeoutError:
            if wire is not None:
                wire.close()
            raise ConnectionError(
                f"no TLS connection to {self._authority} in {self._connect_timeout:g} s"
            ) from None
        except BaseException:
            if wire is not None:
                wire.close()
            raise
        protocol = wire.ssl_object.selected_alpn_protocol()
        if protocol != "h2":
            wire.close()
            raise _NotH2(f"{self._authority} chose {protocol or 'no protocol'}")
        self._on_connect()
        connection = _Connection(
            wire,
            self._authority,
            ping_after=self._ping_after,
            ping_timeout=self._ping_timeout,
        )
        await connection.start(self._connect_timeout)
        return connection
