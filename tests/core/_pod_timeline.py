"""The pods of the runs in one namespace as the API server announced them, in its order, and
what a restart strategy promises read from that.

A listing after the run cannot tell whether two pods existed at once (a pod that came and
went between two lists is never seen, and a pod's object does not say when it was removed), so
:class:`PodTimeline` watches the namespace's pods from before the first run: every
``ADDED``/``MODIFIED``/``DELETED`` event, with the moment it arrived. Events of one resource
come in the order of their ``resourceVersion``: a pod of attempt N+1 whose ``ADDED`` comes
before the ``DELETED`` of a pod of attempt N was created while that pod still existed
(:func:`overlaps`). Times are for the messages and the holds; the order decides.

Holding a pod (one whose template carries the annotation :data:`HOLD`): a deleted pod goes
only once it has stopped, which a test makes slow. On the kwok nodes (which remove a deleted
pod at once) the template also carries the finalizer :data:`HOLD`, which the timeline removes;
on the real node the container traps SIGTERM and exits only once the file ``<pod>.go`` appears
in a folder it shares with the test (``shared``). When the timeline lets a held pod go is
:func:`release_due`: at once when a pod of a later attempt of its JobSet appeared (the overlap
is there, holding longer only slows the run); a pod of the ``control`` JobSet (plain
``Recreate``) only then; any other once the rest of its attempt has been gone for ``hold``
seconds plus the time the control took to start its new pod after the rest of its attempt
had gone: as long as a ``Recreate`` implementation needed on this cluster at this moment,
however loaded, plus a margin. Leaving the timeline lets every held pod go, so the namespace
can go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobset_core import labels

__all__ = ["HOLD", "PodEvent", "PodTimeline", "overlaps", "release_due"]

#: The annotation of a held pod, and the finalizer that holds it on the kwok nodes.
HOLD = "devcluster.local/hold"
#: A held pod goes after this many seconds in any case (a control that never overlaps).
CAP = 30.0


@dataclass(frozen=True)
class PodEvent:
    """One watch event about a pod of a JobSet (or a native run).

    Attributes:
        seq: Its position in the stream.
        at: ``time.monotonic()`` when it arrived.
        type: ``ADDED``, ``MODIFIED`` or ``DELETED``.
        name: The pod.
        jobset: Its ``jobset-name`` label.
        attempt: Its ``restart-attempt`` label.
        deleting: Whether its ``deletionTimestamp`` is set.
        held: Whether it carries the annotation :data:`HOLD`.
    """

    seq: int
    at: float
    type: str
    name: str
    jobset: str
    attempt: int
    deleting: bool = False
    held: bool = False


def overlaps(events: Iterable[PodEvent]) -> list[str]:
    """Every pod created while a pod of an earlier attempt of its JobSet still existed, in
    words (an empty list: none)."""
    alive: dict[tuple[str, str], int] = {}
    found: list[str] = []
    for event in events:
        key = (event.jobset, event.name)
        if event.type == "DELETED":
            alive.pop(key, None)
            continue
        if event.type == "ADDED":
            older = sorted(
                name
                for (jobset, name), attempt in alive.items()
                if jobset == event.jobset and attempt < event.attempt
            )
            if older:
                found.append(
                    f"{event.jobset}: {event.name} (attempt {event.attempt}) created while "
                    f"{', '.join(older)} of an earlier attempt still existed"
                )
        alive[key] = event.attempt
    return found


def _cleared(same: list[PodEvent], pod: str) -> tuple[int, float | None] | None:
    """For a deleting held ``pod`` among the events of its JobSet: its attempt, and when
    every pod of that attempt or an earlier one that is not held was gone (``None``: one
    still exists; the deletion's start when there is none). ``None`` when not deleting."""
    deleting = [e for e in same if e.name == pod and e.deleting]
    if not deleting:
        return None
    attempt = deleting[0].attempt
    held = {e.name for e in same if e.held}
    last: dict[str, PodEvent] = {}
    for event in same:
        if event.attempt <= attempt and event.name not in held:
            last[event.name] = event
    if any(e.type != "DELETED" for e in last.values()):
        return attempt, None
    return attempt, max([deleting[0].at, *(e.at for e in last.values())])


def _recreate_delay(events: list[PodEvent], jobset: str) -> float | None:
    """Seconds ``jobset`` took from the moment a held pod's attempt was otherwise gone to its
    first pod of a later attempt (``None``: no such pod yet)."""
    same = [e for e in events if e.jobset == jobset]
    for event in same:
        if not (event.held and event.deleting):
            continue
        cleared = _cleared(same, event.name)
        if cleared is None or cleared[1] is None:
            return None
        attempt, since = cleared
        later = next((e for e in same if e.type == "ADDED" and e.attempt > attempt), None)
        return None if later is None else max(0.0, later.at - since)
    return None


def release_due(
    events: Iterable[PodEvent],
    pod: str,
    now: float,
    *,
    hold: float,
    control: str | None = None,
    cap: float = CAP,
) -> bool:
    """Whether a held, deleting ``pod`` may go now (see the module docs).

    Args:
        events: The stream so far.
        pod: The held pod.
        now: ``time.monotonic()``.
        hold: Seconds to keep it after the other pods of its attempt are gone (plus the
            control's delay).
        control: The JobSet with plain ``Recreate`` that calibrates the hold.
        cap: Let it go after this many seconds in any case.
    """
    seen = list(events)
    mine = [e for e in seen if e.name == pod]
    if not mine:
        return False
    jobset = mine[-1].jobset
    same = [e for e in seen if e.jobset == jobset]
    cleared = _cleared(same, pod)
    if cleared is None:
        return False
    attempt, since = cleared
    if any(e.attempt > attempt for e in same):
        return True
    if since is None:
        return False
    waited = now - since
    if waited >= cap:
        return True
    if control is None:
        return waited >= hold
    if jobset == control:
        return False
    delay = _recreate_delay(seen, control)
    return delay is not None and waited >= hold + delay


def _event(seq: int, kind: str, pod: Mapping[str, Any]) -> PodEvent | None:
    meta = pod.get("metadata") or {}
    found = meta.get("labels") or {}
    if labels.JOBSET_NAME not in found:
        return None
    return PodEvent(
        seq=seq,
        at=time.monotonic(),
        type=kind,
        name=str(meta.get("name")),
        jobset=str(found[labels.JOBSET_NAME]),
        attempt=int(found.get(labels.RESTART_ATTEMPT, "0")),
        deleting=meta.get("deletionTimestamp") is not None,
        held=HOLD in (meta.get("annotations") or {}),
    )


class PodTimeline:
    """Watch the pods of ``namespace`` while in the ``with`` block; let held pods go.

    Args:
        devcluster: The cluster (its official client).
        namespace: The namespace (new: nothing in it yet).
        hold: See :func:`release_due`.
        control: See :func:`release_due`.
        shared: The folder the real node's held pods wait in for ``<pod>.go``.
    """

    def __init__(
        self,
        devcluster: Any,
        namespace: str,
        *,
        hold: float,
        control: str | None = None,
        shared: Path | None = None,
    ) -> None:
        self._core = devcluster.core
        self._namespace = namespace
        self._hold, self._control, self._shared = hold, control, shared
        self._events: list[PodEvent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._problems: list[BaseException] = []
        self._released: set[str] = set()
        self._threads = [
            threading.Thread(target=self._guard, args=(self._watch,), daemon=True),
            threading.Thread(target=self._guard, args=(self._release,), daemon=True),
        ]
        self._started = 0.0
        self._version = ""

    # ------------------------------------------------------------------ reading

    def events(self, jobset: str | None = None) -> list[PodEvent]:
        """The events so far (of ``jobset`` only, when given)."""
        with self._lock:
            return [e for e in self._events if jobset is None or e.jobset == jobset]

    def overlaps(self, jobset: str) -> list[str]:
        """:func:`overlaps` of ``jobset``'s pods."""
        return overlaps(self.events(jobset))

    def story(self, jobset: str) -> str:
        """When ``jobset``'s pods came, began to go and went, for a failure message."""
        lines, deleting = [], set()
        for e in self.events(jobset):
            if e.type == "MODIFIED" and (not e.deleting or e.name in deleting):
                continue
            if e.deleting:
                deleting.add(e.name)
            what = "deleting" if e.type == "MODIFIED" else e.type
            lines.append(
                f"  +{e.at - self._started:5.2f}s {what:<8} {e.name} (attempt {e.attempt})"
            )
        return "\n".join(lines)

    def check(self) -> None:
        """Raise what went wrong in the watch or the releases."""
        if self._problems:
            raise self._problems[0]

    # ------------------------------------------------------------------ running

    def __enter__(self) -> PodTimeline:
        self._started = time.monotonic()
        listed = self._core.list_namespaced_pod(self._namespace)
        self._version = listed.metadata.resource_version
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        for pod in self._core.list_namespaced_pod(self._namespace).items:
            if HOLD in (pod.metadata.annotations or {}):
                self._let_go(pod.metadata.name)

    def _guard(self, work: Any) -> None:
        try:
            work()
        except BaseException as error:  # reported by check()
            self._problems.append(error)

    def _watch(self) -> None:
        from kubernetes import watch

        while not self._stop.is_set():
            stream = watch.Watch().stream(
                self._core.list_namespaced_pod,
                self._namespace,
                resource_version=self._version,
                timeout_seconds=1,
            )
            for change in stream:
                pod = change["raw_object"]
                if change["type"] == "ERROR":
                    raise RuntimeError(f"pod watch: {pod}")
                self._version = pod["metadata"]["resourceVersion"]
                with self._lock:
                    event = _event(len(self._events), change["type"], pod)
                    if event is not None:
                        self._events.append(event)

    def _release(self) -> None:
        while not self._stop.wait(0.1):
            now = time.monotonic()
            seen = self.events()
            latest = {e.name: e for e in seen}
            for name, event in latest.items():
                if name in self._released or event.type == "DELETED":
                    continue
                if not (event.held and event.deleting):
                    continue
                if release_due(seen, name, now, hold=self._hold, control=self._control):
                    self._let_go(name)

    def _let_go(self, name: str) -> None:
        """Let the pod stop (real node) and remove the finalizer :data:`HOLD` (kwok); a pod
        already gone is fine."""
        from kubernetes.client.rest import ApiException

        if self._shared is not None:
            (self._shared / f"{name}.go").touch()
        for _ in range(5):
            try:
                pod = self._core.read_namespaced_pod(name, self._namespace)
                finalizers = list(pod.metadata.finalizers or [])
                if HOLD not in finalizers:
                    break
                path = f"/metadata/finalizers/{finalizers.index(HOLD)}"
                self._core.patch_namespaced_pod(
                    name,
                    self._namespace,
                    [{"op": "test", "path": path, "value": HOLD}, {"op": "remove", "path": path}],
                )
                break
            except ApiException as error:
                if error.status == 404:
                    break
                if error.status not in (409, 422):  # changed meanwhile: read it again
                    raise
        self._released.add(name)
