"""HTTP/2: a client's watches and requests share a few connections to the API server.

The pure decisions (whether a server may be spoken to in HTTP/2, which connection takes the
next stream) are tables. The rest runs against the devcluster's kube-apiserver, whose own
HTTP/2 (its MAX_CONCURRENT_STREAMS, its flow control, its resets) is what the client meets:
directly, or through a TCP pass-through that cuts or freezes the connections
(:mod:`tests.cluster.tcppass`; TLS and HTTP/2 still end at the API server), or through the
fault proxy, which speaks only HTTP/1.1.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings, EventType
from jobset_core.client._h2 import H2Pool, H2Response, _Stream, first_with_room, http2_blocked
from jobset_core.errors import Unreachable
from jobset_core.resources import CONFIG_MAP
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.tcppass import TcpPass

# ------------------------------------------------------------------ pure


@pytest.mark.parametrize(
    ("url", "proxy", "env", "bypassed", "blocked"),
    [
        ("https://10.0.0.1:6443", None, {}, False, None),
        ("https://api.example:443/prefix", None, {"http": "http://p:3128"}, False, None),
        ("https://api.example", None, {"https": "http://p:3128"}, True, None),
        ("https://api.example", None, {"https": "http://p:3128"}, False, "environment"),
        ("https://api.example", "http://p:3128", {}, False, "proxy-url"),
        ("http://127.0.0.1:8080", None, {}, False, "not TLS"),
    ],
)
def test_when_http2_is_not_tried(
    url: str, proxy: str | None, env: dict[str, str], bypassed: bool, blocked: str | None
) -> None:
    why = http2_blocked(url, proxy, env, bypassed)
    assert (why is None) if blocked is None else (why is not None and blocked in why), why


@pytest.mark.parametrize(
    ("rooms", "chosen"),
    [([], None), ([0], None), ([5], 0), ([0, 0, 1], 2), ([2, 100], 0), ([0, 3, 0, 9], 1)],
)
def test_the_next_stream_fills_the_oldest_connection_with_room(
    rooms: list[int], chosen: int | None
) -> None:
    assert first_with_room(rooms) == chosen


async def test_an_answer_read_and_dropped_is_freed_at_once() -> None:
    """An answer and its stream hold no reference cycle: dropped, they go at once, not when
    the interpreter's cycle collector comes by (a triggerer's start reads hundreds)."""
    stream = _Stream(connection=None, stream_id=1)  # type: ignore[arg-type]
    stream.status, stream.ended = 200, True
    response = H2Response(stream, read_timeout=None)
    assert await response.content.readany() == b""  # the content face, made, read, dropped
    gone = weakref.ref(response), weakref.ref(stream)
    collecting = gc.isenabled()
    gc.disable()
    try:
        del response, stream
        assert [ref() for ref in gone] == [None, None]
    finally:
        if collecting:
            gc.enable()


# ------------------------------------------------------------------ on the cluster


@pytest.fixture
def settings(devcluster: Any) -> ClientSettings:
    return ClientSettings(kubeconfig_path=devcluster.kubeconfig)


def _sockets_to(port: int) -> int:
    """This process's established TCP connections to ``port`` (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        target = os.readlink(f"/proc/self/fd/{fd}") if os.path.islink(f"/proc/self/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and remote_port == port and fields[9] in inodes:
                count += 1
    return count


def _server_port(settings: ClientSettings) -> int:
    import yaml

    config = yaml.safe_load(Path(str(settings.kubeconfig_path)).read_text())
    return int(config["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])


async def _watching(
    client: Client, namespace: str, count: int, seen: dict[int, list[Any]]
) -> list[asyncio.Task[None]]:
    """``count`` watches of the namespace's ConfigMaps, each noting what it sees; returns once
    every one is open."""
    start = await client.list(CONFIG_MAP, namespace=namespace)

    async def watch(i: int) -> None:
        stream = client.watch(
            CONFIG_MAP,
            namespace=namespace,
            resource_version=start.resource_version,
            timeout_seconds=120,
        )
        async for event in stream:
            if event.type is not EventType.BOOKMARK:
                seen.setdefault(i, []).append(event)

    opened = client.stats.watches_open
    tasks = [asyncio.create_task(watch(i)) for i in range(count)]
    while client.stats.watches_open < opened + count:
        assert not any(t.done() for t in tasks), next(t for t in tasks if t.done()).exception()
        await asyncio.sleep(0.05)
    return tasks


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _seen_by_every_watch(
    client: Client, namespace: str, count: int, name: str
) -> dict[int, list[Any]]:
    """Open ``count`` watches, create a ConfigMap, wait until every watch saw it; close them.
    What each saw, by watch."""
    seen: dict[int, list[Any]] = {}
    tasks = await _watching(client, namespace, count, seen)
    try:
        await client.create(CONFIG_MAP, {"metadata": {"name": name}}, namespace=namespace)
        async with asyncio.timeout(60):
            while len(seen) < count:
                await asyncio.sleep(0.05)
    finally:
        await _stop(tasks)
    return seen


@pytest.mark.cluster
async def test_hundreds_of_watches_share_a_few_connections(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """250 watches and the requests around them: ceil(250 / the server's stream limit)
    connections (a kube-apiserver allows 100 streams on one), every watch sees the change.
    The sockets are counted in /proc, beside the test's own official client's."""
    before = _sockets_to(_server_port(settings))
    async with Client(settings) as client:
        seen = await _seen_by_every_watch(client, cluster_namespace, 250, "for-every-watch")
        assert all(events[0].type is EventType.ADDED for events in seen.values())
        assert client.stats.protocol == "h2"
        assert client._h2 is not None
        limit = client._h2._connections[0]._h2.remote_settings.max_concurrent_streams
        needed = math.ceil((250 + 1) / limit)  # the watches, and room for a request
        assert client.stats.connections <= needed, (client.stats.connections, limit)
        assert _sockets_to(_server_port(settings)) - before == client.stats.connections


@pytest.mark.cluster
async def test_closed_watches_give_their_streams_back(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """A watch its reader stops is reset on the connection (RST_STREAM): three rounds of 90
    watches, each round closed before the next, fit one connection."""
    async with Client(settings) as client:
        for _ in range(3):
            await _stop(await _watching(client, cluster_namespace, 90, {}))
        assert client.stats.watches_open == 0
        assert client.stats.connections == 1


@pytest.mark.cluster
async def test_bodies_larger_than_the_servers_window(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """A 900 KB ConfigMap goes up (the server's stream window is 256 KiB: the body waits for
    its window updates) and comes back whole, in a list of 3 of them (2.7 MB)."""
    async with Client(settings) as client:
        for i in range(3):
            data = {"blob": f"{i}" * 900_000}
            body = {"metadata": {"name": f"big-{i}"}, "data": data}
            created = await client.create(CONFIG_MAP, body, namespace=cluster_namespace)
            assert created["data"] == data
        listed = await client.list(CONFIG_MAP, namespace=cluster_namespace)
        blobs = sorted(item["data"]["blob"] for item in listed.items if "blob" in item["data"])
        assert blobs == [f"{i}" * 900_000 for i in range(3)]
        assert client.stats.protocol == "h2" and client.stats.connections == 1


@pytest.mark.cluster
async def test_a_cut_connection_fails_every_stream_and_the_next_ones_reconnect(
    settings: ClientSettings, cluster_namespace: str, tmp_path: Path
) -> None:
    async with TcpPass(Path(str(settings.kubeconfig_path))) as link:
        through = ClientSettings(kubeconfig_path=str(link.kubeconfig(tmp_path / "kubeconfig")))
        async with Client(through) as client:
            tasks = await _watching(client, cluster_namespace, 20, {})
            link.cut()
            results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
            assert all(isinstance(r, Unreachable) for r in results), results
            await _seen_by_every_watch(client, cluster_namespace, 5, "after-the-cut")
            assert link.accepted == client.stats.connections == 2


@pytest.mark.cluster
async def test_a_silent_connection_is_found_by_a_ping(
    settings: ClientSettings, cluster_namespace: str, tmp_path: Path
) -> None:
    """A connection that forwards nothing any more (half-open: no reset ever comes) fails its
    streams once a ping goes unanswered, long before any watch's own timeout (120 s)."""
    async with TcpPass(Path(str(settings.kubeconfig_path))) as link:
        through = ClientSettings(kubeconfig_path=str(link.kubeconfig(tmp_path / "kubeconfig")))
        async with Client(through, ping_after=1.0, ping_timeout=1.0) as client:
            tasks = await _watching(client, cluster_namespace, 10, {})
            link.freeze()
            results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
            assert all(isinstance(r, Unreachable) for r in results), results
            assert "did not answer a ping" in str(results[0])


@pytest.fixture
def proxy(devcluster: Any) -> Iterator[FaultProxy]:
    with FaultProxy(devcluster.state_dir) as running:
        yield running


@pytest.mark.cluster
async def test_a_server_without_http2_is_spoken_to_in_http1(
    proxy: FaultProxy, cluster_namespace: str, tmp_path: Path
) -> None:
    """The fault proxy offers no ``h2`` in its handshake: the client goes on in HTTP/1.1,
    where every watch holds a connection of its own."""
    kubeconfig = tmp_path / "proxied.kubeconfig"
    proxy.admin_kubeconfig(kubeconfig, user="http1", namespace=cluster_namespace)
    async with Client(ClientSettings(kubeconfig_path=str(kubeconfig))) as client:
        await _seen_by_every_watch(client, cluster_namespace, 3, "h1")
        assert client.stats.protocol == "http/1.1"
        assert client.stats.connections >= 4  # a request's, and one per watch


@pytest.mark.cluster
async def _big_config_maps(client: Client, namespace: str, prefix: str) -> H2Pool:
    """Three ConfigMaps of 0.9 MB (a list of them: 2.7 MB), and the client's HTTP/2 pool."""
    for i in range(3):
        body = {"metadata": {"name": f"{prefix}-{i}"}, "data": {"blob": "x" * 900_000}}
        await client.create(CONFIG_MAP, body, namespace=namespace)
    pool = client._h2
    assert pool is not None
    return pool


async def test_answers_left_unread_give_their_window_back(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """A reader that stops early (a followed log broken off, a watch closed) leaves what came
    unread; it still counts against the connection's flow-control window until it is given
    back. 30 lists of 2.7 MB, each read one chunk then dropped: 81 MB, more than the window
    (64 MiB) holds, so without the give-back the connection would stall."""
    async with Client(settings) as client:
        pool = await _big_config_maps(client, cluster_namespace, "unread")
        path = f"/api/v1/namespaces/{cluster_namespace}/configmaps"
        for _ in range(30):
            response = await pool.request(
                "GET", path, headers={"Accept": "application/json"}, read_timeout=30
            )
            assert response is not None and response.status == 200
            assert await response.content.readany()
            await asyncio.sleep(0.1)  # the rest of the answer arrives, unread
            response.release()
        (connection,) = pool._connections
        assert connection._h2.inbound_flow_control_window > 32 * 2**20
        listed = await client.list(CONFIG_MAP, namespace=cluster_namespace)
        assert len([c for c in listed.items if c["metadata"]["name"].startswith("unread-")]) == 3


@pytest.mark.cluster
async def test_a_connection_remembers_a_bounded_number_of_closed_streams(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """h2 remembers how each closed stream closed (by default 65,536 a connection, about 110
    bytes each). Ours remember at most 1,024: 1,500 requests on one connection, every third
    one an answer broken off after its first chunk while the rest of it is still coming (the
    frames in flight after the reset must still be met as a reset stream's, not as the
    server's error), leave the connection open and its memory of closed streams bounded."""
    async with Client(settings) as client:
        body = {"metadata": {"name": "streams-big"}, "data": {"blob": "x" * 200_000}}
        await client.create(CONFIG_MAP, body, namespace=cluster_namespace)
        pool = client._h2
        assert pool is not None
        path = f"/api/v1/namespaces/{cluster_namespace}/configmaps"

        async def one(i: int) -> None:
            if i % 3:
                await client.get(CONFIG_MAP, "streams-big", namespace=cluster_namespace)
                return
            response = await pool.request(
                "GET", path, headers={"Accept": "application/json"}, read_timeout=30
            )
            assert response is not None and response.status == 200
            assert await response.content.readany()
            response.release()

        for start in range(0, 1500, 50):
            await asyncio.gather(*(one(i) for i in range(start, start + 50)))
        await asyncio.sleep(0.5)  # the broken-off answers' last frames arrive
        (connection,) = pool._connections
        assert connection.closed is None
        remembered = connection._h2._closed_streams
        assert 0 < len(remembered) <= connection._h2.MAX_CLOSED_STREAMS == 1024
        assert await client.get(CONFIG_MAP, "streams-big", namespace=cluster_namespace)


# ------------------------------------------------------------------ the connection's own TLS


@pytest.mark.cluster
async def test_a_connection_holds_no_read_buffer_of_asyncios(
    settings: ClientSettings, cluster_namespace: str
) -> None:
    """What opening one connection keeps, in Python objects (tracemalloc): its TLS layer, h2's
    state and ours, under 30 KiB; asyncio's TLS allocated a 256 KiB read buffer for each
    (290 KiB a connection). Three lists of 2.7 MB then come over it, each faster than it is
    read (the socket is paused, then resumed), and it keeps no more than a few KiB more:
    nothing is sized by the largest read."""
    async with Client(settings) as client:
        pool = await _big_config_maps(client, cluster_namespace, "tls")
        await (await pool._open()).aclose()  # the first one's imports and caches
        gc.collect()
        tracemalloc.start()
        try:
            connection = await pool._open()
            gc.collect()
            opened = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        try:
            assert opened < 64 * 1024, opened
            wire = connection._wire
            transport = wire._transport
            assert transport is not None
            pauses, pause = [], transport.pause_reading

            def pausing() -> None:
                pauses.append(wire._buffered)
                pause()

            transport.pause_reading = pausing  # type: ignore[method-assign]
            path = f"/api/v1/namespaces/{cluster_namespace}/configmaps"
            tracemalloc.start()
            try:
                for _ in range(3):
                    response = await connection.request(
                        "GET",
                        path,
                        headers={"Accept": "application/json"},
                        body=None,
                        read_timeout=30,
                    )
                    time.sleep(0.2)  # the loop blocked: the answer waits in the socket
                    assert len(await response.read()) > 2_700_000
                    del response
                await asyncio.sleep(0.2)
                gc.collect()
                # Not the event loop's own: each read's timeout leaves a cancelled timer in
                # its heap until it is purged (about 100 bytes each, not the connection's).
                loop_own = tracemalloc.Filter(False, f"{Path(asyncio.__file__).parent}/*")
                snapshot = tracemalloc.take_snapshot().filter_traces([loop_own])
                grown = sum(stat.size for stat in snapshot.statistics("filename"))
            finally:
                tracemalloc.stop()
            assert grown < 16 * 1024, grown
            assert pauses, "the socket was never paused"
            assert not wire._paused and wire._buffered == 0 and not wire._plain
        finally:
            await connection.aclose()


class _Closing(TcpPass):
    """A pass-through that can also end every connection the polite way (a FIN each way:
    no TCP reset, and no TLS ``close_notify``, which only the server could send)."""

    def close(self) -> None:
        writers, self._writers = self._writers, []
        for writer in writers:
            writer.close()


@pytest.mark.cluster
async def test_one_connection_carries_requests_and_watches_until_the_server_closes_it(
    settings: ClientSettings, cluster_namespace: str, tmp_path: Path
) -> None:
    """300 requests and 5 watches over one connection, every answer and event whole; then the
    connection is closed under them (FIN): its watches fail as a closed connection, and the
    next request opens another."""
    async with _Closing(Path(str(settings.kubeconfig_path))) as link:
        through = ClientSettings(kubeconfig_path=str(link.kubeconfig(tmp_path / "kubeconfig")))
        async with Client(through) as client:
            body = {"metadata": {"name": "many"}, "data": {"n": "0"}}
            await client.create(CONFIG_MAP, body, namespace=cluster_namespace)
            for start in range(0, 300, 50):
                got = await asyncio.gather(
                    *(
                        client.get(CONFIG_MAP, "many", namespace=cluster_namespace)
                        for _ in range(start, start + 50)
                    )
                )
                assert all(item["data"] == {"n": "0"} for item in got)
            await _seen_by_every_watch(client, cluster_namespace, 5, "seen-by-5")
            assert link.accepted == client.stats.connections == 1
            tasks = await _watching(client, cluster_namespace, 5, {})
            link.close()
            results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
            assert all(isinstance(r, Unreachable) for r in results), results
            assert all("closed the HTTP/2 connection" in str(r) for r in results), results
            assert await client.get(CONFIG_MAP, "many", namespace=cluster_namespace)
            assert link.accepted == client.stats.connections == 2
