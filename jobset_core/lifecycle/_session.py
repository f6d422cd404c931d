"""The one door: a session on a cluster yields the lifecycle.

:func:`session` is what every asynchronous way in opens (a trigger with ``shared=True``: all
triggers of a triggerer share one client and observer per cluster); :func:`blocking` is the
same for synchronous callers (a worker, a sensor's poke, ``jobsetctl``, a KFP step), on an
event loop of their own for the duration of the call. The client is imported on first use,
never by importing this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from jobset_core.blocking import run
from jobset_core.lifecycle._lifecycle import Lifecycle
from jobset_core.observe import Observer, SharedObserver, linger, shared_observer

if TYPE_CHECKING:
    from jobset_core.client import Client
    from jobset_core.client.config import ClientSettings

__all__ = ["Session", "blocking", "session"]

T = TypeVar("T")


def session(
    settings: ClientSettings,
    *,
    shared: bool = False,
    validate: bool = True,
    server_checks: bool | None = None,
    feature_gates: Mapping[str, bool] | None = None,
    backend_options: Mapping[str, Any] | None = None,
) -> Session:
    """The lifecycle on the cluster ``settings`` name, for the duration of an ``async with``
    block.

    The writes that outlive a verdict (:meth:`Lifecycle.flush`) are done when a session of
    its own ends (its process may end next); a shared session leaves them to finish under a
    lease of the shared client (:func:`~jobset_core.observe.linger`), so it ends at once and
    holds nothing after (a trigger fires after its session, and may be dropped then).

    Args:
        settings: Where to connect.
        shared: Share the client and observer of this event loop with every other shared
            session on the same cluster (informers per kind, cluster-wide or per namespace
            as the identity allows): what a triggerer's triggers do. Otherwise the session
            has its own client and observer, watching only its runs.
        validate: Check every JobSet before creating anything.
        server_checks: Dry-run every new run's objects on the cluster before creating
            anything (default: on, unless the environment says ``JOBSET_SERVER_CHECKS=0``:
            an escape hatch for a cluster whose admission misjudges dry runs).
        feature_gates: The controller's feature gates, for validation.
        backend_options: More options for the backends (e.g. the native ``placement``).
    """
    options: dict[str, Any] = {
        "validate": validate,
        "server_checks": server_checks_wanted() if server_checks is None else server_checks,
        "feature_gates": feature_gates,
        "backend_options": backend_options,
    }
    return Session(settings, shared, options)


class Session:
    """A :func:`session`'s block: a class, not a generator-based context manager, whose
    generator, frame and wrapper every waiting trigger kept besides."""

    __slots__ = ("_client", "_lease", "_lifecycle", "_options", "_settings", "_shared")

    def __init__(self, settings: ClientSettings, shared: bool, options: dict[str, Any]) -> None:
        self._settings, self._shared = settings, shared
        self._options: dict[str, Any] | None = options
        self._lease: SharedObserver | None = None
        self._client: Client | None = None
        self._lifecycle: Lifecycle | None = None

    async def __aenter__(self) -> Lifecycle:
        options, self._options = self._options or {}, None  # the lifecycle keeps them now
        if self._shared:
            self._lease = lease = shared_observer(self._settings)
            observer = await lease.__aenter__()
        else:
            from jobset_core.client import Client

            self._client = client = Client(self._settings)
            await client.__aenter__()
            observer = Observer(client, scope="run")
        try:
            if self._lease is not None:  # one per set of options for every sharer, too
                key = ("lifecycle", json.dumps(options, sort_keys=True, default=repr))
                self._lifecycle = self._lease.kept(key, lambda: Lifecycle(observer, **options))
            else:
                self._lifecycle = Lifecycle(observer, **options)
        except BaseException:
            await self._close(observer)
            raise
        return self._lifecycle

    async def __aexit__(self, *exc: object) -> None:
        lifecycle, self._lifecycle = self._lifecycle, None
        if lifecycle is not None:
            await self._close(lifecycle.observer, lifecycle)

    async def _close(self, observer: Observer, lifecycle: Lifecycle | None = None) -> None:
        if self._lease is not None:
            try:
                if lifecycle is not None and lifecycle.writing:
                    linger(observer, lifecycle.flush())
            finally:
                await self._lease.__aexit__()
            return
        try:
            try:
                if lifecycle is not None:
                    await lifecycle.flush()
            finally:
                await observer.aclose()
        finally:
            assert self._client is not None
            await self._client.aclose()


#: The environment variable that turns the server checks off for every way in (``0``).
SERVER_CHECKS_ENV = "JOBSET_SERVER_CHECKS"


def server_checks_wanted() -> bool:
    """Whether the environment leaves the server checks on (``JOBSET_SERVER_CHECKS`` unset,
    or anything but ``0``, ``false``, ``no`` or ``off``)."""
    said = os.environ.get(SERVER_CHECKS_ENV, "").strip().lower()
    return said not in ("0", "false", "no", "off")


def blocking(
    settings: ClientSettings, work: Callable[[Lifecycle], Awaitable[T]], **options: Any
) -> T:
    """Run ``work`` on a session of its own, here and now, and return what it returns (or
    raise its error); ``options`` as for :func:`session`."""

    async def main() -> T:
        async with session(settings, **options) as lifecycle:
            return await work(lifecycle)

    return run(main)
