"""Detection latency: from the status write that ends a run to the moment its waiter answers.

Every way in (the operator in worker mode, deferred, the sensor poking and deferred) on both
backends, and the anchors ``KubernetesJobTrigger`` (on a Job) and ``KubernetesPodTrigger``
(on a pod), run side by side, round after round, their runs all ending in the same second
(see :mod:`benchmarks.ways`). The moment a run ended is the API server's: the end of the
status write that decided it (the JobSet's on the controller backend, the child Job's on
native, as each way's verdict reads them), found in the audit log below the moment the floor's
raw watch saw it. The floor is that raw watch's own latency; for the poking sensor on the
native backend, whose answer carries the write that records the run's end (its process may
exit right after its poke), it is that raw watch and one write after it (the floor's own, see
:mod:`benchmarks.floor`). Round 0 warms up (not counted).
"""

from __future__ import annotations

import time
from collections import defaultdict

from benchmarks import audit as A
from benchmarks.cluster import progress
from benchmarks.context import Context
from benchmarks.results import Figure
from benchmarks.stats import percentile

__all__ = ["run"]

WAYS = ("worker", "deferrable", "sensor_poke", "sensor_deferrable")
BACKENDS = ("controller", "native")
ANCHOR = "KubernetesJobTrigger (poll 10 s)"
OTHER = "KubernetesPodTrigger (poll 2 s)"
FLOOR = "raw watch (official client)"
RECORDING_FLOOR = "raw watch, then one write (official client)"
#: The ways whose answer carries the write that records a run's end, by backend.
RECORDING = {("sensor_poke", "native")}
STATS = (("p50", 50), ("p95", 95), ("max", 100))


def run(ctx: Context) -> list[Figure]:
    profile = ctx.profile
    cluster = ctx.cluster
    namespace = cluster.namespaces("bench-detect", 1)[0]
    admin = cluster.admin_identity()
    ctx.mark_audit()
    with ctx.floor("bench-detect-", record=True) as floor:
        rounds = [
            {"r": r, "start": r * profile.period, "at": r * profile.period + profile.lead}
            for r in range(profile.rounds)
        ]
        common = {
            "namespace": namespace,
            "run": cluster.run,
            "rounds": rounds,
            "backends": list(BACKENDS),
            "extras": {"kube_config_path": str(admin.kubeconfig)},
        }
        # A process per way and backend, as each Airflow task runs in a process of its own
        # (threads of one process would also wait for each other's share of its GIL).
        workers = [
            ctx.subject(
                f"ways-{way}-{backend}",
                "benchmarks.ways",
                {**common, "mode": "workers", "ways": [way], "backends": [backend]},
                admin,
            )
            for way in ("worker", "sensor_poke")
            for backend in BACKENDS
        ]
        triggerer = ctx.subject(
            "ways-triggerer",
            "benchmarks.ways",
            {
                **common,
                "mode": "triggerer",
                "ways": ["deferrable", "sensor_deferrable", "kjt", "kpt"],
            },
            admin,
        )
        subjects = [*workers, triggerer]
        for subject in subjects:
            subject.wait_for("ready", 300)
        t0 = time.time() + 1
        for subject in subjects:
            subject.send(cmd="go", t0=t0)
        ends = t0 + rounds[-1]["at"] + 150
        fired = []
        for subject in subjects:
            subject.wait_for("bye", max(60.0, ends - time.time()))
            for error in subject.of("error"):
                progress(f"WARNING {subject.name}: {error['what']}: {error['error']}")
            fired += subject.of("fired")
        seen = floor.seen()
        recorded = floor.recorded()
    entries = ctx.read_audit()
    writes = A.Writes(entries)
    latencies: dict[tuple[str, str], list[float]] = defaultdict(list)
    floors: dict[tuple[str, str], list[float]] = defaultdict(list)
    for message in fired:
        if message["round"] == 0:
            continue
        key = (message["resource"], message["ns"], message["name"])
        sighted = seen.get(key)
        reference = sighted if sighted is not None else float(message["at"])
        decided = writes.decisive(*key, reference) if ctx.audited else sighted
        if decided is None:
            continue
        column = (message["way"], message["backend"])
        latencies[column].append((float(message["at"]) - decided) * 1000)
        floor_at = recorded.get(key) if column in RECORDING else sighted
        if floor_at is not None and ctx.audited:
            floors[column].append((floor_at - decided) * 1000)
    kjt = latencies[("kjt", "-")]
    kpt = latencies[("kpt", "-")]
    figures = []
    for way in WAYS:
        for backend in BACKENDS:
            ours = latencies[(way, backend)]
            for stat, q in STATS:
                figures.append(
                    Figure.of(
                        f"detection: {stat}, {way.replace('_', ' ')} ({backend})",
                        "ms",
                        percentile(ours, q),
                        percentile(kjt, q),
                        floor=percentile(floors[(way, backend)], q),
                        n=len(ours),
                        anchor_name=ANCHOR,
                        other_anchor={OTHER: percentile(kpt, q)},
                        floor_name=RECORDING_FLOOR if (way, backend) in RECORDING else FLOOR,
                        anchor_n=len(kjt),
                        rounds=profile.rounds - 1,
                        reference="end of the deciding status write (audit log)"
                        if ctx.audited
                        else "the raw watch's sighting (no audit log)",
                    )
                )
    cluster.delete_namespaces([namespace])
    return figures
