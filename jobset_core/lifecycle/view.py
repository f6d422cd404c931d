"""The picture of one run for a person (pure): what a UI shows of a JobSet at a glance.

:func:`build_view` turns what the observer holds of a run (its JobSet or native anchor, its
pods and Warning Events), the zones of the nodes its pods run on and the tails of its pods'
logs into one JSON-shaped document:

- ``grid``: replicated job, job index and pod, each pod with its phase, node, zone, slice
  (the node's value of the exclusive-placement topology key, when the JobSet asks for one),
  readiness, container exit code and reason, restart attempt, termination message and log tail;
- ``timeline``: submitted, queued and admitted (Kueue's Workload: reserved, admitted, evicted,
  preempted, requeued, deactivated), first pod started, each restart (with the child Job that
  failed and why), the terminal condition and which policy decided it;
- ``policies``: the success and failure policies as written, with the counts they are judged on;
- ``objects``: the JobSet as submitted (every text redacted, and of its containers'
  environment only the names), its child Jobs (replicated job, index, attempt, counts, state)
  and its headless Service.

Only fields named here are copied out of the objects (never a pod template, an environment
variable or a volume), and every text shown (logs, termination and event messages) goes
through :func:`redact` (bearer tokens, JWTs, ``password=``-style assignments). Nothing here
performs I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobset_core import labels as L
from jobset_core.pods import PodView, metadata

__all__ = [
    "HIDDEN",
    "LOG_LINES",
    "ZONE_LABEL",
    "build_view",
    "decided_by",
    "failed_job_of",
    "redact",
    "redact_spec",
    "slice_keys",
]

#: The node label a pod's zone is read from.
ZONE_LABEL = "topology.kubernetes.io/zone"
#: Lines of each pod's log shown (the newest).
LOG_LINES = 40
#: Characters of one termination message or event message shown.
_TEXT_MAX = 2000

_FIRST_FAILED = re.compile(r"\(first failed job: ([^)\s]+)\)")
_REDACTIONS = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1<redacted>"),
    (re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), "<redacted>"),
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_-]*(?:password|passwd|secret|token|api[_-]?key)"
            r"[A-Za-z0-9_-]*)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
        ),
        r"\1\2<redacted>",
    ),
)
_TERMINAL = ("Completed", "Failed")
#: What stands for a value the view never shows (an environment variable's).
HIDDEN = "<not shown>"
#: Kueue's Workload conditions shown in the timeline: (type, status) -> the entry's kind.
_QUEUE_KINDS = {
    ("QuotaReserved", "False"): "queued",
    ("QuotaReserved", "True"): "reserved",
    ("Admitted", "True"): "admitted",
    ("Evicted", "True"): "evicted",
    ("Preempted", "True"): "preempted",
    ("Requeued", "True"): "requeued",
    ("DeactivationTarget", "True"): "deactivated",
}


def redact(text: str) -> str:
    """``text`` without what looks like a credential: ``Bearer <token>``, a JWT, and the value
    of ``password=``, ``token:``, ``secret=``, ``api_key=`` (and names ending so)."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _short(text: Any) -> str:
    said = redact(str(text or ""))
    return said if len(said) <= _TEXT_MAX else said[: _TEXT_MAX - 1] + "…"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def failed_job_of(message: str) -> str | None:
    """The child Job a restart or failure message names (``(first failed job: <name>)``)."""
    found = _FIRST_FAILED.search(message or "")
    return found.group(1) if found else None


def decided_by(reason: str, failure_policy: Mapping[str, Any]) -> str:
    """Which policy decided a terminal condition of this reason, in words."""
    if reason == "AllJobsCompleted":
        return "successPolicy"
    if reason == "ReachedMaxRestarts":
        return f"failurePolicy.maxRestarts ({failure_policy.get('maxRestarts', 0)})"
    if reason == "FailJobSetFailurePolicyAction":
        names = [
            str(r.get("name") or f"rules[{i}]")
            for i, r in enumerate(_list(failure_policy.get("rules")))
            if r.get("action") == "FailJobSet"
        ]
        return "failurePolicy rule with action FailJobSet" + (
            f" ({', '.join(names)})" if names else ""
        )
    if reason == "FailedJobs":
        return "failurePolicy (a child Job failed and no restart was allowed)"
    return reason or "unknown"


def _time_of(event: Mapping[str, Any]) -> str:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        if event.get(key):
            return str(event[key])
    return ""


def _pod_cell(
    view: PodView,
    zones: Mapping[str, str],
    logs: Mapping[str, str],
    log_lines: int,
    slices: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    node = str(_map(view.raw.get("spec")).get("nodeName") or "")
    ready = any(c.type == "Ready" and c.status == "True" for c in view.conditions)
    main = view.container_statuses[0] if view.container_statuses else None
    ended = (main.terminated or main.last_terminated) if main is not None else None
    reason = ""
    if main is not None:
        reason = main.waiting_reason or (ended.reason if ended else "")
    if not reason:
        reason = str(_map(view.raw.get("status")).get("reason") or "")
    log = logs.get(view.name)
    return {
        "name": view.name,
        "index": view.completion_index,
        "attempt": view.restart_attempt or 0,
        "phase": view.phase or "Pending",
        "node": node,
        "zone": zones.get(node, "") if node else "",
        "slice": (slices or {}).get(node, "") if node else "",
        "ready": ready,
        "exitCode": ended.exit_code if ended else None,
        "reason": reason,
        "containerRestarts": main.restarts if main is not None else 0,
        "terminationMessage": _short(ended.message) if ended else "",
        "started": str(_map(view.raw.get("status")).get("startTime") or ""),
        "deleting": view.deleting,
        "log": None if log is None else redact("\n".join(log.splitlines()[-log_lines:])),
    }


def _grid(
    replicated: Sequence[Mapping[str, Any]],
    pods: Iterable[PodView],
    zones: Mapping[str, str],
    logs: Mapping[str, str],
    log_lines: int,
    *,
    slices: Mapping[str, Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """Replicated job, job index, pods; ``slices``: per replicated job, node -> domain."""
    slices = slices or {}
    by_job: dict[tuple[str, int], list[PodView]] = {}
    strays: list[PodView] = []
    for view in pods:
        if view.replicated_job is None or view.job_index is None:
            strays.append(view)
            continue
        by_job.setdefault((view.replicated_job, view.job_index), []).append(view)
    out: list[dict[str, Any]] = []
    known = set()
    for rj in replicated:
        name = str(rj.get("name") or "")
        replicas = rj.get("replicas")
        count = replicas if isinstance(replicas, int) and replicas >= 0 else 1
        indexes = sorted({*range(count), *(i for (n, i) in by_job if n == name)})
        jobs = []
        for index in indexes:
            known.add((name, index))
            found = sorted(by_job.get((name, index), []), key=_pod_order)
            cells = [_pod_cell(v, zones, logs, log_lines, slices.get(name)) for v in found]
            jobs.append({"index": index, "pods": cells})
        out.append({"name": name, "replicas": count, "jobs": jobs})
    extra = sorted(key for key in by_job if key not in known)
    for name, index in extra:  # pods of a replicated job the spec does not name (any more)
        strays.extend(by_job[(name, index)])
    if strays:
        cells = [_pod_cell(v, zones, logs, log_lines) for v in sorted(strays, key=_pod_order)]
        out.append({"name": "(other pods)", "replicas": 0, "jobs": [{"index": 0, "pods": cells}]})
    return out


def _pod_order(view: PodView) -> tuple[int, int, str, str]:
    return (view.completion_index or 0, view.restart_attempt or 0, view.created, view.name)


def _timeline(
    head: Mapping[str, Any],
    status: Mapping[str, Any],
    pods: Sequence[PodView],
    events: Iterable[Mapping[str, Any]],
    failure_policy: Mapping[str, Any],
    *,
    workload: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    created = metadata(head).get("creationTimestamp")
    if created:
        entries.append({"time": str(created), "kind": "submitted", "text": "JobSet submitted"})
    starts = sorted(
        (s, v.name) for v in pods if (s := str(_map(v.raw.get("status")).get("startTime") or ""))
    )
    if starts:
        when, first = starts[0]
        entries.append({"time": when, "kind": "started", "text": f"first pod started: {first}"})
    entries.extend(_queue_entries(workload))
    restarts_seen: list[dict[str, Any]] = []
    for event in events:
        message = str(event.get("message") or "")
        reason = str(event.get("reason") or "")
        failed = failed_job_of(message)
        about = str(_map(event.get("involvedObject")).get("kind") or "")
        if failed and reason.startswith("Restart"):
            entry = {
                "time": _time_of(event),
                "kind": "restart",
                "text": _short(message),
                "reason": reason,
                "failedJob": failed,
            }
            restarts_seen.append(entry)
            entries.append(entry)
        else:
            entries.append(
                {
                    "time": _time_of(event),
                    "kind": "warning" if event.get("type", "Warning") == "Warning" else "event",
                    "text": _short(f"{about} {reason}: {message}".strip()),
                    "reason": reason,
                }
            )
    conditions = _list(status.get("conditions"))
    for condition in conditions:
        if condition.get("type") != "RestartingJobSet":
            continue
        failed = failed_job_of(str(condition.get("message") or ""))
        if failed and all(r.get("failedJob") != failed for r in restarts_seen):
            entry = {
                "time": str(condition.get("lastTransitionTime") or ""),
                "kind": "restart",
                "text": _short(condition.get("message")),
                "reason": str(condition.get("reason") or ""),
                "failedJob": failed,
            }
            restarts_seen.append(entry)
            entries.append(entry)
    restarts = status.get("restarts")
    restarts = restarts if isinstance(restarts, int) else 0
    for number in range(len(restarts_seen), restarts):
        entries.append(
            {
                "time": "",
                "kind": "restart",
                "text": f"restart {number + 1}: the cluster no longer keeps why",
                "failedJob": None,
            }
        )
    for condition in conditions:
        if condition.get("type") in _TERMINAL and condition.get("status") == "True":
            reason = str(condition.get("reason") or "")
            entries.append(
                {
                    "time": str(condition.get("lastTransitionTime") or ""),
                    "kind": "completed" if condition["type"] == "Completed" else "failed",
                    "text": _short(condition.get("message") or reason),
                    "reason": reason,
                    "decidedBy": decided_by(reason, failure_policy),
                    "failedJob": failed_job_of(str(condition.get("message") or "")),
                }
            )
    # Stable: entries without a time keep their place after the timed ones before them.
    return sorted(entries, key=lambda e: (e["time"] == "", e["time"]))


def _queue_entries(workload: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What Kueue's Workload says of the run's way through its queue, one entry per condition
    (each keeps its last transition), with the ClusterQueue and the evictions counted."""
    if not workload:
        return []
    spec, status = _map(workload.get("spec")), _map(workload.get("status"))
    queue = str(spec.get("queueName") or "")
    entries: list[dict[str, Any]] = []
    created = metadata(workload).get("creationTimestamp")
    if created:
        where = f"LocalQueue {queue}" if queue else "its queue"
        entries.append({"time": str(created), "kind": "queued", "text": f"queued in {where}"})
    cluster_queue = str(_map(status.get("admission")).get("clusterQueue") or "")
    for condition in _list(status.get("conditions")):
        kind = _QUEUE_KINDS.get((str(condition.get("type")), str(condition.get("status"))))
        if kind is None:
            continue
        reason = str(condition.get("reason") or "")
        words = _short(condition.get("message") or "")
        if kind == "admitted" and cluster_queue:
            words = f"admitted by ClusterQueue {cluster_queue}" + (f": {words}" if words else "")
        entries.append(
            {
                "time": str(condition.get("lastTransitionTime") or ""),
                "kind": kind,
                "text": f"{reason}: {words}" if reason and words else (words or reason),
                "reason": reason,
            }
        )
    for item in _list(_map(status.get("schedulingStats")).get("evictions")):
        count = item.get("count")
        if isinstance(count, int) and count > 0:
            cause = str(item.get("underlyingCause") or "")
            text = f"evicted {count}x: {item.get('reason') or '?'}" + (
                f" ({cause})" if cause else ""
            )
            entries.append({"time": "", "kind": "evictions", "text": text})
    return entries


def slice_keys(jobset: Mapping[str, Any]) -> dict[str, str]:
    """Per replicated job, the node label its exclusive placement keys on (the template's
    annotation, else the JobSet's); replicated jobs without one are left out."""
    default = str(_map(metadata(jobset).get("annotations")).get(L.EXCLUSIVE_TOPOLOGY) or "")
    out: dict[str, str] = {}
    for rj in _list(_map(jobset.get("spec")).get("replicatedJobs")):
        notes = _map(_map(_map(rj.get("template")).get("metadata")).get("annotations"))
        key = str(notes.get(L.EXCLUSIVE_TOPOLOGY) or default)
        if key:
            out[str(rj.get("name") or "")] = key
    return out


def _redact_tree(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_tree(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "env" and isinstance(item, list):  # names only: a value may be a secret
            out[key] = [{"name": str(_map(e).get("name") or ""), "value": HIDDEN} for e in item]
        elif key == "envFrom" and isinstance(item, list):
            out[key] = [HIDDEN for _ in item]
        else:
            out[key] = _redact_tree(item)
    return out


def redact_spec(jobset: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet as submitted, for showing: ``metadata`` (name, namespace, labels,
    annotations) and ``spec``, every text through :func:`redact`, and of its containers'
    environment only the variables' names (a value, or where it comes from, may be a secret
    or name one)."""
    meta = metadata(jobset)
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    out = {"metadata": kept, "spec": dict(_map(jobset.get("spec")))}
    redacted: dict[str, Any] = _redact_tree(out)
    return redacted


def _job_rows(jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for job in jobs:
        meta, status = metadata(job), _map(job.get("status"))
        found = _map(meta.get("labels"))
        state, reason = "Running", ""
        if _map(job.get("spec")).get("suspend"):
            state = "Suspended"
        for condition in _list(status.get("conditions")):
            kind = condition.get("type")
            if kind in ("Complete", "Failed") and condition.get("status") == "True":
                state = "Completed" if kind == "Complete" else "Failed"
                reason = _short(
                    ": ".join(
                        str(x) for x in (condition.get("reason"), condition.get("message")) if x
                    )
                )
        rows.append(
            {
                "name": str(meta.get("name") or ""),
                "replicatedJob": str(found.get(L.REPLICATED_JOB_NAME) or ""),
                "index": str(found.get(L.JOB_INDEX) or ""),
                "attempt": str(found.get(L.RESTART_ATTEMPT) or "0"),
                "state": state,
                "reason": reason,
                **{k: status.get(k) or 0 for k in ("active", "ready", "succeeded", "failed")},
            }
        )
    return sorted(rows, key=lambda r: (r["replicatedJob"], r["index"].zfill(6), r["name"]))


def _service_row(service: Mapping[str, Any] | None, expected: str) -> dict[str, Any]:
    if not service:
        return {"name": expected, "exists": False}
    spec = _map(service.get("spec"))
    return {
        "name": str(metadata(service).get("name") or expected),
        "exists": True,
        "clusterIP": str(spec.get("clusterIP") or ""),
        "selector": dict(_map(spec.get("selector"))),
        "publishNotReadyAddresses": bool(spec.get("publishNotReadyAddresses")),
    }


def _policies(
    spec: Mapping[str, Any], status: Mapping[str, Any], replicated: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    success = dict(_map(spec.get("successPolicy"))) or {"operator": "All"}
    failure = dict(_map(spec.get("failurePolicy")))
    counts = {
        str(s.get("name")): {
            key: s.get(key, 0) for key in ("ready", "succeeded", "failed", "active", "suspended")
        }
        for s in _list(status.get("replicatedJobsStatus"))
    }
    targets = [str(t) for t in success.get("targetReplicatedJobs") or []] or [
        str(r.get("name")) for r in replicated
    ]
    replicas = {str(r.get("name")): r.get("replicas", 1) for r in replicated}
    succeeded = {t: counts.get(t, {}).get("succeeded", 0) for t in targets}
    if success.get("operator") == "Any":
        met = any(n > 0 for n in succeeded.values())
    else:
        met = bool(targets) and all(succeeded[t] >= (replicas.get(t) or 0) for t in targets)
    restarts = status.get("restarts") or 0
    towards = status.get("restartsCountTowardsMax")
    return {
        "success": {
            "asWritten": success,
            "targets": targets,
            "succeeded": succeeded,
            "replicas": {t: replicas.get(t) for t in targets},
            "met": met,
        },
        "failure": {
            "asWritten": failure,
            "maxRestarts": failure.get("maxRestarts", 0),
            "restarts": restarts,
            "restartsCountTowardsMax": restarts if towards is None else towards,
        },
        "replicatedJobs": counts,
    }


def build_view(
    *,
    backend: str,
    head: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]] = (),
    zones: Mapping[str, str] | None = None,
    logs: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    log_lines: int = LOG_LINES,
    workload: Mapping[str, Any] | None = None,
    submitted: Mapping[str, Any] | None = None,
    jobs: Iterable[Mapping[str, Any]] = (),
    service: Mapping[str, Any] | None = None,
    service_name: str = "",
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The picture of one run.

    Args:
        backend: ``controller`` or ``native``.
        head: The JobSet (controller) or native anchor as the observer keeps it: its
            ``metadata`` (name, namespace, UID, creation time) is read.
        spec: The JobSet's spec (API-shaped): only ``replicatedJobs`` names and replicas,
            ``successPolicy`` and ``failurePolicy`` are read.
        status: Its status in the JobSet status shape.
        pods: Its pods (API-shaped, trimmed or not).
        events: Events about it, its Jobs and pods, oldest first (Warning ones as the
            observer keeps them, and those a native run's anchor keeps).
        zones: Node name → zone (``topology.kubernetes.io/zone``), for the nodes known.
        logs: Pod name → the tail of its main container's log.
        notes: What could not be read, in words (shown as is).
        log_lines: The most lines of each log shown.
        workload: Kueue's Workload of the run (API-shaped, trimmed or not), when a queue
            holds it.
        submitted: The JobSet as submitted (with its pod templates): its annotations name
            the exclusive-placement key; shown redacted (:func:`redact_spec`).
        jobs: Its child Jobs (API-shaped, trimmed or not).
        service: Its headless Service, when it was read and exists.
        service_name: The Service's name (shown when it does not exist).
        node_labels: Node name -> its labels (at least the zone and the slice keys), for the
            nodes known: the zone and slice of each pod.

    Raises:
        ValueError: ``backend`` is neither ``controller`` nor ``native``, or ``log_lines`` is
            not positive.
    """
    if backend not in ("controller", "native"):
        raise ValueError(f"backend must be 'controller' or 'native', not {backend!r}")
    if log_lines < 1:
        raise ValueError(f"log_lines must be at least 1, not {log_lines}")
    meta = metadata(head)
    replicated = [
        {"name": str(r.get("name") or ""), "replicas": r.get("replicas", 1)}
        for r in _list(spec.get("replicatedJobs"))
    ]
    views = [PodView.of(p) for p in pods]
    events = list(events)
    failure = _map(spec.get("failurePolicy"))
    terminal = next(
        (
            str(c.get("type"))
            for c in _list(status.get("conditions"))
            if c.get("type") in _TERMINAL and c.get("status") == "True"
        ),
        None,
    )
    suspended = any(
        c.get("type") == "Suspended" and c.get("status") == "True"
        for c in _list(status.get("conditions"))
    )
    state = terminal or ("Suspended" if suspended else ("Running" if views else "Pending"))
    found = node_labels or {}
    zones = dict(zones or {}) | {n: z for n, lbl in found.items() if (z := lbl.get(ZONE_LABEL))}
    keys = slice_keys(submitted) if submitted else {}
    slices = {
        rj: {n: v for n, lbl in found.items() if (v := lbl.get(key))} for rj, key in keys.items()
    }
    return {
        "jobset": {
            "name": str(meta.get("name") or ""),
            "namespace": str(meta.get("namespace") or ""),
            "uid": str(meta.get("uid") or ""),
            "backend": backend,
            "created": str(meta.get("creationTimestamp") or ""),
            "state": state,
            "restarts": status.get("restarts") or 0,
            "pods": len(views),
            "sliceKeys": keys,
        },
        "grid": _grid(replicated, views, zones, logs or {}, log_lines, slices=slices),
        "timeline": _timeline(head, status, views, events, failure, workload=workload),
        "policies": _policies(spec, status, replicated),
        "objects": {
            "submitted": redact_spec(submitted) if submitted else None,
            "jobs": _job_rows(jobs),
            "service": _service_row(service, service_name) if service or service_name else None,
        },
        "notes": [str(n) for n in notes],
    }
