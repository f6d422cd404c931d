"""The anchor of a native run: one ConfigMap per JobSet that owns everything the run creates.

Clusters without the JobSet controller have no JobSet resource to hang the child objects on, so
the native backend stores the JobSet in a ConfigMap of the same name:

* ``data["jobset.json"]``: the defaulted JobSet (``apiVersion``, ``kind``, ``metadata`` with
  name, labels and annotations, ``spec``), the ``spec`` a reconcile pass plans against;
* ``data["status.json"]``: a status of exactly the JobSet status shape (``conditions``,
  ``terminalState``, ``restarts``, ``restartsCountTowardsMax``, ``replicatedJobsStatus``),
  written after every change with the anchor's ``resourceVersion`` as a precondition, so any
  process can read it and a new process resumes where the last one stopped;
* labels: the JobSet's own labels, the caller's identity labels, ``jobset-name`` and the
  :data:`ANCHOR_LABEL` marker (so a label selector finds native runs as it finds JobSets).

The headless Service and the child Jobs carry a controller owner reference to the anchor
(``blockOwnerDeletion``), so deleting the anchor removes the whole run by garbage collection.
Everything here is pure: building, parsing and patch bodies; the backend sends them. The one
state kept is a bounded memo of the last heads parsed (:func:`read_anchor`,
:func:`read_jobset`), by the identity of the object read: the same input, the same result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobset_core import labels
from jobset_core.defaults import with_defaults
from jobset_core.errors import NotAnAnchor
from jobset_core.models import JobSet, JobSetStatus

__all__ = [
    "ANCHOR_KIND",
    "ANCHOR_LABEL",
    "ANCHOR_VALUE",
    "EVENTS_KEPT",
    "EVENTS_KEY",
    "JOBSET_KEY",
    "STATUS_KEY",
    "Anchor",
    "anchor_events",
    "build_anchor",
    "not_an_anchor",
    "owner_reference",
    "parse_anchor",
    "read_anchor",
    "read_jobset",
    "status_patch",
    "suspend_patch",
    "with_patch",
]

ANCHOR_LABEL = labels.ANCHOR_LABEL
ANCHOR_VALUE = labels.ANCHOR_VALUE
ANCHOR_KIND = "ConfigMap"
JOBSET_KEY = "jobset.json"
STATUS_KEY = "status.json"
#: The Events upstream emits on a JobSet (a restart's names the Job that failed), kept on the
#: anchor of a native run, which emits none: the newest :data:`EVENTS_KEPT`, oldest first.
EVENTS_KEY = "events.json"
EVENTS_KEPT = 16


@dataclass(frozen=True)
class Anchor:
    """An anchor ConfigMap as read from the API server.

    Attributes:
        name: The ConfigMap's (and the JobSet's) name.
        namespace: Its namespace.
        uid: The ConfigMap's UID: the ``jobset-uid`` label and owner of every child object.
        resource_version: Precondition of the next status write.
        labels: The ConfigMap's labels (identity labels included).
        jobset: The stored JobSet with ``metadata.uid`` = :attr:`uid`, the anchor's creation
            and deletion timestamps, and :attr:`status` as ``status``: what a reconcile pass
            plans against.
    """

    name: str
    namespace: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    jobset: JobSet
    events: tuple[Mapping[str, Any], ...] = ()

    @property
    def status(self) -> JobSetStatus:
        """The stored status (empty before the first pass)."""
        return self.jobset.status or JobSetStatus()

    @property
    def created_at(self) -> str | None:
        """The anchor's ``creationTimestamp``."""
        return self.jobset.metadata.creation_timestamp

    @property
    def deleting(self) -> bool:
        """Whether the anchor is being deleted (the run is going away)."""
        return self.jobset.metadata.deletion_timestamp is not None


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _stored_jobset(jobset: JobSet) -> dict[str, Any]:
    meta = jobset.metadata
    stored_meta = {
        key: value
        for key, value in (
            ("name", meta.name),
            ("generateName", meta.generate_name),
            ("labels", meta.labels),
            ("annotations", meta.annotations),
        )
        if value
    }
    return {
        "apiVersion": jobset.api_version,
        "kind": jobset.kind,
        "metadata": stored_meta,
        "spec": jobset.spec.to_dict(),
    }


def build_anchor(
    jobset: JobSet, namespace: str, identity: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The anchor ConfigMap to create for ``jobset`` (defaults applied, empty status).

    The ConfigMap takes the JobSet's ``name`` (or ``generateName``: the API server then names
    both) and its ``ownerReferences``. Labels: the JobSet's own, the identity labels,
    ``jobset-name`` when the name is known, the marker.

    Args:
        jobset: The JobSet as the user wrote it.
        namespace: Where the run lives.
        identity: The identity labels (:func:`jobset_core.identity.identity_labels`),
            checked before an existing anchor is adopted.
    """
    defaulted = with_defaults(jobset)
    meta: dict[str, Any] = {"namespace": namespace}
    if defaulted.metadata.name:
        meta["name"] = defaulted.metadata.name
    else:
        meta["generateName"] = defaulted.metadata.generate_name
    anchor_labels = {**(defaulted.metadata.labels or {}), **(identity or {})}
    if defaulted.metadata.name:
        anchor_labels[labels.JOBSET_NAME] = defaulted.metadata.name
    anchor_labels[ANCHOR_LABEL] = ANCHOR_VALUE
    meta["labels"] = dict(sorted(anchor_labels.items()))
    if defaulted.metadata.owner_references:  # the JobSet's owners own what stands for it
        meta["ownerReferences"] = [ref.to_dict() for ref in defaulted.metadata.owner_references]
    return {
        "apiVersion": "v1",
        "kind": ANCHOR_KIND,
        "metadata": meta,
        "data": {JOBSET_KEY: _dumps(_stored_jobset(defaulted)), STATUS_KEY: _dumps({})},
    }


def parse_anchor(obj: Mapping[str, Any]) -> Anchor:
    """Read an anchor ConfigMap as the API server returns it.

    Raises:
        NotAnAnchor: The object lacks the marker label or its data does not parse.
    """
    why = not_an_anchor(obj)
    if why is not None:
        raise NotAnAnchor(why)
    meta = obj.get("metadata") or {}
    obj_labels = dict(meta.get("labels") or {})
    data = obj.get("data") or {}
    try:
        stored = json.loads(data[JOBSET_KEY])
        status = json.loads(data.get(STATUS_KEY) or "{}")
        jobset = JobSet.model_validate(stored)
        jobset.status = JobSetStatus.model_validate(status) if status else None
    except (KeyError, TypeError, ValueError) as err:
        raise NotAnAnchor(f"its data is not a stored JobSet: {err}") from err
    name, namespace, uid = meta.get("name") or "", meta.get("namespace") or "", meta.get("uid")
    jobset.metadata.name = name
    jobset.metadata.generate_name = None
    jobset.metadata.namespace = namespace
    jobset.metadata.uid = uid
    jobset.metadata.creation_timestamp = meta.get("creationTimestamp")
    jobset.metadata.deletion_timestamp = meta.get("deletionTimestamp")
    return Anchor(
        name=name,
        namespace=namespace,
        uid=str(uid or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=obj_labels,
        jobset=jobset,
        events=tuple(_kept_events(data)),
    )


class _Reads:
    """The last objects parsed, by the identity of the object read (held, so that its identity
    stays its own): what a waiter reads of its run's head, the same object in each part of
    one pass (to drive it, to judge it, for its result and for its log follower)."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._found: dict[int, tuple[object, Any]] = {}
        self._lock = threading.Lock()  # worker mode waits in threads of one process

    def read(self, obj: object, parse: Callable[[Any], Any]) -> Any:
        key = id(obj)
        with self._lock:
            found = self._found.get(key)
        if found is not None and found[0] is obj:
            return found[1]
        parsed = parse(obj)
        with self._lock:
            while len(self._found) >= self._kept:
                del self._found[next(iter(self._found))]
            self._found[key] = (obj, parsed)
        return parsed


#: Runs whose heads stay parsed: a burst of runs ending together reads each one's several
#: times, between the reads of others.
READS_KEPT = 16
_ANCHORS = _Reads(READS_KEPT)
_JOBSETS = _Reads(READS_KEPT)


def read_anchor(obj: Mapping[str, Any]) -> Anchor:
    """:func:`parse_anchor`, parsed once for the same object (the observer's copy, which is
    replaced, never changed): 0.15 ms each time, four to six times in a waiter's pass. The
    result is shared by those who read the same object: to read, never to change.

    Raises:
        NotAnAnchor: As :func:`parse_anchor`.
    """
    found: Anchor = _ANCHORS.read(obj, parse_anchor)
    return found


def read_jobset(obj: Mapping[str, Any]) -> JobSet:
    """``JobSet.model_validate``, once for the same JobSet object (as :func:`read_anchor`)."""
    found: JobSet = _JOBSETS.read(obj, JobSet.model_validate)
    return found


def _kept_events(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    try:
        found = json.loads(data.get(EVENTS_KEY) or "[]")
    except (TypeError, ValueError):
        return []  # a damaged record of the past does not stop the run
    if not isinstance(found, list):
        return []
    return [dict(e) for e in found if isinstance(e, dict)][-EVENTS_KEPT:]


def anchor_events(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Events kept on an anchor (its :data:`EVENTS_KEY`), shaped as the API server's
    Events about the JobSet (``type``, ``reason``, ``message``, ``lastTimestamp``,
    ``involvedObject``); none when there are none or they do not parse."""
    meta = obj.get("metadata") or {}
    about = {"kind": "JobSet", "name": meta.get("name"), "namespace": meta.get("namespace")}
    return [
        {
            "type": str(e.get("type") or ""),
            "reason": str(e.get("reason") or ""),
            "message": str(e.get("message") or ""),
            "lastTimestamp": str(e.get("time") or ""),
            "involvedObject": about,
        }
        for e in _kept_events(obj.get("data") or {})
    ]


def not_an_anchor(obj: Mapping[str, Any]) -> str | None:
    """Why an existing object is not the anchor of a native run (``None`` when it is one).

    Whether it is *this* run's anchor is decided by its identity labels and UID
    (:func:`jobset_core.identity.adoption_problem`).
    """
    meta = obj.get("metadata") or {}
    found = meta.get("labels") or {}
    if obj.get("kind", ANCHOR_KIND) != ANCHOR_KIND:
        return f"it is a {obj.get('kind')}, not a {ANCHOR_KIND}"
    if found.get(ANCHOR_LABEL) != ANCHOR_VALUE:
        return f"it is not a native JobSet anchor (no {ANCHOR_LABEL}={ANCHOR_VALUE} label)"
    return None


def owner_reference(anchor: Anchor) -> dict[str, Any]:
    """The controller owner reference every child object of the run carries."""
    return {
        "apiVersion": "v1",
        "kind": ANCHOR_KIND,
        "name": anchor.name,
        "uid": anchor.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def status_patch(
    status: JobSetStatus,
    resource_version: str,
    events: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A merge patch writing ``status`` (and, when given, the kept ``events``); the
    ``resourceVersion`` makes it compare-and-swap (a write over a newer anchor is refused with
    409 Conflict)."""
    data = {STATUS_KEY: _dumps(status.to_dict())}
    if events is not None:
        data[EVENTS_KEY] = _dumps(list(events)[-EVENTS_KEPT:])
    return {"metadata": {"resourceVersion": resource_version}, "data": data}


def with_patch(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The anchor ``obj`` as it reads once the merge patch ``patch`` (of :func:`status_patch`)
    is written: its data keys replaced, its ``resourceVersion`` one above ``obj``'s.

    A ``resourceVersion`` is an etcd revision: the write, or whichever write comes first, lands
    at a later one, so its answer and watch event replace this view, while a late watch event
    of ``obj`` itself (the same version, the earlier content) no longer does. A version that
    is not a number is kept (every version then replaces it)."""
    data = {**(obj.get("data") or {}), **(patch.get("data") or {})}
    meta = dict(obj.get("metadata") or {})
    version = str(meta.get("resourceVersion") or "")
    if version.isdigit():
        meta["resourceVersion"] = str(int(version) + 1)
    return {**obj, "metadata": meta, "data": data}


def suspend_patch(anchor: Anchor, suspend: bool) -> dict[str, Any]:
    """A compare-and-swap merge patch setting ``spec.suspend`` of the stored JobSet."""
    stored = _stored_jobset(anchor.jobset)
    stored["spec"]["suspend"] = suspend
    return {
        "metadata": {"resourceVersion": anchor.resource_version},
        "data": {JOBSET_KEY: _dumps(stored)},
    }
