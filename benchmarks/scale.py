"""Scale in one triggerer: 1,000 waiting deferred tasks over 1, 10 and 100 namespaces.

For each layout, 1,000 + ``burst`` JobSets wait (one pod each, running until told). Two
phases follow, each a set of subject processes started together, every one a triggerer's
event loop holding a trigger per task:

``ours``     ``JobSetTrigger`` for an identity that may list across namespaces (the shared
             observer's informers are cluster-wide), the same for an identity bound in each
             namespace only (per-namespace informers), and ``JobSetSensor``'s deferred trigger
             (cluster-wide identity);
``anchors``  ``KubernetesJobTrigger`` on each run's child Job and ``KubernetesPodTrigger`` on
             its pod.

Each phase: the subjects start and settle; for ``window`` seconds they just wait (requests,
watches, connections, RSS, CPU and event-loop lag are measured); then ``burst`` of their runs
end in the same second and each subject's detection latency is timed from the status write
that ended each run (audit log) to the trigger's event. The anchors' phase waits for the
next 1,000 runs, so its burst is fresh too. A raw watch (the floor) runs throughout.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmarks import audit as A
from benchmarks.cluster import progress
from benchmarks.context import Context, Floor
from benchmarks.costs import Hourly, hourly
from benchmarks.proc import Subject
from benchmarks.results import Figure
from benchmarks.runs import WaitingRun, create_waiting, finish
from benchmarks.stats import percentile

__all__ = ["run"]

OURS = (("ours-cluster", "ours"), ("ours-ns", "ours"), ("sensors", "sensor"))
ANCHORS = (("kjt", "kjt"), ("kpt", "kpt"))
ANCHOR = "KubernetesJobTrigger (poll 10 s)"
OTHER = "KubernetesPodTrigger (poll 2 s)"
FLOOR = "raw watch (official client)"
SUBJECT_NAMES = {
    "ours-cluster": "cluster-wide identity",
    "ours-ns": "per-namespace identity",
    "sensors": "JobSetSensor fleet",
}
#: Which object's status decides a task of each kind.
DECISIVE = {"ours": "jobsets", "sensor": "jobsets", "kjt": "jobs", "kpt": "pods"}
#: The server's default for a watch without a timeout is 30-60 min (``--min-request-timeout``
#: 1800 s, times 1 to 2): 45 minutes on average.
SERVER_DEFAULT_WATCH = 2700.0


def production_windows() -> dict[str, float]:
    """How long our observer keeps each watch open in production (from the code)."""
    from jobset_core.observe import _observer

    return {"events": float(_observer.EVENT_WATCH_WINDOW), "*": float(_observer.WATCH_WINDOW)}


@dataclass
class Measured:
    """What one subject cost in one phase."""

    name: str
    kind: str
    tasks: int
    ready_took: float = 0.0
    ready_timed_out: bool | None = None
    start_requests: float | None = None
    hourly: Hourly | None = None
    watches: dict[str, int] = field(default_factory=dict)
    watches_per_ns_kind: int = 0
    connections_max: int = 0
    connections_opened_per_hour: float = 0.0
    rss_kib_per_task: float | None = None
    cpu_ms_per_task_hour: float | None = None
    lag_p99: float | None = None
    detection_ms: list[float] = field(default_factory=list)
    fired: int = 0
    errors: list[str] = field(default_factory=list)
    counted_at: str = "server"


def _client_counts(before: dict[str, Any], after: dict[str, Any]) -> Counter[tuple[str, str]]:
    """The subject's own counts between two samples, as (verb, resource) with resource
    unknown (``*``)."""
    counts: Counter[tuple[str, str]] = Counter()
    for method, n in (after.get("requests") or {}).items():
        delta = n - (before.get("requests") or {}).get(method, 0)
        if delta:
            counts[("watch" if method == "watch" else method.lower(), "*")] += delta
    return counts


def _phase(
    ctx: Context,
    label: str,
    subjects: tuple[tuple[str, str], ...],
    runs: list[WaitingRun],
    burst: list[WaitingRun],
    floor: Floor,
) -> dict[str, Measured]:
    profile = ctx.profile
    ctx.mark_audit()
    t_start = time.time()
    procs: dict[str, Subject] = {}
    for name, kind in subjects:
        identity = ctx.identities[name]
        extras = {"kube_config_path": str(identity.kubeconfig)}
        spec = {
            "kind": kind,
            "tasks": [r.task(extras=extras) for r in runs],
            "watch_window": profile.watch_window if kind in ("ours", "sensor") else None,
        }
        procs[name] = ctx.subject(f"{label}-{name}", "benchmarks.fleet", spec, identity)
    baseline = {}
    for name, proc in procs.items():
        proc.wait_for("baseline", 300)
        baseline[name] = ctx.sampler.look(proc)
        proc.send(cmd="go")
    ctx.sampler.add(procs.values())
    ready = {name: proc.wait_for("ready", 900)[0] for name, proc in procs.items()}
    time.sleep(min(10.0, profile.window / 4))
    first = {name: proc.ask("sample", "sample") for name, proc in procs.items()}
    t1 = time.time()
    # The window's ends, looked at on the spot: the sampler's once-a-second samples may leave
    # a short window with one sample, or none, under load.
    opening = {name: ctx.sampler.look(proc) for name, proc in procs.items()}
    time.sleep(profile.window)
    closing = {name: ctx.sampler.look(proc) for name, proc in procs.items()}
    t2 = time.time()
    second = {name: proc.ask("sample", "sample") for name, proc in procs.items()}
    keys = {r.key for r in burst}
    ended = finish(ctx.cluster, burst)
    for name, proc in procs.items():
        try:
            proc.wait_for("fired", 180, count=len(keys), where=lambda m: m["key"] in keys)
        except RuntimeError as error:  # a trigger that never fires is a result, reported
            progress(f"WARNING {label}-{name}: not every trigger of the burst fired: {error}"[:400])
    byes = {name: proc.stop() for name, proc in procs.items()}
    entries = ctx.read_audit()
    writes = A.Writes(entries)
    seen = floor.seen()
    by_key = {r.key: r for r in runs}
    found: dict[str, Measured] = {}
    for name, kind in subjects:
        user = ctx.identities[name].user
        m = Measured(name, kind, len(runs), ready_took=float(ready[name]["took"]))
        m.ready_timed_out = ready[name].get("timed_out")
        m.errors = list((byes[name] or {}).get("errors", []))
        windows = production_windows() if kind in ("ours", "sensor") else None
        if ctx.audited:
            start = A.requests_of(entries, user, t_start, t1)
            steady = A.requests_of(entries, user, t1, t2)
            streams = A.open_watches(entries, user, (t1 + t2) / 2)
            per_ns = _watches_per_ns(entries, user, (t1 + t2) / 2)
            m.watches = dict(streams)
            m.watches_per_ns_kind = max(per_ns.values(), default=0)
            m.start_requests = sum(start.values()) / len(runs)
        else:
            m.counted_at = "client"
            steady = _client_counts(first[name], second[name])
            informers = (second[name].get("observer") or {}).get("informers") or {}
            streams = Counter({f"{k}s": v for k, v in informers.items()})
            m.watches = dict(streams)
            m.start_requests = float(first[name].get("requests_total", 0)) / len(runs)
        if windows is not None:
            windows = {**windows}
        m.hourly = hourly(steady, t2 - t1, streams, windows)
        inside = ctx.sampler.between(f"{label}-{name}", t1, t2)
        samples = [s for s in (opening[name], *inside, closing[name]) if s is not None]
        if samples:
            m.connections_max = max(s.connections for s in samples)
            base = baseline[name]
            if base is not None:
                m.rss_kib_per_task = (samples[-1].rss - base.rss) / 1024 / len(runs)
            cpu = samples[-1].cpu - samples[0].cpu
            span = samples[-1].t - samples[0].t
            if span > 0:
                m.cpu_ms_per_task_hour = cpu / span * 3600 * 1000 / len(runs)
        opened = second[name]["connections_opened"] - first[name]["connections_opened"]
        m.connections_opened_per_hour = opened / (t2 - t1) * 3600
        m.lag_p99 = (second[name].get("lag") or {}).get("p99")
        proc = procs[name]
        for message in proc.of("fired"):
            run = by_key.get(message["key"])
            if run is None or message["key"] not in keys:
                continue
            m.fired += 1
            resource = DECISIVE[kind]
            obj = {"jobsets": run.name, "jobs": run.job, "pods": run.pod}[resource]
            sighted = seen.get((resource, run.ns, obj), float(message["at"]))
            decided = writes.decisive(resource, run.ns, obj, sighted) if ctx.audited else sighted
            if decided is not None and decided >= ended - 1:
                m.detection_ms.append((float(message["at"]) - decided) * 1000)
        found[name] = m
    floor_ms = []
    for run in burst:
        raw_seen = seen.get(("jobsets", run.ns, run.name))
        decided = (
            writes.decisive("jobsets", run.ns, run.name, raw_seen)
            if raw_seen and ctx.audited
            else None
        )
        if raw_seen is not None and decided is not None:
            floor_ms.append((raw_seen - decided) * 1000)
    found["floor"] = Measured("floor", "floor", len(runs), detection_ms=floor_ms)
    if ctx.audited:
        user = floor.identity.user
        steady = A.requests_of(entries, user, t1, t2)
        streams = A.open_watches(entries, user, (t1 + t2) / 2)
        found["floor"].hourly = hourly(steady, t2 - t1, streams, {"*": SERVER_DEFAULT_WATCH})
        found["floor"].watches = dict(streams)
    return found


def _watches_per_ns(
    entries: list[A.Entry], user: str, at: float
) -> Counter[tuple[str, str | None]]:
    """Open watches at ``at`` by (resource, namespace) (``None``: cluster-wide)."""
    opened: dict[str, A.Entry] = {}
    ended: set[str] = set()
    for entry in entries:
        if entry.user != user or entry.verb != "watch" or entry.stamp > at:
            continue
        if entry.stage == "ResponseStarted":
            opened[entry.audit_id] = entry
        else:
            ended.add(entry.audit_id)
    return Counter((e.resource, e.namespace) for i, e in opened.items() if i not in ended)


def _figures(
    layout: int, tasks: int, burst: int, ours: dict[str, Measured], anchors: dict[str, Measured]
) -> list[Figure]:
    kjt, kpt = anchors["kjt"], anchors["kpt"]
    floor = ours["floor"]
    out: list[Figure] = []
    per_ns = tasks // layout

    def add(
        what: str,
        unit: str,
        get: Any,
        name: str,
        *,
        floor_value: float | None = None,
        **params: Any,
    ) -> None:
        m = ours[name]
        out.append(
            Figure.of(
                f"scale: {what} ({layout} ns, {SUBJECT_NAMES[name]})",
                unit,
                get(m),
                get(kjt),
                floor=floor_value,
                n=tasks,
                anchor_name=ANCHOR,
                other_anchor={OTHER: get(kpt)},
                floor_name=FLOOR if floor_value is not None else None,
                namespaces=layout,
                tasks_per_namespace=per_ns,
                **params,
            )
        )

    for name in ("ours-cluster", "ours-ns", "sensors"):
        m = ours[name]
        hour = lambda x: x.hourly.production / x.tasks if x.hourly else None  # noqa: E731
        floor_hour = floor.hourly.production / tasks if floor.hourly else None
        add(
            "API requests per waiting task-hour",
            "requests",
            hour,
            name,
            floor_value=floor_hour,
            counted_at=m.counted_at,
            measured_at_bench_windows=m.hourly.measured / m.tasks if m.hourly else None,
            anchor_measured=kjt.hourly.measured / kjt.tasks if kjt.hourly else None,
            streams=m.hourly.streams if m.hourly else {},
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
            floor_value=float(sum(floor.watches.values())) if floor.watches else None,
            by_resource=m.watches,
        )
        add(
            "most watches of one kind in one namespace",
            "watches",
            lambda x: float(x.watches_per_ns_kind),
            name,
        )
        add("TCP connections open", "connections", lambda x: float(x.connections_max), name)
        add(
            "TCP connections opened per hour",
            "connections",
            lambda x: x.connections_opened_per_hour,
            name,
        )
        add("RSS per waiting task", "KiB", lambda x: x.rss_kib_per_task, name)
        add("CPU per waiting task-hour", "ms", lambda x: x.cpu_ms_per_task_hour, name)
        add("event-loop lag p99", "ms", lambda x: x.lag_p99, name)
        add(
            f"detection p95, {burst} ending in the same second",
            "ms",
            lambda x: percentile(x.detection_ms, 95),
            name,
            floor_value=percentile(floor.detection_ms, 95),
            fired=m.fired,
            p50=percentile(m.detection_ms, 50),
            max=max(m.detection_ms, default=None),
            anchor_fired=kjt.fired,
            errors=m.errors,
        )
        add(
            "time until every trigger runs",
            "s",
            lambda x: x.ready_took,
            name,
            # The probe's limit was reached: the figure is that limit, not a measured time.
            probe_timed_out=m.ready_timed_out,
            anchor_probe_timed_out=kjt.ready_timed_out,
        )
    return out


def run(ctx: Context) -> list[Figure]:
    profile = ctx.profile
    for name, _ in OURS + ANCHORS:
        if name != "ours-ns":
            ctx.identity(name)
    ctx.identities["ours-ns"] = ctx.cluster.identity("ours-ns", cluster_wide=False)
    figures: list[Figure] = []
    for layout in profile.layouts:
        prefix = f"bench-s{layout}"
        namespaces = ctx.cluster.namespaces(prefix, layout)
        ctx.cluster.grant(ctx.identities["ours-ns"], namespaces)
        runs = create_waiting(ctx.cluster, namespaces, profile.tasks + profile.burst)
        with ctx.floor(prefix + "-") as floor:
            ours = _phase(
                ctx, f"s{layout}-ours", OURS, runs[: profile.tasks], runs[: profile.burst], floor
            )
            anchors = _phase(
                ctx,
                f"s{layout}-anchors",
                ANCHORS,
                runs[profile.burst : profile.burst + profile.tasks],
                runs[profile.burst : 2 * profile.burst],
                floor,
            )
        figures += _figures(layout, profile.tasks, profile.burst, ours, anchors)
        ctx.cluster.delete_namespaces(namespaces, wait=True)
    return figures
