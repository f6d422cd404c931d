"""The observer's memory: the objects of the runs someone tracks, kept current (pure).

Informers hand every list page and watch event to :meth:`Stores.apply` / :meth:`Stores.relist`;
an object that belongs to no tracked run is dropped at once, so a watch over a busy namespace
(or the whole cluster) costs memory only for the runs being waited for. What a waiter reads is
an :class:`Observation`: an immutable snapshot of one run.

A hold is the one exception: while a shared informer holds its kind in its scope
(:meth:`Stores.hold`, from its list on, for a while after it), the objects of runs nobody
tracks are kept too, current, and a run tracked meanwhile takes them over: it needs no list of
its own (a triggerer's start, where a thousand runs join their informers over seconds).

Ordering: a list and a watch can overlap, and a watch can lag behind a list taken later. Every
write goes through :func:`~jobset_core.observe._views.newer` (an older ``resourceVersion`` never
replaces a newer one), and a deletion leaves a tombstone so a list that was taken before the
deletion cannot bring the object back.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jobset_core.labels import KUEUE_JOB_UID
from jobset_core.observe._views import (
    Kind,
    Packed,
    RunKey,
    event_subject,
    newer,
    object_key,
    pack,
    run_of,
    trim,
    unpack,
)

__all__ = [
    "DECODED_FROM",
    "EVENTS_PER_RUN",
    "GONE_JOBS",
    "ORPHAN_EVENTS",
    "Observation",
    "RunObjects",
    "Scope",
    "Stores",
]

#: Warning Events kept per run (the newest; older ones are dropped).
EVENTS_PER_RUN = 32
#: Warning Events about a pod or Job not known yet, kept until it is (the newest): a list of
#: Events can arrive before the list of the pods they are about.
ORPHAN_EVENTS = 256
#: Child Jobs kept per run after their deletion, as the deletion showed them (the newest).
GONE_JOBS = 16
#: Runs of this many children (Jobs, pods, Workloads) or more keep their objects read back
#: from one snapshot to the next (see :class:`RunObjects`).
DECODED_FROM = 32

Change = Literal["ADDED", "MODIFIED", "DELETED"]
Obj = dict[str, Any]
#: Where a shared informer sees a kind: ``(kind, namespace)``, ``None`` for every namespace.
Scope = tuple[Kind, "str | None"]


def _rv(obj: Mapping[str, Any]) -> int | None:
    meta = obj.get("metadata") or {}
    try:
        return int(str(meta.get("resourceVersion")))
    except ValueError:
        return None


@dataclass(frozen=True)
class Observation:
    """One run as the observer sees it now.

    Attributes:
        key: ``(namespace, name)`` of the run.
        jobset: The JobSet (trimmed: no pod templates), when the run is a controller run and
            the JobSet exists.
        anchor: The native anchor ConfigMap, when the run is a native one and it exists.
        jobs: The run's child Jobs (trimmed), by name.
        pods: The run's pods (trimmed), by name.
        events: The newest Warning Events about the run, its Jobs and pods, oldest first.
        workloads: Kueue's Workloads of the run (trimmed): of its JobSet, and of an earlier
            namesake until they are gone (see :meth:`workload_of`).
        forbidden: Kinds this identity may not list and watch for the run (403): a waiter
            reads what it can instead.
        synced: Every kind this run needs has been listed at least once (before that, a
            missing object only means "not seen yet").
        version: A counter that grows with every change of this run.
        gone_jobs: The run's child Jobs deleted while it was tracked, as their deletion
            showed them (the newest :data:`GONE_JOBS`, oldest first): a restart deletes the
            failed Job, and the failure and the deletion can both come between two looks.
    """

    key: RunKey
    jobset: Obj | None = None
    anchor: Obj | None = None
    jobs: tuple[Obj, ...] = ()
    pods: tuple[Obj, ...] = ()
    events: tuple[Obj, ...] = ()
    synced: bool = False
    version: int = 0
    workloads: tuple[Obj, ...] = ()
    forbidden: frozenset[Kind] = frozenset()
    gone_jobs: tuple[Obj, ...] = ()

    def workload_of(self, uid: str) -> Obj | None:
        """The Workload of the JobSet with this UID (Kueue labels it with the UID)."""
        for workload in self.workloads:
            labels = (workload.get("metadata") or {}).get("labels") or {}
            if uid and labels.get(KUEUE_JOB_UID) == uid:
                return workload
        return None


#: One frozenset per combination of kinds, shared by every run: a set of five kinds takes
#: 728 bytes, and each run held three (its kinds, those listed, and a copy of those in the
#: key of its last snapshot).
_KIND_SETS: dict[frozenset[Kind], frozenset[Kind]] = {}


def kind_set(kinds: Iterable[Kind]) -> frozenset[Kind]:
    """The shared frozenset of these kinds (pure, but for the cache of the 64 there are)."""
    found = frozenset(kinds)
    return _KIND_SETS.setdefault(found, found)


_NO_KINDS: frozenset[Kind] = frozenset()


class RunObjects:
    """What is kept of one tracked run (mutable; see :class:`Observation` for a snapshot).

    Every object is kept packed (:func:`~jobset_core.observe._views.pack`) and read back
    for a snapshot only: between two looks, a waiting run holds its objects' text. A run of
    :data:`DECODED_FROM` children or more also keeps what it read back, by packed object, so
    a snapshot reads back only what changed since the last: a run of 1,000 pods read them all
    back (15 ms) at each change of one of them, and read back the one it was changing to
    order its versions.

    Lean, as a triggerer holds a thousand: slots, one dict of children by ``(kind, name)``,
    and the Events, deleted Jobs and tombstones made when there is one. A waiting run of a
    JobSet, a Job and a pod holds 0.6 KiB here (its text aside), where a dataclass with a
    dict per kind held 2.1 KiB."""

    __slots__ = (
        "_decoded",
        "_snapshot",
        "anchor",
        "children",
        "events",
        "gone_jobs",
        "holders",
        "jobset",
        "key",
        "kinds",
        "synced",
        "tombstones",
        "version",
    )

    def __init__(self, key: RunKey, kinds: frozenset[Kind]) -> None:
        self.key = key
        self.kinds = kinds
        self.holders = 0
        #: The kinds listed (whole) for this run.
        self.synced: frozenset[Kind] = _NO_KINDS
        #: Counts every change (of an object, or of :attr:`synced`).
        self.version = 0
        self.jobset: Packed | None = None
        self.anchor: Packed | None = None
        self.children: dict[tuple[Kind, str], Packed] = {}
        #: Warning Events by name, oldest first (``None``: none yet).
        self.events: dict[str, Packed] | None = None
        #: Child Jobs deleted, by name, oldest first (``None``: none yet).
        self.gone_jobs: dict[str, Packed] | None = None
        #: The resourceVersion of each deletion seen (``None``: none yet).
        self.tombstones: dict[tuple[Kind, str], int] | None = None
        #: The last snapshot while someone holds it (its version and ``synced`` say whether
        #: it is still current): the looks of one change (a waiter's, its log follower's)
        #: read the objects back once; once every looker let it go, only the text stays.
        self._snapshot: weakref.ref[Observation] | None = None
        #: A big run's children as read back, by the identity of their packed text (those
        #: replaced since are forgotten once they are as many as those kept).
        self._decoded: dict[int, tuple[Packed, Obj]] | None = None

    # -------------------------------------------------------------- what is kept

    def head(self, kind: Kind) -> Packed | None:
        """The run's JobSet or anchor, as kept."""
        return self.jobset if kind is Kind.JOBSET else self.anchor

    def set_head(self, kind: Kind, text: Packed | None) -> None:
        if kind is Kind.JOBSET:
            self.jobset = text
        else:
            self.anchor = text

    def names(self, kind: Kind) -> list[str]:
        """The names of the run's children of ``kind``."""
        return [name for k, name in self.children if k is kind]

    def texts(self) -> list[Packed]:
        """Everything kept, as text (heads, children, Events, deleted Jobs)."""
        found = [t for t in (self.jobset, self.anchor) if t is not None]
        found += self.children.values()
        for more in (self.events, self.gone_jobs):
            found += (more or {}).values()
        return found

    def tombstone(self, kind: Kind, name: str) -> int | None:
        return None if self.tombstones is None else self.tombstones.get((kind, name))

    def bury(self, kind: Kind, name: str, version: int) -> None:
        """Remember a deletion at ``version`` (a list older than it cannot undo it)."""
        if self.tombstones is None:
            self.tombstones = {}
        found = self.tombstones.get((kind, name))
        self.tombstones[(kind, name)] = version if found is None else max(version, found)

    def read(self, text: Packed, *, keep: bool = False) -> Obj:
        """One of the run's kept objects, read back (a big run's, once per version:
        ``keep`` adds what had to be read back to what it keeps)."""
        decoded = self._decoded
        if decoded is not None:
            hit = decoded.get(id(text))
            if hit is not None and hit[0] is text:
                return hit[1]
        obj = unpack(text)
        if keep and decoded is not None:
            decoded[id(text)] = (text, obj)
        return obj

    def keep_only(self, kinds: Iterable[Kind]) -> list[tuple[Kind, str]]:
        """Forget the objects of every other kind.

        Returns:
            The children forgotten, as ``(kind, name)``.
        """
        kept = frozenset(kinds)
        for kind in (Kind.JOBSET, Kind.ANCHOR):
            if kind not in kept:
                self.set_head(kind, None)
        dropped = [key for key in self.children if key[0] not in kept]
        for key in dropped:
            del self.children[key]
        if Kind.JOB not in kept:
            self.gone_jobs = None
        if Kind.EVENT not in kept:
            self.events = None
        if self.tombstones is not None:
            self.tombstones = {k: v for k, v in self.tombstones.items() if k[0] in kept} or None
        return dropped

    def take_over(self, held: RunObjects) -> None:
        """Keep what ``held`` (a hold's copy of this run) kept."""
        self.jobset, self.anchor, self.children = held.jobset, held.anchor, held.children
        self.events, self.gone_jobs, self.tombstones = held.events, held.gone_jobs, held.tombstones

    @property
    def empty(self) -> bool:
        """Whether nothing is kept."""
        return not (self.jobset or self.anchor or self.events or self.gone_jobs or self.children)

    def observation(self) -> Observation:
        """An immutable snapshot (the last one again while nothing changed: every change
        counts up :attr:`version`)."""
        if self._snapshot is not None:
            held = self._snapshot()
            if (
                held is not None
                and held.version == self.version
                and held.synced == (self.kinds <= self.synced)
            ):
                return held
        snapshot = self._observe()
        self._snapshot = weakref.ref(snapshot)
        return snapshot

    def _observe(self) -> Observation:
        count = len(self.children)
        big = count >= DECODED_FROM
        if not big:
            self._decoded = None
        elif self._decoded is None:
            self._decoded = {}
        by_kind: dict[Kind, list[tuple[str, Packed]]] = {}
        for (kind, name), text in self.children.items():
            by_kind.setdefault(kind, []).append((name, text))

        def children(kind: Kind) -> tuple[Obj, ...]:
            items = sorted(by_kind.get(kind, ()))
            return tuple(self.read(text, keep=True) for _, text in items)

        jobset, anchor = self.jobset, self.anchor
        seen = Observation(
            key=self.key,
            jobset=unpack(jobset) if jobset is not None else None,
            anchor=unpack(anchor) if anchor is not None else None,
            jobs=children(Kind.JOB),
            pods=children(Kind.POD),
            events=tuple(unpack(text) for text in (self.events or {}).values()),
            synced=self.kinds <= self.synced,
            version=self.version,
            workloads=children(Kind.WORKLOAD),
            gone_jobs=tuple(unpack(text) for text in (self.gone_jobs or {}).values()),
        )
        cache = self._decoded
        if cache is not None and len(cache) > 2 * count:  # forget what is no longer kept
            kept = self.children.values()
            self._decoded = {id(text): cache[id(text)] for text in kept if id(text) in cache}
        return seen


class Stores:
    """The objects of every tracked run, fed by informers.

    Args:
        events_per_run: How many Warning Events to keep per run.
    """

    def __init__(self, events_per_run: int = EVENTS_PER_RUN) -> None:
        self._runs: dict[RunKey, RunObjects] = {}
        self._owners: dict[tuple[Kind, str, str], RunKey] = {}
        self._events_per_run = events_per_run
        self._orphans: OrderedDict[tuple[Kind, str, str, str], Packed] = OrderedDict()
        #: Scopes held, and whether their list is over (every object in scope is kept).
        self._holds: dict[Scope, bool] = {}
        #: What holds keep of runs nobody tracks.
        self._held: dict[RunKey, RunObjects] = {}

    # ------------------------------------------------------------------ interest

    def track(self, key: RunKey, kinds: Iterable[Kind]) -> RunObjects:
        """Start (or join) keeping the objects of ``key``. A run nobody tracked yet takes
        over what holds kept of it; a kind whose hold has listed its scope is known at once."""
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = RunObjects(key, kind_set(kinds))
            self._take_held(run)
        else:
            run.kinds = kind_set(run.kinds | frozenset(kinds))
        run.holders += 1
        return run

    def _take_held(self, run: RunObjects) -> None:
        """A held run's ``kinds`` are those it was held whole for since its hold began."""
        held = self._held.pop(run.key, None)
        holding = {kind: self._holding(kind, run.key) for kind in run.kinds}
        usable = {
            kind
            for kind, state in holding.items()
            if state is not None and (held is None or kind in held.kinds)
        }
        if held is not None:
            self._keep_only(held, usable)
            run.take_over(held)
        run.synced = kind_set(kind for kind in usable if holding[kind])

    def untrack(self, key: RunKey) -> bool:
        """Stop keeping ``key`` for one holder; ``True`` when nobody holds it any more (its
        objects are forgotten, but for the kinds a hold keeps)."""
        run = self._runs.get(key)
        if run is None:
            return True
        run.holders -= 1
        if run.holders > 0:
            return False
        del self._runs[key]
        held = [kind for kind in run.kinds if self._holding(kind, key) is not None]
        self._keep_only(run, held)
        if held:
            run.kinds, run.synced, run.holders = kind_set(held), kind_set(()), 0
            self._held[key] = run
        if not self._runs and not self._holds:
            self._orphans.clear()
        return True

    def _keep_only(self, run: RunObjects, kinds: Iterable[Kind]) -> None:
        """Forget a run's objects of every other kind (and the owner of each dropped child)."""
        for kind, name in run.keep_only(kinds):
            self._owners.pop((kind, run.key[0], name), None)

    # ------------------------------------------------------------------ holds

    def hold(self, scope: Scope) -> None:
        """Keep every object of a kind in a scope from now on, tracked or not, until
        :meth:`release` (an informer's list begins). A hold already there lists again."""
        self._holds[scope] = False

    def held(self, scope: Scope) -> list[RunKey]:
        """The untracked runs a hold keeps objects of."""
        kind, namespace = scope
        return [
            key
            for key in self._held
            if namespace is None or key[0] == namespace
            if self._holding(kind, key) is not None
        ]

    def listed(self, scope: Scope) -> set[RunKey]:
        """A held scope was listed whole: the runs tracked in it know its kind from now on.

        Returns:
            The tracked runs that changed.
        """
        if scope not in self._holds:
            return set()
        self._holds[scope] = True
        kind, namespace = scope
        covered = [k for k in self._runs if namespace is None or k[0] == namespace]
        return self.mark_synced(kind, covered)

    def release(self, scope: Scope) -> None:
        """Stop holding: forget what the hold kept of untracked runs."""
        if self._holds.pop(scope, None) is None:
            return
        namespace = scope[1]
        for key in [k for k in self._held if namespace is None or k[0] == namespace]:
            run = self._held[key]
            run.kinds = kind_set(k for k in run.kinds if self._holding(k, key) is not None)
            self._keep_only(run, run.kinds)
            if run.empty or not run.kinds:
                del self._held[key]
        if not self._runs and not self._holds:
            self._orphans.clear()

    def _holding(self, kind: Kind, key: RunKey) -> bool | None:
        """Whether a hold keeps ``kind`` for run ``key``: ``None`` (no), ``False`` (its list
        is under way), ``True`` (listed whole)."""
        here = self._holds.get((kind, key[0]))
        everywhere = self._holds.get((kind, None))
        if here is None:
            return everywhere
        return here if everywhere is None else here or everywhere

    def tracked(self, key: RunKey) -> RunObjects | None:
        """The run's objects, when someone tracks it."""
        return self._runs.get(key)

    def runs(self) -> list[RunKey]:
        """Every tracked run."""
        return list(self._runs)

    @property
    def size(self) -> dict[str, int]:
        """How many objects are kept, by kind (for stats)."""
        out = {"runs": len(self._runs), "jobsets": 0, "anchors": 0, "jobs": 0, "pods": 0}
        out["workloads"] = 0
        out["events"] = 0
        out["orphan_events"] = len(self._orphans)
        out["held_runs"] = len(self._held)
        for run in self._runs.values():
            out["jobsets"] += run.jobset is not None
            out["anchors"] += run.anchor is not None
            for kind, _ in run.children:
                out[f"{kind.value}s"] += 1
            out["events"] += len(run.events or ())
        return out

    # ------------------------------------------------------------------ writes

    def _route(self, kind: Kind, obj: Mapping[str, Any]) -> RunKey | None:
        key = run_of(kind, obj)
        if key is not None or kind is not Kind.EVENT:
            return key
        subject_kind, namespace, name, _ = event_subject(obj)
        owner_kind = {"Pod": Kind.POD, "Job": Kind.JOB}.get(subject_kind)
        if owner_kind is None:
            return None
        return self._owners.get((owner_kind, namespace, name))

    def keeps(self, kind: Kind, obj: Mapping[str, Any]) -> bool:
        """Whether :meth:`apply` may keep ``obj`` (or note it in a list): an Event, or an
        object of a tracked run or of one a hold keeps. Others need no trimming."""
        if kind is Kind.EVENT:
            return True
        key = run_of(kind, obj)
        return key is not None and (
            key in self._runs or key in self._held or self._holding(kind, key) is not None
        )

    def apply(
        self, kind: Kind, change: Change, obj: Mapping[str, Any], *, trimmed: bool = False
    ) -> RunKey | None:
        """Apply one watch event (or one listed object as ``ADDED``); ``trimmed``: ``obj`` is
        already what is kept of it (:func:`~jobset_core.observe._views.trim`).

        Returns:
            The tracked run that changed, or ``None`` (not tracked, or nothing new).
        """
        key = self._route(kind, obj)
        run = self._runs.get(key) if key is not None else None
        if key is None and kind is Kind.EVENT and change != "DELETED":
            self._keep_orphan(obj)
        if run is None and key is not None and self._holding(kind, key) is not None:
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = RunObjects(key, kind_set(Kind))
            self._write(held, kind, change, obj, trimmed)
            return None  # nobody waits for it
        if run is None or kind not in run.kinds:
            return None
        if self._write(run, kind, change, obj, trimmed):
            run.version += 1
            return run.key
        return None

    def _write(
        self,
        run: RunObjects,
        kind: Kind,
        change: Change,
        obj: Mapping[str, Any],
        trimmed: bool = False,
    ) -> bool:
        namespace, name = object_key(obj)
        if kind is Kind.EVENT:
            return self._write_event(run, change, obj)
        version = _rv(obj)
        tomb = run.tombstone(kind, name)
        if change == "DELETED":
            if version is not None:
                run.bury(kind, name, version)
            removed = self._remove(run, kind, namespace, name, version)
            if removed and kind is Kind.JOB:
                self._keep_gone(run, name, obj)
            return removed
        if tomb is not None and version is not None and version <= tomb:
            return False  # a listing older than the deletion it would undo
        stored = self._stored(run, kind, name)
        if stored is not None and not newer(obj, run.read(stored)):
            return False
        kept = pack(obj if trimmed else trim(kind, obj))
        if stored == kept:
            return False
        if kind.head:
            run.set_head(kind, kept)
        else:
            run.children[(kind, name)] = kept
            # The run's own namespace string: the object's, decoded, would be one more a child
            self._owners[(kind, run.key[0], name)] = run.key
            if stored is None and self._orphans:
                self._adopt_orphans(run, kind, namespace, name)
        return True

    @staticmethod
    def _keep_gone(run: RunObjects, name: str, obj: Mapping[str, Any]) -> None:
        gone = run.gone_jobs = run.gone_jobs or {}
        gone.pop(name, None)
        gone[name] = pack(trim(Kind.JOB, obj))
        while len(gone) > GONE_JOBS:
            del gone[next(iter(gone))]

    def _adopt_orphans(self, run: RunObjects, kind: Kind, namespace: str, name: str) -> None:
        found = [k for k in self._orphans if k[:3] == (kind, namespace, name)]
        for key in found:
            event = self._orphans.pop(key)
            if Kind.EVENT in run.kinds:
                self._write_event(run, "ADDED", unpack(event))

    def _keep_orphan(self, obj: Mapping[str, Any]) -> None:
        """An Event about a pod or Job that belongs to no known run (yet): kept for a while,
        in case the pod's own list is on its way (a run that is being tracked right now)."""
        if obj.get("type") not in (None, "Warning"):
            return
        subject_kind, namespace, name, _ = event_subject(obj)
        owner_kind = {"Pod": Kind.POD, "Job": Kind.JOB}.get(subject_kind)
        if owner_kind is None or not name or not (self._runs or self._holds):
            return
        key = (owner_kind, namespace, name, object_key(obj)[1])
        self._orphans.pop(key, None)
        self._orphans[key] = pack(trim(Kind.EVENT, obj))
        while len(self._orphans) > ORPHAN_EVENTS:
            self._orphans.popitem(last=False)

    @staticmethod
    def _stored(run: RunObjects, kind: Kind, name: str) -> Packed | None:
        """What is kept of the run's object of ``kind`` named ``name``, if anything."""
        if kind.head:  # a head is routed by its own name: the run's
            return run.head(kind) if name == run.key[1] else None
        return run.children.get((kind, name))

    def _remove(
        self, run: RunObjects, kind: Kind, namespace: str, name: str, version: int | None
    ) -> bool:
        stored = self._stored(run, kind, name)
        if stored is None:
            return False
        held = _rv(run.read(stored))
        if version is not None and held is not None and held > version:
            return False  # the deletion is older than what we hold (a re-created namesake)
        if kind.head:
            run.set_head(kind, None)
        else:
            del run.children[(kind, name)]
            self._owners.pop((kind, namespace, name), None)
        return True

    def _write_event(self, run: RunObjects, change: Change, obj: Mapping[str, Any]) -> bool:
        if obj.get("type") not in (None, "Warning"):
            return False
        name = object_key(obj)[1]
        if change == "DELETED":  # Events expire; what they said stays useful
            return False
        kept = pack(trim(Kind.EVENT, obj))
        events = run.events = run.events or {}
        if events.get(name) == kept:
            return False
        events.pop(name, None)
        events[name] = kept
        while len(events) > self._events_per_run:
            del events[next(iter(events))]
        return True

    def relist_page(
        self,
        kind: Kind,
        items: Iterable[Mapping[str, Any]],
        listed: dict[RunKey, set[str]],
        *,
        trimmed: bool = False,
    ) -> set[RunKey]:
        """Apply one page of a complete list (see :meth:`relist_end`); ``listed`` collects,
        per tracked run, the names the list holds; ``trimmed``: as :meth:`apply`.

        Returns:
            The tracked runs that changed.
        """
        changed: set[RunKey] = set()
        for obj in items:
            key = self.apply(kind, "ADDED", obj, trimmed=trimmed)
            if key is not None:
                changed.add(key)
            owner = self._route(kind, obj)
            if owner is not None and (owner in self._runs or owner in self._held):
                listed.setdefault(owner, set()).add(object_key(obj)[1])
        return changed

    def relist_end(
        self,
        kind: Kind,
        listed: Mapping[RunKey, set[str]],
        resource_version: str,
        covers: Iterable[RunKey],
    ) -> set[RunKey]:
        """Finish a complete list of what an informer sees: an object of a run in ``covers``
        (tracked, or kept by a hold) that the list did not hold (and that is not newer than
        the list) is removed, and the kind counts as known for the tracked ones.

        Returns:
            The tracked runs that changed.
        """
        changed: set[RunKey] = set()
        try:
            snapshot: int | None = int(resource_version)
        except ValueError:
            snapshot = None
        for key in covers:
            held = self._held.get(key)
            if key not in self._runs and held is not None:
                self._drop_unlisted(held, kind, listed.get(key, set()), snapshot)
                continue
            run = self._runs.get(key)
            if run is None or kind not in run.kinds:
                continue
            if self._drop_unlisted(run, kind, listed.get(key, set()), snapshot):
                run.version += 1
                changed.add(key)
            if kind not in run.synced:
                run.synced = kind_set(run.synced | {kind})
                run.version += 1
                changed.add(key)
        return changed

    def relist(
        self,
        kind: Kind,
        items: Iterable[Mapping[str, Any]],
        resource_version: str,
        covers: Iterable[RunKey],
    ) -> set[RunKey]:
        """:meth:`relist_page` and :meth:`relist_end` in one call (a list of one page)."""
        listed: dict[RunKey, set[str]] = {}
        changed = self.relist_page(kind, items, listed)
        return changed | self.relist_end(kind, listed, resource_version, covers)

    def _drop_unlisted(
        self, run: RunObjects, kind: Kind, names: set[str], snapshot: int | None
    ) -> bool:
        if kind is Kind.EVENT:
            return False
        if kind.head:
            present = {run.key[1]} if run.head(kind) is not None else set()
        else:
            present = set(run.names(kind))
        dropped = False
        for name in present - names:
            stored = self._stored(run, kind, name)
            held = _rv(run.read(stored)) if stored is not None else None
            if snapshot is not None and held is not None and held > snapshot:
                continue  # written after the list was taken (our own write, or a watch event)
            dropped = self._remove(run, kind, run.key[0], name, None) or dropped
        return dropped

    def mark_synced(self, kind: Kind, covers: Iterable[RunKey]) -> set[RunKey]:
        """Record that ``kind`` is known for these runs without a list (a watch that starts
        where the caller's own object was created: nothing of the run existed before)."""
        changed: set[RunKey] = set()
        for key in covers:
            run = self._runs.get(key)
            if run is not None and kind in run.kinds and kind not in run.synced:
                run.synced = kind_set(run.synced | {kind})
                run.version += 1
                changed.add(key)
        return changed
