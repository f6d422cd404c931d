"""One client and one observer per cluster, shared by every waiter of an event loop.

A triggerer runs hundreds of triggers on one event loop; each leases the observer of its
cluster with :func:`shared_observer` and tracks its run there, so they all share one
connection pool and one informer per kind (and namespace, when the identity may not watch the
whole cluster). Leases are counted: the observer stops and the client closes when the last
lease ends. Everything is per event loop, so ``dag.test()`` (a fresh loop per trigger) works.

What a waiter leaves going after its verdict (a native run's settled status write) finishes in
a task of its own that holds a lease meanwhile (:func:`linger`): the waiter's session ends at
once and holds nothing, so a trigger abandoned after its event (``dag.test()`` takes the first
event, then closes the loop) leaves no client open; a loop that closes first cancels the task,
and the task's lease ends with it.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from jobset_core.observe._observer import Observer, Scope

if TYPE_CHECKING:
    from jobset_core.client.config import ClientSettings

__all__ = ["SharedObserver", "linger", "settings_key", "shared_observer", "shared_stats"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Lease:
    observer: Observer
    count: int = 0
    #: What the leases share besides the observer (:meth:`SharedObserver.kept`).
    kept: dict[Hashable, Any] = field(default_factory=dict)


@dataclass
class _Registry:
    leases: dict[tuple[str, Scope], _Lease] = field(default_factory=dict)
    #: The client's import while it runs in a worker thread: every lease of the loop that
    #: comes meanwhile waits for this one (a triggerer starts a thousand at once).
    importing: asyncio.Future[ModuleType] | None = None
    #: The tasks :func:`linger` started that have not ended.
    lingering: set[asyncio.Task[None]] = field(default_factory=set)


_REGISTRIES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Registry] = (
    weakref.WeakKeyDictionary()
)


def _registry() -> _Registry:
    loop = asyncio.get_running_loop()
    found = _REGISTRIES.get(loop)
    if found is None:
        found = _REGISTRIES[loop] = _Registry()
    return found


def settings_key(settings: ClientSettings) -> str:
    """A stable key of where settings connect (for sharing one observer per cluster)."""
    return json.dumps(
        [
            str(settings.kubeconfig_path) if settings.kubeconfig_path is not None else None,
            settings.kubeconfig,
            settings.context,
            settings.in_cluster,
            settings.insecure_skip_tls_verify,
        ],
        sort_keys=True,
        default=str,
    )


_CLIENT = "jobset_core.client._client"
#: The client module once a lease has imported it (``sys.modules`` also holds a module that
#: another thread is still importing).
_imported: dict[str, ModuleType] = {}


def _import_client() -> ModuleType:
    """Import the client module (and the official client under it) in a worker thread.

    The import takes half a second, so it never runs on the event loop. Its allocations would
    also start a full collection of the whole heap (0.2-0.3 s in a triggerer, with Airflow
    loaded) that holds the GIL and so stalls the loop all the same: collection is paused for
    the import, and what the process holds then (modules, classes: start-up state) is frozen
    out of later collections (``gc.freeze``, as servers do after start-up), so that they only
    scan what comes after.
    """
    if _CLIENT in sys.modules:  # imported, or being imported by another thread: wait for it
        return importlib.import_module(_CLIENT)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(_CLIENT)
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


async def _client_module(registry: _Registry) -> ModuleType:
    """The client module, imported once in a worker thread for every lease waiting on it."""
    module = _imported.get(_CLIENT)
    if module is not None:
        return module
    pending = registry.importing
    if pending is None:
        pending = registry.importing = asyncio.ensure_future(asyncio.to_thread(_import_client))
        pending.add_done_callback(lambda _: setattr(registry, "importing", None))
    module = await asyncio.shield(pending)  # a lease cancelled meanwhile leaves it to the rest
    _imported[_CLIENT] = module
    return module


def shared_observer(settings: ClientSettings, *, scope: Scope = "auto") -> SharedObserver:
    """The observer of the cluster ``settings`` name on this event loop (created on the
    first lease, closed with its client on the last), for the duration of an ``async with``
    block."""
    return SharedObserver(settings, scope)


class SharedObserver:
    """A lease of the shared observer for an ``async with`` block (:func:`shared_observer`):
    a class, not a generator-based context manager, whose generator, frame and wrapper every
    waiting trigger kept besides."""

    __slots__ = ("_held", "_scope", "_settings")

    def __init__(self, settings: ClientSettings, scope: Scope) -> None:
        self._settings, self._scope = settings, scope
        self._held: tuple[_Registry, tuple[str, Scope], _Lease] | None = None

    async def __aenter__(self) -> Observer:
        registry = _registry()
        module = await _client_module(registry)
        key = (settings_key(self._settings), self._scope)
        lease = registry.leases.get(key)
        if lease is None:
            observer = Observer(module.Client(self._settings), scope=self._scope)
            lease = registry.leases[key] = _Lease(observer)
        lease.count += 1
        self._held = (registry, key, lease)
        return lease.observer

    async def __aexit__(self, *exc: object) -> None:
        held, self._held = self._held, None
        if held is not None:
            await _release(*held)

    def kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """What every lease of the observer shares besides it, made by the first that asks
        and gone with the observer: a waiter's lifecycle, which is the same for each of a
        triggerer's thousand waits (0.5 KiB a wait, made for each).

        Raises:
            RuntimeError: outside the ``async with`` block.
        """
        if self._held is None:
            raise RuntimeError("the lease is not held")
        kept = self._held[2].kept
        found = kept.get(key)
        if found is None:
            found = kept[key] = make()
        return found


async def _release(registry: _Registry, key: tuple[str, Scope], lease: _Lease) -> None:
    lease.count -= 1
    if lease.count <= 0 and registry.leases.get(key) is lease:
        del registry.leases[key]
        try:
            await lease.observer.aclose()
        finally:  # even when a cancellation comes meanwhile (a loop that closes): no client
            # is ever left open, with connections nothing would close
            await lease.observer.client.aclose()


def linger(observer: Observer, work: Awaitable[None]) -> None:
    """Let ``work`` (writes after a verdict) finish in a task of its own, holding a lease of
    the shared ``observer`` until it ends, so that the caller's lease can end now.

    Raises:
        LookupError: ``observer`` is no shared observer of this event loop.
    """
    registry = _registry()
    held = [(key, lease) for key, lease in registry.leases.items() if lease.observer is observer]
    if not held:
        raise LookupError("not a shared observer of this event loop")
    ((key, lease),) = held
    lease.count += 1
    task = asyncio.ensure_future(_hold(registry, key, lease, work))
    registry.lingering.add(task)
    task.add_done_callback(registry.lingering.discard)


async def _hold(
    registry: _Registry, key: tuple[str, Scope], lease: _Lease, work: Awaitable[None]
) -> None:
    try:
        await work
    except Exception:  # the writes report their own errors; anything else is a bug to see
        log.exception("a write after a verdict failed")
    finally:
        await _release(registry, key, lease)


def shared_stats() -> dict[str, Any]:
    """The shared observers of this event loop and what each costs (for logs and tests)."""
    return {
        f"{scope}:{index}": {"leases": lease.count, **lease.observer.stats()}
        for index, ((_, scope), lease) in enumerate(_registry().leases.items())
    }
