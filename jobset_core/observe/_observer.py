"""The one observer of the cluster: shared informers, and the runs that waiters track.

A waiter asks :meth:`Observer.track` for a run (a JobSet, or a native anchor) and gets a
:class:`Tracked` handle: :meth:`Tracked.observation` is the run as the observer sees it now,
:meth:`Tracked.changed` waits until something of it changes. Behind it, one informer per kind
and scope serves every tracked run it covers:

=============  ====================================================================
scope          informers
=============  ====================================================================
``run``        the run's own: its JobSet (or anchor) by name, its Jobs and pods by the
               ``jobset-name`` label; Warning Events per namespace. For a process that
               waits for one run (a worker, ``jobsetctl run``, a KFP step).
``namespace``  one per kind and namespace, shared by every run there.
``cluster``    one per kind for the whole cluster, shared by every run.
``auto``       ``cluster`` for each kind the identity may list and watch in every
               namespace (asked once, with ``SelfSubjectAccessReview``), else
               ``namespace``. For a process that waits for many (a triggerer).
=============  ====================================================================

What a run needs: a controller run its JobSet, Jobs, pods, Warning Events and Kueue Workloads
(a cluster without Kueue answers the first list with 404 and the informer stops there); a
native run its anchor ConfigMap, Jobs, pods and Warning Events. Informers start with the first
run they cover and stop with the last. Objects of runs nobody tracks are dropped on arrival, so the
cost of a shared watch is a connection, not memory; but from a shared informer's list until
``HOLD_SECONDS`` after it, they are held, so the runs that join meanwhile (a triggerer's
start) need no list of their own.

:meth:`Observer.stats` counts what it costs: informers by kind, lists, watches, events,
relists, reconnects, the objects kept and the client's requests and connections.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from jobset_core import labels as L
from jobset_core.errors import Forbidden, JobSetError, NotFound
from jobset_core.observe._informer import PAGE_SIZE, Informer, SeedList, Source
from jobset_core.observe._store import Observation, Stores
from jobset_core.observe._views import Kind, RunKey
from jobset_core.outcome import Backend

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["Observer", "Scope", "Target", "Tracked"]

log = logging.getLogger(__name__)
T = TypeVar("T")

Scope = Literal["auto", "cluster", "namespace", "run"]
SCOPES: tuple[Scope, ...] = ("auto", "cluster", "namespace", "run")

#: Kinds a run needs, by backend.
_NEEDS: dict[str, tuple[Kind, ...]] = {
    "controller": (Kind.JOBSET, Kind.JOB, Kind.POD, Kind.EVENT, Kind.WORKLOAD),
    "native": (Kind.ANCHOR, Kind.JOB, Kind.POD, Kind.EVENT),
}
#: Kinds without which a wait still reaches its verdict (from the JobSet status alone; a
#: cluster without Kueue serves no Workloads, and an identity that may not read them has the
#: JobSet and Kueue's Events on it).
_OPTIONAL = frozenset({Kind.JOB, Kind.POD, Kind.EVENT, Kind.WORKLOAD})
_WORKLOADS = L.KUEUE_JOB_UID  # the Workloads of jobs (every JobSet's among them)
_WARNINGS = "type=Warning"
_ANCHORS = f"{L.ANCHOR_LABEL}={L.ANCHOR_VALUE}"
#: Seconds a watch stays open before the server ends it and it is reopened.
WATCH_WINDOW = 600
#: Events are not in the API server's watch cache: their watches get no bookmarks, so a quiet
#: one must end (server side) before the client's silence limit calls it dead.
EVENT_WATCH_WINDOW = 120
#: Seconds a refusal that retrying cannot fix (403 on a kind in a namespace, 404 for an API
#: that is not served) is remembered once no run holds its informer: runs that come one after
#: the other in a namespace ask once in that time, not once each. A Role granted meanwhile is
#: seen when it runs out.
REFUSAL_MEMORY = 300.0


@dataclass(frozen=True)
class Target:
    """A run to track.

    Attributes:
        backend: ``controller`` (a JobSet) or ``native`` (an anchor ConfigMap).
        namespace: Its namespace.
        name: The JobSet's (and the anchor's) name.
        since: The ``resourceVersion`` the caller created the run at: nothing of the run
            existed before it, so informers made for this run alone watch from there instead
            of listing first. ``None`` when the run may be older.
        seeds: Objects the caller holds already (the created JobSet or anchor).
        uid: The JobSet's UID, when known: its Kueue Workload is selected by it (else every
            Workload of the namespace is listed and sorted to runs by owner).
    """

    backend: Backend
    namespace: str
    name: str
    since: str | None = None
    seeds: tuple[Mapping[str, Any], ...] = ()
    uid: str = ""

    @property
    def key(self) -> RunKey:
        """The run's key in the stores."""
        return (self.namespace, self.name)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        """The kinds of object the run needs."""
        return _NEEDS[self.backend]


class Tracked:
    """A waiter's handle on one tracked run (from :meth:`Observer.track`), and the block it
    is tracked for (``async with observer.track(target) as tracked``: itself, not a
    generator-based context manager, whose generator, frame and wrapper a waiting task kept
    besides)."""

    __slots__ = ("_informers", "_observer", "_waiters", "_woken", "target")

    def __init__(self, observer: Observer, target: Target) -> None:
        self.target = target
        self._observer = observer
        self._woken = True  # the first look needs no wake-up
        #: A future per wait under way (an ``asyncio.Event`` took 0.86 KiB a waiting task,
        #: its waiters' deque most of it; a wait's future, 0.15 KiB only while it waits).
        self._waiters: tuple[asyncio.Future[None], ...] = ()
        #: The informers the run joined, for the block's end.
        self._informers: Sequence[Informer] = ()

    async def __aenter__(self) -> Tracked:
        self._informers = await self._observer._join(self.target, self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._observer._leave(self.target, self, self._informers)

    @property
    def key(self) -> RunKey:
        """The run's key."""
        return self.target.key

    def observation(self) -> Observation:
        """The run as the observer sees it now."""
        run = self._observer.stores.tracked(self.key)
        seen = run.observation() if run is not None else Observation(self.key)
        forbidden = frozenset(k for k in _OPTIONAL if self.forbidden(k))
        return dataclasses.replace(seen, forbidden=forbidden) if forbidden else seen

    def problem(self) -> JobSetError | None:
        """Why the run cannot be observed (its JobSet or anchor cannot be watched), if so."""
        return self._observer.problem(self.target)

    def forbidden(self, kind: Kind) -> bool:
        """Whether this identity may not list and watch ``kind`` for the run (403): the waiter
        reads what it can instead (Kueue's Events on the JobSet for its Workload)."""
        return isinstance(self._observer.informer_problem(kind, self.target), Forbidden)

    async def changed(self, timeout: float | None) -> bool:
        """Wait until the run changed (``True``) or ``timeout`` seconds passed (``False``)."""
        if not self._woken:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters = (*self._waiters, waiter)
            # Not ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that comes
            # as the wake-up does (the waiter then waited out its whole timeout).
            try:
                if timeout is None:  # no timer to keep (a wait without a deadline)
                    await waiter
                else:
                    async with asyncio.timeout(timeout):
                        await waiter
            except TimeoutError:
                return False
            finally:
                self._waiters = tuple(w for w in self._waiters if w is not waiter)
        self._woken = False
        return True

    async def until(
        self, condition: Callable[[Observation], T | None], timeout: float | None
    ) -> T | None:
        """The one wait of the lifecycle: until ``condition`` of the run's observation gives a
        value (returned), or ``timeout`` seconds passed (``None``; ``timeout=None``: no
        limit). The condition is asked at once, then after every change."""
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            found = condition(self.observation())
            if found is not None:
                return found
            left = None if ends is None else ends - time.monotonic()
            if left is not None and left <= 0:
                return None
            await self.changed(left)

    def wake(self) -> None:
        """Make the next :meth:`changed` return at once (and every one under way)."""
        self._woken = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def remember(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        """Keep an object the waiter wrote itself (the answer to a create or patch), before
        its watch event arrives: the next observation already holds it."""
        if self._observer.stores.apply(kind, "MODIFIED", obj) is not None:
            self._observer.wake({self.key})

    def forget(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        """Drop an object the waiter deleted itself."""
        if self._observer.stores.apply(kind, "DELETED", obj) is not None:
            self._observer.wake({self.key})


class Observer:
    """Shared informers over one client (one cluster).

    Args:
        client: The API client (not closed by the observer).
        scope: How informers are shared (see the module docs).
        window: Seconds a watch stays open before it is reopened.
        page_size: Objects per list page.
    """

    def __init__(
        self,
        client: Client,
        *,
        scope: Scope = "run",
        window: int = WATCH_WINDOW,
        page_size: int = PAGE_SIZE,
    ) -> None:
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        self.client = client
        self.scope: Scope = scope
        self.stores = Stores()
        self._window = window
        self._page_size = page_size
        self._informers: dict[Source, Informer] = {}
        #: The waiters' handles of each run (a tuple: mostly one, and a set took 0.2 KiB).
        self._trackers: dict[RunKey, tuple[Tracked, ...]] = {}
        self._cluster_wide: dict[Kind, bool] = {}
        self._deciding = asyncio.Lock()
        self._noted: set[Source] = set()
        #: Informers whose last run left, closing their watches (see :meth:`_leave`).
        self._stopping: set[asyncio.Task[None]] = set()
        #: Refusals that retrying cannot fix, by (kind, namespace): when, and what.
        self._refused: dict[tuple[Kind, str | None], tuple[float, JobSetError]] = {}

    # ------------------------------------------------------------------ tracking

    def track(self, target: Target) -> Tracked:
        """Track a run for the duration of the block (``async with``)."""
        return Tracked(self, target)

    async def _join(self, target: Target, tracked: Tracked) -> list[Informer]:
        await self._decide_scopes(target.kinds)
        run = self.stores.track(target.key, target.kinds)
        self._trackers[target.key] = (*self._trackers.get(target.key, ()), tracked)
        for seed in target.seeds:
            kind = Kind.JOBSET if target.backend == "controller" else Kind.ANCHOR
            self.stores.apply(kind, "MODIFIED", seed)
        informers: list[Informer] = []
        seeds: list[tuple[Informer, Kind]] = []
        for kind in target.kinds:
            source = self._source(kind, target)
            informer = self._informers.get(source)
            if informer is None:
                informer = self._informers[source] = Informer(
                    client=self.client,
                    source=source,
                    stores=self.stores,
                    on_change=self.wake,
                    covers=functools.partial(self._covered, source),
                    window=min(self._window, EVENT_WATCH_WINDOW)
                    if kind is Kind.EVENT
                    else self._window,
                    page_size=self._page_size,
                    since=target.since,
                    seed_lists=seed_lists,
                )
                known = self._known_refusal(source)
                if known is not None:
                    informer.refuse(known)
                else:
                    informer.start()
            elif (
                informer.problem is None
                and (informer.synced or informer.since)
                and kind not in run.synced
            ):
                # Its first list is over (or it never lists), and no hold kept this run's
                # older objects: they were dropped or never seen; list them once.
                seeds.append((informer, kind))
            elif informer.problem is not None:
                # It stopped for good before this run came (a 403 or 404 for an optional
                # kind): the run has all of that kind there is to have, as the runs there
                # when it stopped do.
                self.stores.mark_synced(kind, [target.key])
            informer.holders += 1
            informers.append(informer)
        if seeds:
            await asyncio.gather(*(self._seed(i, kind, target) for i, kind in seeds))
        return informers

    async def _seed(self, informer: Informer, kind: Kind, target: Target) -> None:
        try:
            await informer.seed(target.key, (target.name, target.uid))
        except JobSetError as error:  # the informer's own list will catch up
            log.info("seeding %s for %s/%s: %s", kind.value, *target.key, error)

    async def _leave(self, target: Target, tracked: Tracked, informers: Sequence[Informer]) -> None:
        trackers = tuple(t for t in self._trackers.get(target.key, ()) if t is not tracked)
        if trackers:
            self._trackers[target.key] = trackers
        else:
            self._trackers.pop(target.key, None)
        self.stores.untrack(target.key)
        for informer in informers:
            informer.holders -= 1
            if informer.holders <= 0:
                self._informers.pop(informer.source, None)
                self._remember_refusal(informer)
                # Closing its watch is the observer's business, not the leaving waiter's:
                # awaited here, it held each verdict back by 10-55 ms (eight native runs
                # ending together, three informers each). :meth:`aclose` waits for it.
                stop = asyncio.ensure_future(informer.stop())
                self._stopping.add(stop)
                stop.add_done_callback(self._stopped)

    def _stopped(self, stop: asyncio.Task[None]) -> None:
        """An informer closed in the background: a loop that had ended in an error (a bug:
        it handles the API's) is said here, since no waiter awaits the closing."""
        self._stopping.discard(stop)
        if not stop.cancelled() and stop.exception() is not None:
            log.warning("an informer ended in an error: %r", stop.exception())

    def _remember_refusal(self, informer: Informer) -> None:
        problem = informer.problem
        if isinstance(problem, (Forbidden, NotFound)):
            where = (informer.source.kind, informer.source.namespace)
            self._refused[where] = (time.monotonic(), problem)

    def _known_refusal(self, source: Source) -> JobSetError | None:
        """A refusal of ``source``'s kind in its namespace (or, for a 404, anywhere) the
        observer met within :data:`REFUSAL_MEMORY`."""
        now = time.monotonic()
        for where in ((source.kind, source.namespace), (source.kind, None)):
            found = self._refused.get(where)
            if found is None:
                continue
            at, problem = found
            if now - at > REFUSAL_MEMORY:
                del self._refused[where]
            elif where[1] == source.namespace or isinstance(problem, NotFound):
                return problem
        return None

    def wake(self, keys: Iterable[RunKey]) -> None:
        """Wake the waiters of these runs."""
        for key in keys:
            for tracked in self._trackers.get(key, ()):
                tracked.wake()

    def informer_problem(self, kind: Kind, target: Target) -> JobSetError | None:
        """Why the informer of ``kind`` for the run stopped, if it did."""
        if kind not in target.kinds:
            return None
        informer = self._informers.get(self._source(kind, target))
        return informer.problem if informer is not None else None

    def problem(self, target: Target) -> JobSetError | None:
        """A failure that keeps the run from being observed, if any (an informer of its
        JobSet or anchor that cannot watch); optional kinds are only logged."""
        for kind in target.kinds:
            informer = self._informers.get(self._source(kind, target))
            if informer is None or informer.problem is None:
                continue
            if kind not in _OPTIONAL:
                return informer.problem
        return None

    async def snapshot(self, target: Target) -> Observation:
        """The run as one list of each kind it needs shows it now, without watching (for a
        one-off look: ``jobsetctl status``, a sensor's reschedule poke)."""
        stores = Stores()
        stores.track(target.key, target.kinds)
        forbidden: set[Kind] = set()
        for kind in target.kinds:
            try:
                pages = [
                    await self.client.list(
                        kind.resource,
                        namespace=target.namespace,
                        label_selector=label,
                        field_selector=field,
                    )
                    for label, field, _ in seed_lists(kind, [(target.name, target.uid)])
                ]
            except JobSetError as error:
                if kind not in _OPTIONAL:
                    raise
                if isinstance(error, Forbidden):
                    forbidden.add(kind)
                stores.mark_synced(kind, [target.key])
                continue
            for page in pages:
                stores.relist(kind, page.items, page.resource_version, [target.key])
        run = stores.tracked(target.key)
        seen = run.observation() if run is not None else Observation(target.key)
        return dataclasses.replace(seen, forbidden=frozenset(forbidden))

    async def aclose(self) -> None:
        """Stop every informer (and wait for those already stopping)."""
        informers, self._informers = list(self._informers.values()), {}
        await asyncio.gather(*(i.stop() for i in informers), *list(self._stopping))

    # ------------------------------------------------------------------ scopes

    async def _decide_scopes(self, kinds: Iterable[Kind]) -> None:
        if self.scope != "auto":
            return
        missing = [k for k in kinds if k not in self._cluster_wide]
        if not missing:
            return
        async with self._deciding:
            for kind in [k for k in missing if k not in self._cluster_wide]:
                resource = kind.resource
                try:
                    allowed = all(
                        await asyncio.gather(
                            self.client.may("list", resource, namespace=None),
                            self.client.may("watch", resource, namespace=None),
                        )
                    )
                except JobSetError as error:
                    log.info("cannot ask whether %s may be watched cluster-wide: %s", kind, error)
                    allowed = False
                self._cluster_wide[kind] = allowed

    def scope_of(self, kind: Kind) -> Literal["cluster", "namespace", "run"]:
        """Where informers of ``kind`` are shared."""
        if self.scope == "auto":
            return "cluster" if self._cluster_wide.get(kind) else "namespace"
        return self.scope

    def _source(self, kind: Kind, target: Target) -> Source:
        scope = self.scope_of(kind)
        if kind is Kind.EVENT:  # per namespace at least: a pod's events do not name the run
            namespace = None if scope == "cluster" else target.namespace
            return Source(kind, namespace, field_selector=_WARNINGS)
        if scope == "run":
            label, field = _run_selectors(kind, target.name, target.uid)
            return Source(kind, target.namespace, label, field, run=target.key)
        namespace = None if scope == "cluster" else target.namespace
        return Source(kind, namespace, _shared_label(kind))

    def _covered(self, source: Source) -> list[RunKey]:
        return [key for key in self.stores.runs() if source.covers(key)]

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        """What the observer costs right now: informers, their requests, kept objects."""
        by_kind: dict[str, int] = {}
        totals = {"lists": 0, "pages": 0, "watches": 0, "events": 0, "relists": 0}
        totals["reconnects"] = 0
        for informer in self._informers.values():
            by_kind[informer.source.kind.value] = by_kind.get(informer.source.kind.value, 0) + 1
            for name, value in informer.stats.snapshot().items():
                totals[name] += value
        return {
            "scope": self.scope,
            "cluster_wide": {k.value: v for k, v in sorted(self._cluster_wide.items(), key=str)},
            "informers": dict(sorted(by_kind.items())),
            **totals,
            "kept": self.stores.size,
            "client": self.client.stats.snapshot(),
        }


def _shared_label(kind: Kind) -> str | None:
    if kind in (Kind.JOB, Kind.POD):
        return L.JOBSET_NAME  # every JobSet child, and nothing else
    if kind is Kind.ANCHOR:
        return _ANCHORS
    if kind is Kind.WORKLOAD:
        return _WORKLOADS
    return None


def _event_lists(name: str) -> tuple[str, str]:
    """The field selectors of a run's Warning Events listed once (a one-off look, a run that
    joins a running informer): those about its JobSet or anchor, and the Job controller's
    refusals to create pods (about its Jobs, whose names are not the run's: every such Event
    of the namespace is listed, the stores keep those of the run's Jobs)."""
    return (
        f"involvedObject.name={name},{_WARNINGS}",
        f"involvedObject.kind=Job,reason=FailedCreate,{_WARNINGS}",
    )


def seed_lists(kind: Kind, runs: Sequence[tuple[str, str]]) -> tuple[SeedList, ...]:
    """The lists that hold every object of ``kind`` of these runs (name, UID): one run's own
    (as a one-off look lists them), or, for several, lists for all: their Jobs and pods by
    sets of names, their Workloads by sets of UIDs (:data:`SEED_NAMES` a list), and every
    JobSet, anchor or Warning Event in the informer's scope (a field selector cannot name
    several objects; the stores keep what the runs own). Each list says the names of the
    runs it holds whole.

    Examples:
        >>> seed_lists(Kind.POD, [("a", "1"), ("b", "2")])
        (('jobset.sigs.k8s.io/jobset-name in (a,b)', None, ('a', 'b')),)
        >>> seed_lists(Kind.JOBSET, [("a", "1")])
        ((None, 'metadata.name=a', ('a',)),)
    """
    names = tuple(sorted({name for name, _ in runs}))
    if len(runs) == 1:
        name, uid = runs[0]
        label, field = _run_selectors(kind, name, uid)
        fields = _event_lists(name) if kind is Kind.EVENT else (field,)
        return tuple((label, f, names) for f in fields)
    if kind in (Kind.JOB, Kind.POD):
        return tuple(
            (f"{L.JOBSET_NAME} in ({','.join(part)})", None, part) for part in _sets(names)
        )
    if kind is Kind.ANCHOR:
        return ((_ANCHORS, None, names),)
    if kind is Kind.JOBSET:
        return ((None, None, names),)
    if kind is Kind.WORKLOAD:
        uid_of = dict(runs)
        if any(not uid for _, uid in runs):  # a run without a UID yet: every job's Workload
            return ((_WORKLOADS, None, names),)
        return tuple(
            (f"{_WORKLOADS} in ({','.join(sorted(uid_of[n] for n in part))})", None, part)
            for part in _sets(names)
        )
    return ((None, _WARNINGS, names),)


#: Values in one set-based selector of a seed list (it goes in the URL).
SEED_NAMES = 100


def _sets(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [names[i : i + SEED_NAMES] for i in range(0, len(names), SEED_NAMES)]


def _run_selectors(kind: Kind, name: str, uid: str = "") -> tuple[str | None, str | None]:
    if kind in (Kind.JOB, Kind.POD):
        return f"{L.JOBSET_NAME}={name}", None
    if kind is Kind.ANCHOR:
        return _ANCHORS, f"metadata.name={name}"
    if kind is Kind.JOBSET:
        return None, f"metadata.name={name}"
    if kind is Kind.WORKLOAD:  # named by Kueue (jobset-<name>-<hash>): by its job-uid label
        return (f"{_WORKLOADS}={uid}" if uid else _WORKLOADS), None
    return None, _WARNINGS
