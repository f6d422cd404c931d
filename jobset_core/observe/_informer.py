"""One list+watch loop: keeps one kind of object, in one scope, current in the stores.

The loop lists (in pages, so a big namespace never lands in memory at once; what is kept of a
page is made as each object is decoded, before the next one is), then watches from the list's
``resourceVersion`` with bookmarks. A watch that ends (its server-side timeout) is
reopened where it stopped; a 410 Gone lists again; a dropped or refused connection reconnects
with exponential backoff and jitter. An informer created for a run its caller has just
created may skip the first list and watch from that creation's ``resourceVersion``: nothing of
the run existed before it.

A failure that retrying cannot fix (403 Forbidden, 404 for an API that is not served, a 401
that survived the client's credential refresh, credentials that cannot be obtained) is kept
in :attr:`Informer.problem` for the waiters to report; for the kinds a wait can do without
(Events, Jobs, pods), the observer only notes it and the waits go on with what remains.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobset_core.client import EventType
from jobset_core.errors import (
    ConfigError,
    Forbidden,
    Gone,
    Invalid,
    JobSetError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
)
from jobset_core.observe._store import Scope, Stores
from jobset_core.observe._views import Kind, RunKey, trim

if TYPE_CHECKING:
    from jobset_core.client import Client, WatchEvent

__all__ = [
    "HOLD_SECONDS",
    "PAGE_SIZE",
    "SEED_INTERVAL",
    "Informer",
    "InformerStats",
    "SeedList",
    "SeedLists",
    "Source",
    "backoff",
]

log = logging.getLogger(__name__)

_TRANSIENT = (Unreachable, ServerError, TooManyRequests)
_PERMANENT = (Forbidden, NotFound, Invalid, Unauthorized, ConfigError)
_BACKOFF_BASE = 0.5
_BACKOFF_MAX = 30.0
_HEALTHY = 30.0
#: How long after its list a shared informer keeps holding every object of its scope (see
#: :meth:`Informer._list`): a triggerer's start, where its triggers join over seconds.
HOLD_SECONDS = 30.0
#: Seed rounds of one informer start at most this often: joiners that come in a burst (a
#: triggerer's start) gather into a few rounds; a lone joiner waits for nothing.
SEED_INTERVAL = 0.5
#: Objects per list page. Smaller pages left less of a page's memory behind (before its
#: objects were decoded one at a time, see :func:`_trimmer`) but cost start-up: each page
#: waits its turn in the API server's queues, and a triggerer starting 1,000 triggers beside
#: others waited 3.6-6.5 s with pages of 100 against 2.9-3.5 s with 500.
PAGE_SIZE = 500
#: One list of a seed: its label and field selectors, and the names of the runs whose objects
#: of the kind it holds, all of them.
SeedList = tuple[str | None, str | None, tuple[str, ...]]
#: The lists that hold every object of a kind of the given runs (name, UID).
SeedLists = Callable[[Kind, Sequence[tuple[str, str]]], Sequence[SeedList]]


def backoff(failures: int, rand: float) -> float:
    """Seconds before reconnect number ``failures`` (1-based): 0.5 s doubling up to 30 s,
    each between 50 % and 150 % of that (``rand`` in ``[0, 1)``), so many informers that lost
    the same server do not come back in step."""
    base = min(_BACKOFF_MAX, _BACKOFF_BASE * 2 ** max(0, failures - 1))
    return float(base * (0.5 + rand))


@dataclass(frozen=True)
class Source:
    """What one informer lists and watches.

    Attributes:
        kind: The kind of object.
        namespace: The namespace, or ``None`` for every namespace.
        label_selector: Rendered label selector, if any.
        field_selector: Rendered field selector, if any.
        run: The one run this informer serves (its selectors name it), or ``None`` when it
            serves every tracked run of its namespace (or of the cluster).
    """

    kind: Kind
    namespace: str | None
    label_selector: str | None = None
    field_selector: str | None = None
    run: RunKey | None = None

    def covers(self, key: RunKey) -> bool:
        """Whether this informer sees the objects of run ``key``."""
        if self.run is not None:
            return self.run == key
        return self.namespace is None or self.namespace == key[0]

    @property
    def label(self) -> str:
        """A short description for logs."""
        where = self.namespace if self.namespace is not None else "*"
        sel = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.kind.value}@{where}" + (f"[{sel}]" if sel else "")


def _keeper(
    kind: Kind, stores: Stores, listed: dict[RunKey, set[str]], changed: set[RunKey]
) -> Callable[[Any], None]:
    """What a list does with each object as it is decoded (:meth:`Client.list`'s ``each``):
    the stores keep it (trimmed, then packed) when they keep it at all (``listed`` and
    ``changed`` as :meth:`Stores.relist_page`), and it is let go before the next one is
    decoded.

    Nothing of a page but what the stores keep outlives its object's decoding. A page's
    trimmed objects, held until the page was applied, were the start's transients that the
    runs' lasting objects were laid out between: 1,000 triggers starting at once left 8-12
    KiB a waiting task of free space in the interpreter's allocator that no one else could
    use."""

    def each(obj: Any) -> None:
        if stores.keeps(kind, obj):
            changed.update(stores.relist_page(kind, (trim(kind, obj),), listed, trimmed=True))

    return each


def _bare(error: JobSetError) -> JobSetError:
    """``error`` (and the errors it chains) without its traceback: a failure kept for good is
    a verdict, said by its message. Its traceback held the frames of the request that failed
    (the answer, the stream, the client's locals): with an identity bound to 100 namespaces
    that may not read Kueue's Workloads, 100 kept 403s held 800 frames and their answers."""
    seen: BaseException | None = error
    met: set[int] = set()
    while seen is not None and id(seen) not in met:
        met.add(id(seen))
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__
    return error


@dataclass(slots=True)
class InformerStats:
    """What one informer did (read at any time).

    Attributes:
        lists: Complete lists (each may take several pages).
        pages: List requests.
        watches: Watch requests opened.
        events: Watch events received (bookmarks excluded).
        relists: Lists forced by 410 Gone.
        reconnects: Reconnects after a dropped or refused connection.
    """

    lists: int = 0
    pages: int = 0
    watches: int = 0
    events: int = 0
    relists: int = 0
    reconnects: int = 0

    def snapshot(self) -> dict[str, int]:
        """A plain copy."""
        return dataclasses.asdict(self)


@dataclass(slots=True)
class Informer:
    """The loop of one :class:`Source` (start it with :meth:`start`).

    Attributes:
        source: What it lists and watches.
        synced: Set once the first list (or the start from a known version) is in the stores.
        problem: A failure that retrying cannot fix, when one happened.
        holders: How many tracked runs use it (the observer stops it at zero).
    """

    client: Client
    source: Source
    stores: Stores
    on_change: Callable[[set[RunKey]], None]
    covers: Callable[[], list[RunKey]]
    #: How the objects of given runs are listed (a seed: a run tracked after the hold ended).
    seed_lists: SeedLists
    window: int = 600
    page_size: int = PAGE_SIZE
    since: str | None = None
    rand: Callable[[], float] = random.random
    stats: InformerStats = field(default_factory=InformerStats)
    synced: bool = False
    problem: JobSetError | None = None
    holders: int = 0
    _task: asyncio.Task[None] | None = None
    _version: str | None = None  # the last resourceVersion seen: where a watch resumes
    #: Runs waiting for a seed list, and the lock of the one seed list in flight.
    _seeds: dict[RunKey, tuple[str, str]] = field(default_factory=dict)
    _seeding: asyncio.Lock | None = None  # made by the first seed (most informers have none)
    _seeded_at: float = -SEED_INTERVAL
    _release: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start the loop on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"informer {self.source.label}"
            )

    async def stop(self) -> None:
        """Stop the loop (its open watch is closed, its hold released)."""
        self._unhold()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def running(self) -> bool:
        """Whether the loop runs."""
        return self._task is not None and not self._task.done()

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        self._version = self.since
        if self._version:
            self._changed(self.stores.mark_synced(self.source.kind, self.covers()))
            self.synced = True
        failures = 0
        while True:
            opened = time.monotonic()
            try:
                if not self._version:
                    await self._list()
                    self.synced = True
                await self._watch()
                failures = 0
            except Gone:
                self.stats.relists += 1
                self._version = None
            except _PERMANENT as error:
                self._fail(error)
                return
            except _TRANSIENT as error:
                # A watch that lived a while before it broke starts the backoff over.
                failures = 1 if time.monotonic() - opened > _HEALTHY else failures + 1
                self.stats.reconnects += 1
                delay = backoff(failures, self.rand())
                log.info("watch of %s: %s; again in %.1fs", self.source.label, error, delay)
                await asyncio.sleep(delay)

    def refuse(self, error: JobSetError) -> None:
        """Stop for good before the first request, with a failure the observer knows already
        for this kind and namespace (a 403 or 404 a moment ago): as if the list had failed."""
        self._fail(error)

    @property
    def _refusal_expected(self) -> bool:
        """A cluster without Kueue serves no Workloads (404), and an identity may not read
        them (403, without the optional Role; said once by the waiter): expected, neither
        retried nor worth a warning."""
        return self.source.kind is Kind.WORKLOAD

    def _fail(self, error: JobSetError) -> None:
        self._unhold()
        self.problem = _bare(error)
        expected = self._refusal_expected and isinstance(error, (NotFound, Forbidden))
        (log.debug if expected else log.warning)("cannot watch %s: %s", self.source.label, error)
        self.synced = True
        covers = self.covers()
        self._changed(self.stores.mark_synced(self.source.kind, covers) | set(covers))

    def _changed(self, keys: set[RunKey]) -> None:
        if keys:
            self.on_change(keys)

    @property
    def _scope(self) -> Scope | None:
        """What a shared informer holds (``None``: it serves one run)."""
        source = self.source
        return None if source.run is not None else (source.kind, source.namespace)

    async def _list(self) -> None:
        """List everything the informer sees, page by page; the watch resumes from the list's
        version (a failure lists again from the start).

        A shared informer holds its scope from the list's start (:meth:`Stores.hold`): the
        objects of runs nobody tracks are kept too, so a run tracked while the list is under
        way, or for :data:`HOLD_SECONDS` after it, takes its objects over and needs no list of
        its own. (Listing for the runs that joined meanwhile, while a thousand triggers join
        one by one, cost 20 lists per namespace at a triggerer's start; listing the whole kind
        again for them cost 150 lists and 10 s of JSON decoding.) A run that joins later has
        its objects listed once (:meth:`seed`)."""
        source, scope = self.source, self._scope
        if scope is not None:
            self._unhold()
            self.stores.hold(scope)

        def covers() -> list[RunKey]:
            held = self.stores.held(scope) if scope is not None else []
            return [*self.covers(), *held]

        version = await self._list_pages(source.label_selector, source.field_selector, covers)
        self.stats.lists += 1
        if scope is not None:
            self._changed(self.stores.listed(scope))
            loop = asyncio.get_running_loop()
            self._release = loop.call_later(HOLD_SECONDS, self._unhold)
        self._version = version

    def _unhold(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release.cancel()
        scope = self._scope
        if scope is not None:
            self.stores.release(scope)

    async def _list_pages(
        self,
        label_selector: str | None,
        field_selector: str | None,
        covers: Callable[[], Iterable[RunKey]],
    ) -> str:
        """One list, in pages, into the stores; complete for the runs ``covers`` names at its
        end. Returns its resourceVersion."""
        kind = self.source.kind
        listed: dict[RunKey, set[str]] = {}
        changed: set[RunKey] = set()
        each = _keeper(kind, self.stores, listed, changed)
        version, token = "", None
        while True:
            page = await self.client.list(
                kind.resource,
                namespace=self.source.namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=self.page_size,
                continue_=token,
                optional=self._refusal_expected,
                each=each,
            )
            self.stats.pages += 1
            version = version or page.resource_version
            token = page.continue_ or None
            self._changed(set(changed))
            changed.clear()
            if token is None:
                break
        self._changed(self.stores.relist_end(kind, listed, version, covers()))
        return version

    async def _watch(self) -> None:
        source = self.source
        window = int(self.window * (0.9 + 0.2 * self.rand()))  # spread the reopenings
        self.stats.watches += 1
        stream = self.client.watch(
            source.kind.resource,
            namespace=source.namespace,
            resource_version=self._version,
            label_selector=source.label_selector,
            field_selector=source.field_selector,
            timeout_seconds=max(1, window),
        )
        try:
            async for event in stream:
                self._take(event)
                del event  # not kept while the watch is silent (a triggerer holds 400)
        finally:
            close: Any = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def _take(self, event: WatchEvent[dict[str, Any]]) -> None:
        """One watch event into the stores."""
        if event.resource_version:
            self._version = event.resource_version
        if event.type is EventType.BOOKMARK:
            return
        self.stats.events += 1
        changed = self.stores.apply(self.source.kind, event.type.value, event.object)
        if changed is not None:
            self.on_change({changed})

    # ------------------------------------------------------------------ seeding

    async def seed(self, key: RunKey, run: tuple[str, str]) -> None:
        """List the objects of one run that joined after this informer's hold ended (the
        informer dropped them: nobody tracked them), or joined an informer that never lists.

        Runs that join while a seed list is in flight share the next one: the first of them
        to get the turn lists for all (:attr:`seed_lists` says how, for one run or several),
        so a burst of joiners costs a list per round, not one per run. A round that fails
        puts the others' runs back for the next; its error is the caller's whose round it
        was.

        Args:
            key: The run.
            run: Its name and UID (what the selectors name).
        """
        self._seeds[key] = run
        if self._seeding is None:
            self._seeding = asyncio.Lock()
        async with self._seeding:
            if key not in self._seeds:
                return  # an earlier round listed it
            await self._pace()
            batch, self._seeds = self._seeds, {}
            try:
                await self._seed_round(batch)
            except BaseException:
                for other, ref in batch.items():
                    if other != key:
                        self._seeds.setdefault(other, ref)
                raise

    async def _pace(self) -> None:
        """Wait until :data:`SEED_INTERVAL` after the last round began (joiners gather)."""
        wait = self._seeded_at + SEED_INTERVAL - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._seeded_at = time.monotonic()

    async def _seed_round(self, batch: dict[RunKey, tuple[str, str]]) -> None:
        """List the objects of these runs, in the informer's scope (a cluster-wide informer
        lists them across namespaces: what other namespaces add, the stores leave)."""
        runs = list(batch.values())
        for label_selector, field_selector, names in self.seed_lists(self.source.kind, runs):
            held = [key for key in batch if key[1] in names]
            await self._list_pages(label_selector, field_selector, functools.partial(list, held))
