"""What the observer keeps of each object, and which run an object belongs to (pure).

A waiter needs a small part of what the API server sends: a pod's labels, phase, conditions
and container states, not its spec; a JobSet's status and the shape of its replicated jobs,
not their pod templates. :func:`trim` keeps that part (as API-shaped plain data, so the pure
decision functions read it like a full object) and drops the rest as soon as an event
arrives: the observer's memory grows with what its waiters need, not with what the cluster
holds.

:func:`run_of` says which run (namespace, JobSet name) an object belongs to, and
:func:`newer` orders two versions of one object by ``resourceVersion`` so a late list never
overwrites a fresher watch event.
"""

from __future__ import annotations

import enum
import json
import zlib
from collections.abc import Mapping
from typing import Any

from jobset_core import labels as L
from jobset_core.pods import mappings, metadata, object_labels
from jobset_core.resources import CONFIG_MAP, EVENT, JOB, JOBSET, POD, WORKLOAD, ApiResource

__all__ = [
    "Kind",
    "Packed",
    "RunKey",
    "event_subject",
    "newer",
    "object_key",
    "pack",
    "run_of",
    "trim",
    "unpack",
]

#: A run is named by its namespace and its JobSet's (or native anchor's) name.
RunKey = tuple[str, str]

_META_KEYS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "generation",
)
#: Labels of children a decision reads (identity of the run, attempt, indexes).
_CHILD_LABELS = (
    L.JOBSET_NAME,
    L.JOBSET_UID,
    L.REPLICATED_JOB_NAME,
    L.JOB_INDEX,
    L.RESTART_ATTEMPT,
    L.JOB_COMPLETION_INDEX,
    L.JOB_KEY,
    L.COORDINATOR,
)
_POD_ANNOTATIONS = (L.JOB_COMPLETION_INDEX,)
#: A pod's conditions a decision reads: ``PodScheduled`` (a pod no node fits) and ``Ready``
#: (the run's view); the rest (``Initialized``, ``ContainersReady``, ...) change with them.
_POD_CONDITIONS = frozenset(("PodScheduled", "Ready"))
_CONDITION_KEYS = ("type", "status", "reason", "message", "lastTransitionTime")
#: What a decision reads of a container's status (its image and IDs it does not).
_CONTAINER_KEYS = ("name", "state", "lastState", "restartCount")
_WORKLOAD_LABELS = (L.KUEUE_JOB_UID, L.KUEUE_QUEUE)


class Kind(enum.Enum):
    """The kinds of object the observer follows, with their API coordinates."""

    JOBSET = "jobset"
    ANCHOR = "anchor"
    JOB = "job"
    POD = "pod"
    EVENT = "event"
    WORKLOAD = "workload"

    @property
    def resource(self) -> ApiResource:
        """Where objects of this kind live."""
        return {
            Kind.JOBSET: JOBSET,
            Kind.ANCHOR: CONFIG_MAP,
            Kind.JOB: JOB,
            Kind.POD: POD,
            Kind.EVENT: EVENT,
            Kind.WORKLOAD: WORKLOAD,
        }[self]

    @property
    def head(self) -> bool:
        """Whether a run has one object of this kind (else many, or Events)."""
        return self in (Kind.JOBSET, Kind.ANCHOR)


def _pick(mapping: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(mapping, Mapping):
        return {}
    return {key: mapping[key] for key in keys if key in mapping and mapping[key] is not None}


def _trimmetadata(
    obj: Mapping[str, Any], *, label_keys: tuple[str, ...] | None = None
) -> dict[str, Any]:
    meta = metadata(obj)
    out = _pick(meta, _META_KEYS)
    found = meta.get("labels")
    if isinstance(found, Mapping) and found:
        out["labels"] = dict(found) if label_keys is None else _pick(found, label_keys)
    owners = meta.get("ownerReferences")
    if owners:
        out["ownerReferences"] = [
            _pick(o, ("apiVersion", "kind", "name", "uid", "controller")) for o in owners
        ]
    return out


def _trim_jobset(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    kept = {key: value for key, value in spec.items() if key != "replicatedJobs"}
    kept["replicatedJobs"] = [
        {"name": r.get("name"), "replicas": r.get("replicas"), "template": {}}
        for r in spec.get("replicatedJobs") or []
        if isinstance(r, Mapping)
    ]
    out: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", JOBSET.api_version),
        "kind": "JobSet",
        "metadata": _trimmetadata(obj),
        "spec": kept,
    }
    if obj.get("status") is not None:
        out["status"] = obj["status"]
    return out


def _trim_job(obj: Mapping[str, Any]) -> dict[str, Any]:
    spec = _pick(obj.get("spec"), ("parallelism", "completions", "suspend", "completionMode"))
    return {
        "metadata": _trimmetadata(obj, label_keys=_CHILD_LABELS),
        "spec": spec,
        "status": {k: v for k, v in (obj.get("status") or {}).items() if v != {}},
    }


def _trim_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = _trimmetadata(obj, label_keys=_CHILD_LABELS)
    notes = _pick(metadata(obj).get("annotations"), _POD_ANNOTATIONS)
    if notes:
        meta["annotations"] = notes
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    containers = [
        {"name": c.get("name")} for c in spec.get("containers") or [] if isinstance(c, Mapping)
    ]
    found = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(found, Mapping)
    status = _pick(found, ("phase", "reason", "message", "startTime"))
    conditions = [
        _pick(c, _CONDITION_KEYS)
        for c in mappings(found.get("conditions"))
        if c.get("type") in _POD_CONDITIONS
    ]
    if conditions:
        status["conditions"] = conditions
    for key in ("initContainerStatuses", "containerStatuses"):
        statuses = [_container_status(s) for s in mappings(found.get(key))]
        if statuses:
            status[key] = statuses
    return {
        "metadata": meta,
        "spec": {"containers": containers, **_pick(spec, ("nodeName", "restartPolicy"))},
        "status": status,
    }


def _container_status(status: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(status, _CONTAINER_KEYS)
    if not out.get("lastState"):  # {}: it never ended before
        out.pop("lastState", None)
    return out


def _trim_event(obj: Mapping[str, Any]) -> dict[str, Any]:
    keep = _pick(
        obj,
        (
            "type",
            "reason",
            "message",
            "count",
            "firstTimestamp",
            "lastTimestamp",
            "eventTime",
            "involvedObject",
        ),
    )
    keep["metadata"] = _pick(metadata(obj), ("name", "namespace", "resourceVersion", "uid"))
    return keep


def _trim_anchor(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _trimmetadata(obj),
        "data": dict(obj.get("data") or {}),
    }


def _trim_workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kueue Workload: what says whether the run is queued, admitted or refused, and why."""
    spec = _pick(obj.get("spec"), ("active", "queueName", "priorityClassName", "priority"))
    status = _pick(
        obj.get("status"),
        ("conditions", "requeueState", "schedulingStats", "accumulatedPastExecutionTimeSeconds"),
    )
    admission = (obj.get("status") or {}).get("admission")
    if isinstance(admission, Mapping):
        status["admission"] = {
            "clusterQueue": admission.get("clusterQueue"),
            "podSetAssignments": [
                _pick(a, ("name", "flavors", "count"))
                for a in admission.get("podSetAssignments") or []
                if isinstance(a, Mapping)
            ],
        }
    return {
        "metadata": _trimmetadata(obj, label_keys=_WORKLOAD_LABELS),
        "spec": spec,
        "status": status,
    }


_TRIMS = {
    Kind.JOBSET: _trim_jobset,
    Kind.ANCHOR: _trim_anchor,
    Kind.JOB: _trim_job,
    Kind.POD: _trim_pod,
    Kind.EVENT: _trim_event,
    Kind.WORKLOAD: _trim_workload,
}


def trim(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``obj`` the observer keeps (API-shaped, much smaller)."""
    return _TRIMS[kind](obj)


#: One kept object as its compact JSON text, compressed (see :func:`pack`).
Packed = bytes

_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
#: Raw deflate with a 4 KiB window (the preset dictionary fits in it): a compressor's state
#: is then a few KiB, not the 256 KiB of zlib's default, made and dropped per object.
_WBITS = -12


def _samples() -> bytes:
    """The preset dictionary packed objects are compressed against: one object of each
    kind in the shape :func:`trim` keeps (its keys, and the values most objects share:
    JobSet labels, condition types, states), with empty names. It is made from the code
    alone, holds no cluster's data, and is never stored (a packed object lives only in the
    process that packed it)."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "", "uid": "", "controller": True}
    meta = {
        "name": "",
        "namespace": "",
        "uid": "",
        "resourceVersion": "",
        "creationTimestamp": "",
        "generation": 1,
        "labels": {key: "0" for key in _CHILD_LABELS},
        "ownerReferences": [owner],
    }
    condition = {"type": "Ready", "status": "True", "lastTransitionTime": ""}
    counts = {"active": 1, "failed": 0, "name": "", "ready": 1, "succeeded": 0, "suspended": 0}
    samples: list[dict[str, Any]] = [
        {
            "type": "Warning",
            "reason": "",
            "message": "",
            "count": 1,
            "firstTimestamp": "",
            "lastTimestamp": "",
            "involvedObject": {"kind": "Pod", "namespace": "", "name": "", "uid": ""},
            "metadata": {"name": "", "namespace": "", "resourceVersion": "", "uid": ""},
        },
        {
            "metadata": {**meta, "labels": {key: "" for key in _WORKLOAD_LABELS}},
            "spec": {"active": True, "queueName": "", "priority": 0},
            "status": {"conditions": [{**condition, "type": "QuotaReserved"}]},
        },
        {
            "apiVersion": JOBSET.api_version,
            "kind": "JobSet",
            "metadata": {**meta, "labels": {}, "ownerReferences": []},
            "spec": {
                "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
                "successPolicy": {"operator": "All"},
                "replicatedJobs": [{"name": "", "replicas": 1, "template": {}}],
            },
            "status": {"replicatedJobsStatus": [counts], "restarts": 0},
        },
        {
            "metadata": {**meta, "ownerReferences": [{**owner, "kind": "JobSet"}]},
            "spec": {"parallelism": 1, "completions": 1, "suspend": False},
            "status": {"active": 1, "ready": 1, "startTime": "", "terminating": 0},
        },
        {
            "metadata": {**meta, "annotations": {L.JOB_COMPLETION_INDEX: "0"}},
            "spec": {"containers": [{"name": ""}], "nodeName": "", "restartPolicy": "Never"},
            "status": {
                "phase": "Running",
                "startTime": "",
                "conditions": [condition, {**condition, "type": "PodScheduled"}],
                "containerStatuses": [
                    {"name": "", "state": {"running": {"startedAt": ""}}, "restartCount": 0}
                ],
            },
        },
    ]
    return "".join(_ENCODE(sample) for sample in samples).encode()


_ZDICT = _samples()
#: A compressor and a decompressor primed with the dictionary, copied for each object (a
#: copy costs half what priming a new one does: 4.7 against 9 us for a 0.5 KiB object).
_PACKER = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 1, zdict=_ZDICT)
_READER = zlib.decompressobj(_WBITS, zdict=_ZDICT)


def pack(obj: Mapping[str, Any]) -> Packed:
    """What the stores keep of a trimmed object: its compact JSON text, deflated against
    :func:`_samples`, read back (:func:`unpack`) only while a waiter looks at the run.

    A waiting task's three trimmed objects took 7.6 KiB as Python objects (a dict, a string,
    a list each, some 80 of them), 2.7 KiB as their text, and take 0.8 KiB packed (5 us to
    pack an object, 10 us to read it back). Equal objects pack to equal bytes: an unchanged
    object written again is seen as unchanged without reading it back."""
    packer = _PACKER.copy()
    return packer.compress(_ENCODE(obj).encode()) + packer.flush()


def unpack(text: Packed) -> dict[str, Any]:
    """A kept object, read back (a fresh dict the caller may keep or drop)."""
    reader = _READER.copy()
    found: dict[str, Any] = json.loads(reader.decompress(text) + reader.flush())
    return found


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object."""
    meta = metadata(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def event_subject(event: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``(kind, namespace, name, uid)`` of the object an Event is about."""
    about = event.get("involvedObject")
    about = about if isinstance(about, Mapping) else {}
    namespace = str(about.get("namespace") or metadata(event).get("namespace") or "")
    return (
        str(about.get("kind") or ""),
        namespace,
        str(about.get("name") or ""),
        str(about.get("uid") or ""),
    )


def run_of(kind: Kind, obj: Mapping[str, Any]) -> RunKey | None:
    """The run an object belongs to, from the object alone; ``None`` when it belongs to none
    (or, for an Event about a pod or a Job, when only the pod's or Job's own labels can tell:
    see the observer)."""
    namespace, name = object_key(obj)
    if kind is Kind.JOBSET:
        return (namespace, name) if name else None
    if kind is Kind.ANCHOR:
        marked = object_labels(obj).get(L.ANCHOR_LABEL) == L.ANCHOR_VALUE
        return (namespace, name) if name and marked else None
    if kind in (Kind.JOB, Kind.POD):
        owner = object_labels(obj).get(L.JOBSET_NAME)
        return (namespace, str(owner)) if owner else None
    if kind is Kind.WORKLOAD:  # Kueue's Workload of a JobSet: controlled by it
        for ref in metadata(obj).get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == "JobSet" and ref.get("name"):
                return (namespace, str(ref["name"]))
        return None
    subject_kind, subject_ns, subject_name, _ = event_subject(obj)
    if subject_kind in ("JobSet", "ConfigMap") and subject_name:
        return (subject_ns, subject_name)
    return None


def _version(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def newer(candidate: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether ``candidate`` is a later version of the object than ``current``.

    ``resourceVersion`` is an etcd revision on every API server this project targets: whole
    numbers, compared as such. When either is not a number the candidate wins (the last
    writer), as it would without this check.
    """
    if current is None:
        return True
    new = _version(metadata(candidate).get("resourceVersion"))
    old = _version(metadata(current).get("resourceVersion"))
    if new is None or old is None:
        return True
    return new >= old
