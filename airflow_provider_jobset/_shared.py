"""One API client per cluster and one JobSet watch per namespace, shared by every JobSet
trigger of a triggerer process (imports the client layer: import lazily).

A triggerer runs hundreds of triggers on one event loop. Instead of one poll loop (and one
TLS session per request) per trigger, triggers lease a shared :class:`AsyncJobSetClient` per
cluster and a shared :class:`NamespaceWatch` per (cluster, namespace): a list, then a watch
that resumes from the last ``resourceVersion``, relists on 410 Gone and reconnects with backoff
when the stream drops. The watch keeps the latest JobSet of each name and wakes the triggers
interested in that name. Leases are counted: the watch stops and the client closes when the
last trigger lets go. Everything is per event loop, so ``dag.test()`` (a fresh loop per
trigger) works too.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from jobset_core.client import AsyncJobSetClient, EventType
from jobset_core.errors import Gone
from jobset_core.models import JobSet

__all__ = ["NamespaceWatch", "Subscription", "lease_client", "lease_watch"]

log = logging.getLogger(__name__)

_WATCH_SECONDS = 290
_MAX_BACKOFF = 30.0


class Subscription:
    """A trigger's interest in one JobSet name of a :class:`NamespaceWatch`."""

    def __init__(self, watch: NamespaceWatch, name: str) -> None:
        self._watch = watch
        self.name = name
        self._changed = asyncio.Event()
        self._changed.set()  # the first look needs no wake-up

    def notify(self) -> None:
        self._changed.set()

    def current(self) -> JobSet | None:
        """The latest JobSet of that name the watch saw (``None``: not seen / deleted)."""
        return self._watch.cache.get(self.name)

    async def changed(self, timeout: float | None) -> bool:
        """Wait until the JobSet changed (``True``) or ``timeout`` seconds passed (``False``)."""
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        self._changed.clear()
        return True

    def close(self) -> None:
        self._watch.unsubscribe(self)


class NamespaceWatch:
    """List + watch of the JobSets of one namespace, fanned out to subscriptions by name."""

    def __init__(self, client: AsyncJobSetClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.cache: dict[str, JobSet] = {}
        self.synced = asyncio.Event()
        self.lists = 0
        self._subs: dict[str, set[Subscription]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception:  # pragma: no cover - the loop logs its own failures
                log.debug("watch of %s ended with an error", self.namespace, exc_info=True)
            self._task = None

    def subscribe(self, name: str) -> Subscription:
        sub = Subscription(self, name)
        self._subs.setdefault(name, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.name)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.name]

    @property
    def subscribers(self) -> int:
        return sum(len(s) for s in self._subs.values())

    def _wake(self, name: str | None = None) -> None:
        groups = self._subs.values() if name is None else [self._subs.get(name, set())]
        for group in groups:
            for sub in group:
                sub.notify()

    async def _run(self) -> None:
        backoff = 1.0
        while True:
            try:
                await self._list_and_watch()
            except Gone:
                log.info("JobSet watch of %s expired (410): listing again", self.namespace)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the API is down or the stream broke: reconnect
                log.warning(
                    "JobSet watch of %s failed (%s); retrying in %.0fs",
                    self.namespace,
                    err,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            backoff = 1.0

    async def _list_and_watch(self) -> None:
        listing = await self.client.list_jobsets(namespace=self.namespace)
        self.lists += 1
        self.cache = {js.name: js for js in listing.items}
        self.synced.set()
        self._wake()
        version = listing.resource_version
        while True:
            stream = self.client.watch_jobsets(
                namespace=self.namespace,
                resource_version=version,
                timeout_seconds=_WATCH_SECONDS,
            )
            async for event in stream:
                version = event.resource_version or version
                if event.type is EventType.BOOKMARK:
                    continue
                name = event.object.name
                if event.type is EventType.DELETED:
                    self.cache.pop(name, None)
                else:
                    self.cache[name] = event.object
                self._wake(name)


@dataclass
class _Registry:
    clients: dict[str, tuple[AsyncJobSetClient, int]] = field(default_factory=dict)
    watches: dict[tuple[str, str], tuple[NamespaceWatch, int]] = field(default_factory=dict)


_REGISTRIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Registry] = (
    weakref.WeakKeyDictionary()
)


def _registry() -> _Registry:
    loop = asyncio.get_running_loop()
    found = _REGISTRIES.get(loop)
    if found is None:
        found = _REGISTRIES[loop] = _Registry()
    return found


def registry_stats() -> dict[str, Any]:
    """How many clients and watches this loop shares right now (for tests and logs)."""
    reg = _registry()
    return {
        "clients": len(reg.clients),
        "watches": {f"{ns}": w.subscribers for (_, ns), (w, _) in reg.watches.items()},
    }


@asynccontextmanager
async def lease_client(key: str, settings: Any) -> AsyncIterator[AsyncJobSetClient]:
    """The shared client of a cluster (``key``), created on first lease, closed on the last."""
    reg = _registry()
    entry = reg.clients.get(key)
    client = entry[0] if entry else AsyncJobSetClient(settings)
    reg.clients[key] = (client, (entry[1] if entry else 0) + 1)
    try:
        yield client
    finally:
        held, count = reg.clients[key]
        if count <= 1:
            del reg.clients[key]
            await held.aclose()
        else:
            reg.clients[key] = (held, count - 1)


@asynccontextmanager
async def lease_watch(key: str, settings: Any, namespace: str) -> AsyncIterator[NamespaceWatch]:
    """The shared watch of a namespace on a cluster, started on first lease, stopped on the last."""
    async with lease_client(key, settings) as client:
        reg = _registry()
        entry = reg.watches.get((key, namespace))
        watch = entry[0] if entry else NamespaceWatch(client, namespace)
        reg.watches[(key, namespace)] = (watch, (entry[1] if entry else 0) + 1)
        watch.start()
        try:
            yield watch
        finally:
            held, count = reg.watches[(key, namespace)]
            if count <= 1:
                del reg.watches[(key, namespace)]
                await held.stop()
            else:
                reg.watches[(key, namespace)] = (held, count - 1)
