"""Queue awareness in one triggerer: what tasks queued in Kueue cost while they wait, and how
soon the task log says that Kueue admitted a run.

The bench devcluster runs Kueue (v0.17) for this family. The other families' JobSets carry no
queue label, so Kueue's webhooks never see them (they select on the label) and its manager
leaves them alone.

The queue: a ClusterQueue of this run (the devcluster's ResourceFlavor, :data:`QUOTA_CPU`
CPU) for the run's namespaces, a LocalQueue in each of ``queue_namespaces`` namespaces, and a
blocker JobSet that takes the whole quota (admitted first; its pod never ends). Then
``queued`` JobSets, each one pod requesting one CPU, spread over those namespaces: Kueue keeps
every one queued (``Pending``: insufficient *unused* quota, waiting helps), none refused (a
request above the ClusterQueue's maximum would be, by the core, at once). Beside them, in as
many namespaces of their own, as many JobSets without a queue, each with one pod running
until told: the scale family's waiting tasks.

Two phases, each a set of subject processes started one after the other, every one a
triggerer's event loop holding a ``JobSetTrigger`` per task (as
``JobSetOperator(deferrable=True)`` defers, with ``queue`` for the queued ones), for an
identity that may list across namespaces and read Workloads (cluster-wide informers: one
Workload informer) and for one bound in each namespace only (per-namespace informers: one
Workload informer per namespace):

``queued``   over the queued tasks;
``waiting``  the same subjects over the waiting tasks: the anchor (queued / waiting is what
             queue awareness costs a waiting task).

Each phase measures the steady window as the scale family does (:mod:`benchmarks.phase`).
After the queued phase's window, the ClusterQueue's quota grows by ``admitted`` CPUs at once
and Kueue admits that many of the queued runs. For each, the latency runs from the status
write that admitted its Workload (``Admitted=True``; its arrival at the API server, from the
audit log, found below the moment a raw watch of Workloads saw it admitted) to the moment the
trigger logged its progress line of kind ``admitted`` (the task log's line). The floor is
that raw watch's own latency (official client, a subject of its own); no ``cncf.kubernetes``
trigger reads Kueue, so the floor is these figures' anchor too.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import audit as A
from benchmarks import phase
from benchmarks.cluster import BenchCluster, progress, wait_until
from benchmarks.context import Context, Floor
from benchmarks.phase import Measured
from benchmarks.results import Figure
from benchmarks.runs import create_waiting
from benchmarks.stats import percentile, summary
from benchmarks.workloads import BENCH_LABEL, NEVER, jobset_body

__all__ = [
    "admission_ms",
    "beyond_floor",
    "cluster_queue_body",
    "local_queue_body",
    "pending_state",
    "queued_body",
    "run",
    "said_kind",
]

#: Kueue's API (v0.17 serves v1beta2) and the labels it reads and writes.
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: The ResourceFlavor the devcluster comes up with (``tests/cluster/localcluster/kueue.py``).
FLAVOR = "devcluster-flavor"
#: The LocalQueue's name in every queued namespace (never ``default``: Kueue would queue
#: every JobSet of the namespace).
LOCAL_QUEUE = "bench-queue"
#: The ClusterQueue's CPU quota before it is freed: the blocker's request.
QUOTA_CPU = 1
BLOCKER = "blocker"
SUBJECTS = (("queue-cluster", "ours"), ("queue-ns", "ours"))
SUBJECT_NAMES = {"queue-cluster": "cluster-wide identity", "queue-ns": "per-namespace identity"}
ANCHOR = "JobSetTrigger on as many waiting tasks without a queue"
FLOOR = "raw watch of Workloads (official client)"
STATS = (("p50", 50), ("p95", 95), ("max", 100))


# ------------------------------------------------------------------------------ pure parts


def cluster_queue_body(name: str, run: str, cpu: int) -> dict[str, Any]:
    """A ClusterQueue of ``cpu`` CPUs of the devcluster's flavor for the namespaces of run
    ``run`` (labelled with it), first in first out, no preemption."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {BENCH_LABEL: run}},
        "spec": {
            "namespaceSelector": {"matchLabels": {BENCH_LABEL: run}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": quota(cpu),
        },
    }


def quota(cpu: int) -> list[dict[str, Any]]:
    """The ClusterQueue's resource groups with ``cpu`` CPUs (and memory it never lacks)."""
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": FLAVOR,
                    "resources": [
                        {"name": "cpu", "nominalQuota": str(cpu)},
                        {"name": "memory", "nominalQuota": "1Ti"},
                    ],
                }
            ],
        }
    ]


def local_queue_body(cluster_queue: str) -> dict[str, Any]:
    """The LocalQueue :data:`LOCAL_QUEUE` of ``cluster_queue``."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE},
        "spec": {"clusterQueue": cluster_queue},
    }


def queued_body(name: str, *, run: str, queue: str, cpu: int = 1) -> dict[str, Any]:
    """A JobSet of one pod requesting ``cpu`` CPUs, queued in LocalQueue ``queue`` as the
    operator creates it (the queue label, suspended); once admitted its pod never ends."""
    body = jobset_body(name, annotations=NEVER, run=run)
    body["metadata"]["labels"][QUEUE_LABEL] = queue
    body["spec"]["suspend"] = True
    for job in body["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            container["resources"] = {"requests": {"cpu": str(cpu)}}
    return body


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in found if isinstance(c, Mapping) and "type" in c}


def pending_state(workload: Mapping[str, Any]) -> str:
    """Where a Workload stands, in a word: ``admitted``, ``waiting`` (pending for quota that
    is only in use now), ``refused`` (a request above the maximum capacity, or inactive),
    ``new`` (not tried yet) or Kueue's reason otherwise."""
    conds = _conditions(workload)
    if (workload.get("spec") or {}).get("active") is False:
        return "refused"
    admitted = conds.get("Admitted")
    if admitted is not None and admitted.get("status") == "True":
        return "admitted"
    reserved = conds.get("QuotaReserved")
    if reserved is None:
        return "new"
    message = str(reserved.get("message") or "")
    if "maximum capacity" in message and "insufficient unused quota" not in message:
        return "refused"
    if reserved.get("reason") == "Pending" and "insufficient unused quota" in message:
        return "waiting"
    return str(reserved.get("reason") or "new")


def said_kind(line: str, key: str) -> str | None:
    """The kind of a progress line a trigger logged for run ``key`` (``ns/name``):
    ``JobSet ns/name admitted: ...`` is ``admitted``; ``None`` for any other line."""
    head = f"JobSet {key} "
    if not line.startswith(head):
        return None
    kind, sep, _ = line[len(head) :].partition(":")
    return kind if sep and kind and " " not in kind else None


def admission_ms(
    seen: Mapping[str, tuple[str, float]],
    said: Mapping[str, float],
    decisive: Callable[[str, str, float], float | None] | None,
) -> tuple[list[float], list[float]]:
    """Per admitted run, milliseconds from its admission to the trigger's ``admitted`` line
    (ours) and to the raw watch's sighting (the floor).

    Args:
        seen: By run (``ns/name``): its Workload's name and when the raw watch saw it admitted.
        said: By run: when the trigger logged ``admitted`` (runs it never did are left out).
        decisive: When the write a watcher saw at a time reached the API server, as
            :meth:`benchmarks.audit.Writes.decisive` answers for ``(namespace, workload,
            seen)``; ``None`` without an audit log (the admission is then the sighting, and
            the floor is not measured).
    """
    ours: list[float] = []
    floor: list[float] = []
    for key, (workload, sighted) in sorted(seen.items()):
        namespace = key.split("/", 1)[0]
        admitted = decisive(namespace, workload, sighted) if decisive else sighted
        if admitted is None:
            continue
        if decisive is not None:
            floor.append((sighted - admitted) * 1000)
        if key in said:
            ours.append((said[key] - admitted) * 1000)
    return ours, floor


def beyond_floor(seen: Mapping[str, tuple[str, float]], said: Mapping[str, float]) -> list[float]:
    """Per admitted run the trigger logged, milliseconds from the raw watch's sighting to the
    trigger's line (what the waiter adds to what a watch learns; negative: it was first)."""
    return [(said[key] - at) * 1000 for key, (_, at) in sorted(seen.items()) if key in said]


# ------------------------------------------------------------------------------ the cluster


def _workloads(cluster: BenchCluster, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for namespace in namespaces:
        listed = cluster.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, "workloads", label_selector=JOB_UID_LABEL
        )
        found += listed["items"]
    return found


def _owner(workload: Mapping[str, Any]) -> str:
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "JobSet":
            return str(ref.get("name") or "")
    return ""


def _states(cluster: BenchCluster, namespaces: Sequence[str]) -> dict[tuple[str, str], str]:
    """Each JobSet's Workload's state, by (namespace, JobSet)."""
    return {
        (w["metadata"]["namespace"], _owner(w)): pending_state(w)
        for w in _workloads(cluster, namespaces)
    }


def _create_queued(
    cluster: BenchCluster, namespaces: Sequence[str], count: int, timeout: float
) -> list[dict[str, Any]]:
    """``count`` queued JobSets (round robin over ``namespaces``), once Kueue has judged
    every one waiting for quota; the fleet's tasks."""
    items = [(namespaces[i % len(namespaces)], f"q{i}") for i in range(count)]

    def create(item: tuple[str, str]) -> str:
        namespace, name = item
        body = queued_body(name, run=cluster.run, queue=LOCAL_QUEUE)
        made = cluster.custom.create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", body
        )
        return str(made["metadata"]["uid"])

    started = time.monotonic()
    uids = cluster.parallel(create, items, workers=24)
    progress(f"created {count} queued JobSets in {time.monotonic() - started:.1f}s")
    wanted = set(items)
    states: dict[tuple[str, str], str] = {}

    def judged() -> bool:
        nonlocal states
        states = {k: v for k, v in _states(cluster, namespaces).items() if k in wanted}
        refused = [k for k, v in states.items() if v in ("refused", "admitted")]
        if refused:
            raise RuntimeError(f"Kueue did not keep every JobSet queued: {refused[:5]}")
        return len(states) == count and all(v == "waiting" for v in states.values())

    try:
        wait_until(judged, timeout, "Kueue to judge every queued JobSet", interval=2.0)
    except TimeoutError:
        progress(f"WARNING Workloads by state: {dict(Counter(states.values()))}")
        raise
    progress(
        f"{count} Workloads pending for quota, {time.monotonic() - started:.1f}s after the "
        "first create"
    )
    return [
        {"ns": ns, "name": name, "uid": uid, "queue": LOCAL_QUEUE}
        for (ns, name), uid in zip(items, uids, strict=True)
    ]


def _block(cluster: BenchCluster, namespace: str) -> None:
    """The blocker: a queued JobSet that takes the ClusterQueue's whole quota."""
    body = queued_body(BLOCKER, run=cluster.run, queue=LOCAL_QUEUE, cpu=QUOTA_CPU)
    cluster.custom.create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", body
    )

    def admitted() -> bool:
        return _states(cluster, [namespace]).get((namespace, BLOCKER)) == "admitted"

    wait_until(admitted, 180, "Kueue to admit the blocker", interval=1.0)


def _setup_queue(cluster: BenchCluster, namespaces: Sequence[str]) -> str:
    """The ClusterQueue (quota taken by the blocker) and a LocalQueue in each namespace."""
    from kubernetes.client.rest import ApiException

    try:
        cluster.custom.get_cluster_custom_object(GROUP, VERSION, "resourceflavors", FLAVOR)
    except ApiException as error:
        if error.status != 404:
            raise
        raise RuntimeError(
            f"the cluster serves no Kueue {VERSION} ResourceFlavor {FLAVOR!r}: the queue family "
            "needs the devcluster's Kueue (DEVCLUSTER_KUEUE must not be 0)"
        ) from None
    name = f"bench-cq-{cluster.run}"
    cluster.cluster_queue(cluster_queue_body(name, cluster.run, QUOTA_CPU))
    body = local_queue_body(name)
    cluster.parallel(
        lambda ns: cluster.custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, "localqueues", body
        ),
        namespaces,
    )
    _block(cluster, namespaces[0])
    return name


def _free(cluster: BenchCluster, name: str, more: int) -> float:
    """Grow the ClusterQueue's quota by ``more`` CPUs at once; when (epoch seconds)."""
    at = time.time()
    patch = {"spec": {"resourceGroups": quota(QUOTA_CPU + more)}}
    cluster.custom.patch_cluster_custom_object(GROUP, VERSION, "clusterqueues", name, patch)
    return at


# ------------------------------------------------------------------------------ the phases


def _admission(
    ctx: Context, fleets: phase.Fleets, floor: Floor, cq: str
) -> tuple[dict[str, tuple[str, float]], dict[str, dict[str, float]], dict[str, str]]:
    """Free the quota for ``admitted`` runs; wait until the raw watch saw them admitted and
    every subject logged it. The sightings, and each subject's ``admitted`` lines' times (and
    one line's text, as an example)."""
    wanted = ctx.profile.admitted
    freed = _free(ctx.cluster, cq, wanted)
    progress(f"quota freed for {wanted} queued runs")

    def fresh(m: Mapping[str, Any]) -> bool:
        return m.get("resource") == "workloads" and float(m["at"]) >= freed and bool(m.get("owner"))

    try:
        floor.subject.wait_for("seen", 120, count=wanted, where=fresh)
    except RuntimeError as error:
        progress(f"WARNING: the raw watch did not see every admission: {error}"[:400])
    seen = {
        f"{m['ns']}/{m['owner']}": (str(m["name"]), float(m["at"]))
        for m in floor.subject.of("seen")
        if fresh(m) and m["owner"] != BLOCKER
    }
    keys = set(seen)

    def admitted(m: Mapping[str, Any]) -> bool:
        return m["key"] in keys and said_kind(m["line"], m["key"]) == "admitted"

    said: dict[str, dict[str, float]] = {}
    example: dict[str, str] = {}
    for name, proc in fleets.procs.items():
        try:
            proc.wait_for("said", 120, count=len(keys), where=admitted)
        except RuntimeError as error:  # a trigger that never says so is a result, reported
            progress(
                f"WARNING {fleets.label}-{name}: not every admission was logged: {error}"[:400]
            )
        lines = [m for m in proc.of("said") if admitted(m)]
        said[name] = {}
        for m in lines:
            said[name].setdefault(m["key"], float(m["at"]))
        example[name] = str(lines[0]["line"]) if lines else ""
    return seen, said, example


def _queued_said(fleets: phase.Fleets) -> dict[str, int]:
    """How many tasks each subject logged as queued (every one should have)."""
    return {
        name: len({m["key"] for m in proc.of("said") if said_kind(m["line"], m["key"]) == "queued"})
        for name, proc in fleets.procs.items()
    }


@dataclass(frozen=True)
class _Latency:
    """One subject's admission latencies (ms), the floor's, how far its lines came after the
    floor's sightings (ms), and one of its lines."""

    ours: list[float]
    floor: list[float]
    beyond: list[float]
    example: str


def _figures(
    namespaces: int,
    tasks: int,
    queued: dict[str, Measured],
    waiting: dict[str, Measured],
    latency: dict[str, _Latency],
    notes: dict[str, Any],
) -> list[Figure]:
    out: list[Figure] = []

    def add(
        what: str, unit: str, get: Callable[[Measured], float | None], name: str, **params: Any
    ) -> None:
        out.append(
            Figure.of(
                f"queue: {what} ({namespaces} ns, {SUBJECT_NAMES[name]})",
                unit,
                get(queued[name]),
                get(waiting[name]),
                n=tasks,
                anchor_name=ANCHOR,
                namespaces=namespaces,
                **params,
            )
        )

    for name, _ in SUBJECTS:
        m, w = queued[name], waiting[name]
        add(
            "API requests per waiting task-hour",
            "requests",
            lambda x: x.hourly.production / x.tasks if x.hourly else None,
            name,
            counted_at=m.counted_at,
            measured_at_bench_windows=m.hourly.measured / m.tasks if m.hourly else None,
            anchor_measured=w.hourly.measured / w.tasks if w.hourly else None,
            streams=m.hourly.streams if m.hourly else {},
            anchor_streams=w.hourly.streams if w.hourly else {},
        )
        add(
            "API requests at start, per task",
            "requests",
            lambda x: x.start_requests,
            name,
            counted_at=m.counted_at,
        )
        add(
            "watches open",
            "watches",
            lambda x: float(sum(x.watches.values())),
            name,
            by_resource=m.watches,
            anchor_by_resource=w.watches,
        )
        add(
            "Workload informers",
            "informers",
            lambda x: float(x.informers.get("workload", 0)),
            name,
            informers=m.informers,
            anchor_informers=w.informers,
            workload_watches_open=m.watches.get("workloads"),
        )
        add(
            "most watches of one kind in one namespace",
            "watches",
            lambda x: float(x.watches_per_ns_kind),
            name,
        )
        add("TCP connections open", "connections", lambda x: float(x.connections_max), name)
        add("RSS per waiting task", "KiB", lambda x: x.rss_kib_per_task, name)
        add("CPU per waiting task-hour", "ms", lambda x: x.cpu_ms_per_task_hour, name)
        add("event-loop lag p99", "ms", lambda x: x.lag_p99, name)
        add(
            "time until every trigger runs",
            "s",
            lambda x: x.ready_took,
            name,
            probe_timed_out=m.ready_timed_out,
            anchor_probe_timed_out=w.ready_timed_out,
            said_queued=notes["said_queued"].get(name),
            errors=m.errors,
        )
        found = latency[name]
        for stat, q in STATS:
            floor = percentile(found.floor, q)
            out.append(
                Figure.of(
                    f"queue: admission → task log {stat} ({namespaces} ns, {SUBJECT_NAMES[name]})",
                    "ms",
                    percentile(found.ours, q),
                    floor,
                    floor=floor,
                    n=len(found.ours),
                    anchor_name=f"{FLOOR} (no cncf.kubernetes trigger reads Kueue)",
                    floor_name=FLOOR,
                    namespaces=namespaces,
                    waiting_tasks=tasks,
                    admitted_at_once=notes["admitted"],
                    admissions_seen=notes["seen"],
                    beyond_floor_ms=summary(found.beyond),
                    admitting_write_ms=notes["write_ms"],
                    example_line=found.example if stat == "p50" else None,
                )
            )
    return out


def run(ctx: Context) -> list[Figure]:
    profile, cluster = ctx.profile, ctx.cluster
    ctx.identities["queue-cluster"] = cluster.identity(
        "queue-cluster", cluster_wide=True, kueue_reader=True
    )
    ctx.identities["queue-ns"] = cluster.identity("queue-ns", cluster_wide=False, kueue_reader=True)
    floor_identity = cluster.identity("queue-floor", cluster_wide=True, kueue_reader=True)
    queued_ns = cluster.namespaces("bench-q", profile.queue_namespaces)
    waiting_ns = cluster.namespaces("bench-qw", profile.queue_namespaces)
    cluster.grant(ctx.identities["queue-ns"], queued_ns + waiting_ns)
    cq = _setup_queue(cluster, queued_ns)
    settle = max(120.0, profile.queued * 0.6)
    tasks = _create_queued(cluster, queued_ns, profile.queued, settle)
    waiting = create_waiting(cluster, waiting_ns, profile.queued)
    prefix = f"bench-q-{cluster.run}-"
    with ctx.floor(prefix, resources=["workloads"], identity=floor_identity) as floor:
        fleets = phase.start(ctx, "q-queued", SUBJECTS, tasks, said=True)
        seen, said, example = _admission(ctx, fleets, floor, cq)
        said_queued = _queued_said(fleets)
        byes = fleets.stop()
    entries = ctx.read_audit()
    writes = A.Writes(entries)
    decisive = (
        (lambda ns, name, at: writes.decisive("workloads", ns, name, at)) if ctx.audited else None
    )
    queued = {n: phase.cost(ctx, fleets, entries, n, k, byes[n]) for n, k in SUBJECTS}
    latency = {}
    for name, _ in SUBJECTS:
        ours, floor_ms = admission_ms(seen, said[name], decisive)
        beyond = beyond_floor(seen, said[name])
        latency[name] = _Latency(ours, floor_ms, beyond, example[name])
    # How long the API server took to answer each admitting write (its arrival is the zero).
    admitting = [
        writes.decisive_entry("workloads", k.split("/")[0], w, at) for k, (w, at) in seen.items()
    ]
    write_ms = summary([(e.stamp - e.received) * 1000 for e in admitting if e is not None])
    anchors = phase.start(ctx, "q-waiting", SUBJECTS, [r.task() for r in waiting], said=True)
    anchor_byes = anchors.stop()
    entries = ctx.read_audit()
    waited = {n: phase.cost(ctx, anchors, entries, n, k, anchor_byes[n]) for n, k in SUBJECTS}
    for name, m in queued.items():
        workload = m.informers.get("workload", 0)
        if workload > (1 if name == "queue-cluster" else profile.queue_namespaces):
            progress(f"WARNING {name}: {workload} Workload informers for {m.tasks} tasks")
    notes = {
        "said_queued": said_queued,
        "admitted": profile.admitted,
        "seen": len(seen),
        "write_ms": write_ms,
    }
    figures = _figures(profile.queue_namespaces, profile.queued, queued, waited, latency, notes)
    cluster.delete_namespaces(queued_ns + waiting_ns, wait=True)
    cluster.custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq)
    return figures
