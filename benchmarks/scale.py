"""Scale in one triggerer: 1,000 waiting deferred tasks over 1, 10 and 100 namespaces.

For each layout, 1,000 + ``burst`` JobSets wait (one pod each, running until told). Two
phases follow, each a set of subject processes started one after the other, every one a
triggerer's event loop holding a trigger per task:

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

from typing import Any

from benchmarks import audit as A
from benchmarks import phase
from benchmarks.cluster import progress
from benchmarks.context import Context, Floor
from benchmarks.costs import hourly
from benchmarks.phase import Measured
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


def _phase(
    ctx: Context,
    label: str,
    subjects: tuple[tuple[str, str], ...],
    runs: list[WaitingRun],
    burst: list[WaitingRun],
    floor: Floor,
) -> dict[str, Measured]:
    fleets = phase.start(ctx, label, subjects, [r.task() for r in runs])
    keys = {r.key for r in burst}
    ended = finish(ctx.cluster, burst)
    for name, proc in fleets.procs.items():
        try:
            proc.wait_for("fired", 180, count=len(keys), where=lambda m: m["key"] in keys)
        except RuntimeError as error:  # a trigger that never fires is a result, reported
            progress(f"WARNING {label}-{name}: not every trigger of the burst fired: {error}"[:400])
    byes = fleets.stop()
    entries = ctx.read_audit()
    writes = A.Writes(entries)
    seen = floor.seen()
    by_key = {r.key: r for r in runs}
    found: dict[str, Measured] = {}
    for name, kind in subjects:
        m = phase.cost(ctx, fleets, entries, name, kind, byes[name])
        for message in fleets.procs[name].of("fired"):
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
        t1, t2 = fleets.t1, fleets.t2
        user = floor.identity.user
        steady = A.requests_of(entries, user, t1, t2)
        streams = A.open_watches(entries, user, (t1 + t2) / 2)
        found["floor"].hourly = hourly(steady, t2 - t1, streams, {"*": SERVER_DEFAULT_WATCH})
        found["floor"].watches = dict(streams)
    return found


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
